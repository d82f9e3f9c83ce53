"""Probe behind docs/benchmarks/data/outside_vs_evaluator_same_gpu_h200_2026-11-28_9600019.json ("batch_length").
Back-to-back floor probe: the evaluator's back-to-back evaluation of one exported kernel (argv: export dir,
shape, label, out json), 3 evaluations in one pool; run from copies of the tree whose quick profile's
batch_target_ms differ (sed on evaluator/timing.py)."""
import json, sys, time
sys.path.insert(0, '.')
from pathlib import Path
from evaluator.api import evaluate
from evaluator.timing import PROFILES
export, shape, label, out = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
man = json.loads((export / 'manifest.json').read_text())
e = next(x for x in man['kernels'] if 'x'.join(map(str, x['shape'])) == shape and 'modes' not in x
         and x['file'].endswith('h200.cu'))
src = (export / e['file']).read_text()
rows = json.loads(out.read_text()) if out.is_file() else []
for i in range(3):
    r = evaluate(src, tuple(e['shape']), mode='back-to-back')
    t = r.candidate.detail.get('timing', {})
    b = {k: v.median_us for k, v in r.baselines.items()}
    rows.append({'label': label, 'batch_target_ms': PROFILES['quick'].batch_target_ms, 'shape': shape, 'i': i,
                 'cand': r.candidate.median_us, 'baselines': b, 'best': min(b.values()), 'reps': t.get('reps'),
                 'gpu': r.gpu.get('gpu_uuid')})
    print(label, i, 'cand %.3f best %.3f ratio %.3f reps %s' % (rows[-1]['cand'], rows[-1]['best'],
          rows[-1]['best'] / rows[-1]['cand'], (t.get('reps') or {}).get('candidate')), flush=True)
    out.write_text(json.dumps(rows, indent=1))
