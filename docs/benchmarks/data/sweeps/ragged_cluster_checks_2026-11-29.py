"""Correctness check behind docs/benchmarks/big_shapes_and_server.md (the cluster splits' relaxed end, 00f53a3): each
ragged shape's first cluster-split prior of small and hopper_raw through every evaluator check (run from the
repository root on a GPU machine). Passed on an H200, 2026-11-29: five kernels, three ragged shapes."""
import sys, time; sys.path.insert(0, '.')
from concurrent.futures import ThreadPoolExecutor
from agent.families import get
from evaluator.api import compile_only, evaluate
t0 = time.time()
jobs = []
for shape in [(48, 2000, 4096), (40, 120, 1024), (200, 64, 8192)]:
    for fam in ('small', 'hopper_raw'):
        ps = [p for p in get(fam).priors(shape, 'fp32') if p.get('cluster_k', 1) > 1]
        if ps:
            jobs.append((shape, fam, ps[0], get(fam).render(ps[0])))
with ThreadPoolExecutor(len(jobs)) as ex:  # builds cached by content, so evaluate finds them
    list(ex.map(lambda j: compile_only(j[3], j[0]), jobs))
print('built', round(time.time() - t0), flush=True)
for shape, fam, p, src in jobs:
    r = evaluate(src, shape, mode='back-to-back', rounds=3)
    print(shape, fam, p.get('cluster_k'), r.status, r.reason[:150], round(time.time() - t0), flush=True)
