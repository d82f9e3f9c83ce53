"""One-off probe behind docs/benchmarks/data/server_shift_preludes_h200_2026-11-28_9cb0450.json (run from the
repository root on a GPU machine; CUDA_VISIBLE_DEVICES, EVALS, LABEL, OUT). Diagnostic: in server mode the NVIDIA
baselines' medians moved together by ~+0.9 us in some evaluations of small shapes while the candidate's did not.
Time each winner (PDL), its no-PDL twin and the wmma reference as rivals, many evaluations, in one pool and in fresh
pools, and record every callable's median per evaluation. Run it twice: as the tree is (server prelude
"activations") and after
  sed -i 's/"prelude": "activations"}/"prelude": "refill"}/' evaluator/timing.py
(LABEL=activations / LABEL=refill): committed tables before e994a03 (the activations prelude) show no such spread
on the same shapes (64x64x128 1.044 / 1.046 / 1.047 at a1259ae; now 1.049 / 1.054 / 1.184)."""
import json, os, sys, time
sys.path.insert(0, '.')
from pathlib import Path
from agent.families import get
from evaluator.api import evaluate
from evaluator.pool import WorkerPool

DATA = Path(__file__).parents[1] / 'server_shift_preludes_h200_2026-11-28_9cb0450.json'
out = Path(os.environ.get('OUT', '/tmp')) / f"server_shift_{os.environ.get('LABEL', 'x')}.json"
winners = json.loads(DATA.read_text())['winners']
wmma = Path('tests/kernels/reference_wmma.cu').read_text()
rows = []
shared = WorkerPool(gpus=[0])
t0 = time.time()
for name, w in winners.items():
    shape = tuple(map(int, name.split('x')))
    src = get(w['family']).render(w['params'])
    twin = get(w['family']).render(dict(w['params'], pdl=False))
    for i in range(int(os.environ.get('EVALS', '6'))):
        fresh = i % 2 == 1
        pool = WorkerPool(gpus=[0]) if fresh else shared
        try:
            r = evaluate(src, shape, mode='server', pool=pool, rivals={'nopdl': twin, 'wmma': wmma})
        finally:
            if fresh:
                pool.close()
        if r.status != 'ok':
            rows.append({'shape': name, 'eval': i, 'status': r.status, 'reason': r.reason[:300]})
            print(name, i, r.status, r.reason[:200], flush=True)
            out.write_text(json.dumps(rows, indent=1))
            continue
        b = {k: v.median_us for k, v in r.baselines.items()}
        rows.append({'shape': name, 'eval': i, 'fresh_pool': fresh, 'cand': r.candidate.median_us,
                     'cand_min': r.candidate.min_us, 'baselines_min': {k: v.min_us for k, v in r.baselines.items()},
                     'rivals_min': {k: v.min_us for k, v in r.rivals.items()},
                     'rivals': {k: v.median_us for k, v in r.rivals.items()}, 'baselines': b,
                     'best_base': min(b.values()), 'gpu': r.gpu, 't': round(time.time() - t0, 1),
                     'rounds_us': r.candidate.detail.get('timing', {}).get('rounds_us')})
        x = rows[-1]
        print(name, i, 'fresh' if fresh else 'shared', 'cand %.2f nopdl %.2f wmma %.2f best_base %.2f' % (
            x['cand'], x['rivals'].get('nopdl', 0), x['rivals'].get('wmma', 0), x['best_base']), flush=True)
        out.write_text(json.dumps(rows, indent=1))
shared.close()
