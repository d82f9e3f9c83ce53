"""The cluster splits that push their partial rows, as the tree renders them ("new", the checked candidate) beside
the same params rendered by an older tree (OLD_TREE, a directory holding its agent/; "old", timed in the same
rounds), in server and back-to-back mode: a template change that should not change what these kernels do (run from
the repository root on a GPU machine; OUT, DEADLINE_S). The first kernel of each family runs once under
compute-sanitizer (memcheck, racecheck) first."""
import json, os, subprocess, sys, time
sys.path.insert(0, '.')
from pathlib import Path
from agent.families import get
from evaluator.api import evaluate
from evaluator.compile import compile_many
from evaluator.record import BEST_NVIDIA

SHAPES = [(64, 128, 1024), (64, 512, 2048), (64, 64, 4096), (40, 120, 1024), (48, 2000, 4096), (100, 90, 4104)]
RENDER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from agent.families import get
json.dump([get(f).render(p) for f, p in json.load(sys.stdin)], sys.stdout)
"""
out = Path(os.environ.get('OUT', '/tmp')) / 'same_pushes.json'
deadline = time.monotonic() + float(os.environ.get('DEADLINE_S', '240'))
found = [(shape, fam, p) for shape in SHAPES for fam in ('small', 'hopper_raw')
         for p in [q for q in get(fam).priors(shape, 'fp32') if get(fam).pushes(q)][:1]]
olds = json.loads(subprocess.run([sys.executable, '-c', RENDER, os.environ['OLD_TREE']], check=True, text=True,
                                 input=json.dumps([[f, p] for _, f, p in found]), capture_output=True).stdout)
news = [get(fam).render(p) for _, fam, p in found]
compile_many(news + olds)  # in parallel, into the build cache
rows, sanitized = [], set()
for (shape, fam, p), src, old in zip(found, news, olds):
    if fam not in sanitized:
        sanitized.add(fam)
        r = evaluate(src, shape, mode='back-to-back', sanitize=True)
        rows.append({'shape': list(shape), 'family': fam, 'params': p, 'sanitize': r.status, 'reason': r.reason[:300]})
        print('sanitize', shape, fam, r.status, r.reason[:200], flush=True)
    for mode in ('server', 'back-to-back'):
        if time.monotonic() > deadline:
            break
        r = evaluate(src, shape, mode=mode, rivals={'old': old})
        row = {'shape': list(shape), 'family': fam, 'params': p, 'mode': mode, 'status': r.status,
               'source_changed': src != old, 'gpu': r.gpu.get('gpu_uuid') if r.gpu else None}
        if r.ok:
            h = r.head_to_head(BEST_NVIDIA)
            row.update(new_vs_best=h.get('candidate'), old_vs_best=h.get('old'), new_us=r.candidate.median_us,
                       old_us=r.rivals['old'].median_us)
            print('x'.join(map(str, shape)), fam, mode, 'new %.3f old %.3f (%.2f / %.2f us)' % (
                row['new_vs_best'], row['old_vs_best'], row['new_us'], row['old_us']), flush=True)
        else:
            row['reason'] = r.reason[:300]
            print('x'.join(map(str, shape)), fam, mode, r.status, r.reason[:200], flush=True)
        rows.append(row)
        out.write_text(json.dumps(rows, indent=1))
out.write_text(json.dumps(rows, indent=1))
