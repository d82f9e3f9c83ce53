"""One-off probe behind docs/benchmarks/data/relaxed_cluster_end_h200_2026-11-28_*.json (run from the repository
root on a GPU machine; OUT, DEADLINE_S). The split kernels that sum their K-slices over a thread-block cluster
(`small` and `hopper_raw` with cluster_k > 1) end with a cluster barrier, so that no CTA leaves while another still
reads its shared memory. With release semantics that barrier first waits for the thread's stores of C to be
acknowledged (Nsight Compute: `membar` the top stall of 64x128x1024's winner); a relaxed arrive does not. The tree's
kernels end relaxed; each is timed beside its twin with the release arrive (the old end, made by substitution), in
the same rounds, against best NVIDIA, server and back to back, each shape's first cluster-split prior of each
family. Two of them run once under compute-sanitizer (memcheck, racecheck) first."""
import json, os, sys, time
sys.path.insert(0, '.')
from pathlib import Path
from agent.families import get
from evaluator.api import evaluate
from evaluator.record import BEST_NVIDIA

RELAXED = ('barrier.cluster.arrive.relaxed.aligned;\\nbarrier.cluster.wait.aligned;',
           'barrier.cluster.arrive.relaxed.aligned;\\\\nbarrier.cluster.wait.aligned;')
RELEASE = 'barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;'
SHAPES = [(64, 128, 1024), (64, 2048, 4096), (64, 512, 2048), (64, 64, 4096), (64, 1024, 8192), (128, 128, 4096),
          (256, 2048, 16384), (128, 4096, 12288), (256, 64, 8192), (64, 4096, 2048)]
out = Path(os.environ.get('OUT', '/tmp')) / 'relaxed_cluster_end.json'
deadline = time.monotonic() + float(os.environ.get('DEADLINE_S', '420'))


def release_twin(src: str) -> str:
    twin = src
    for r in RELAXED:
        twin = twin.replace(r, RELEASE)
    assert twin != src, 'no relaxed cluster arrive in the source'
    return twin


def players():
    for shape in SHAPES:
        for fam in ('small', 'hopper_raw'):
            f = get(fam)
            ps = [p for p in f.priors(shape, 'fp32') if p.get('cluster_k', 1) > 1]
            if ps:
                src = f.render(ps[0])
                yield shape, fam, ps[0], src, release_twin(src)


rows = []
plist = list(players())
print(len(plist), 'players', flush=True)
for shape, fam, p, src, _ in plist[:1] + [x for x in plist if x[1] == 'hopper_raw'][:1]:
    r = evaluate(src, shape, mode='back-to-back', sanitize=True)
    rows.append({'shape': list(shape), 'family': fam, 'params': p, 'sanitize': r.status, 'reason': r.reason[:300]})
    print('sanitize', shape, fam, r.status, r.reason[:200], flush=True)
for rep in range(2):
    for shape, fam, p, src, twin in plist:
        for mode in ('server', 'back-to-back'):
            if time.monotonic() > deadline:
                break
            r = evaluate(src, shape, mode=mode, rivals={'release': twin})
            row = {'shape': list(shape), 'family': fam, 'params': p, 'mode': mode, 'rep': rep, 'status': r.status,
                   'gpu': r.gpu.get('gpu_uuid') if r.gpu else None}
            if r.ok:
                h = r.head_to_head(BEST_NVIDIA)
                row.update(relaxed_vs_best=h.get('candidate'), release_vs_best=h.get('release'),
                           relaxed_us=r.candidate.median_us, release_us=r.rivals['release'].median_us,
                           best_nvidia_us=min(b.median_us for b in r.baselines.values()))
                print('x'.join(map(str, shape)), fam, mode, rep, 'relaxed %.3f release %.3f (%.2f / %.2f us)' % (
                    row['relaxed_vs_best'], row['release_vs_best'], row['relaxed_us'], row['release_us']), flush=True)
            else:
                row['reason'] = r.reason[:300]
                print('x'.join(map(str, shape)), fam, mode, r.status, r.reason[:200], flush=True)
            rows.append(row)
            out.write_text(json.dumps(rows, indent=1))
out.write_text(json.dumps(rows, indent=1))
