"""Probe behind docs/benchmarks/data/outside_vs_evaluator_same_gpu_h200_2026-11-28_9600019.json ("pair"; usage:
`python3 THIS EXPORT_DIR OUT_DIR 512x64x64,...` on a GPU machine, then scripts/device_outside.sh on the same export).
Outside harness vs evaluator on the same GPU, same kernels: which side (kernel or baselines) makes the outside
harness read small shapes 5-14% lower separated and 16384x12288x8192's default export 5% lower. Evaluates every
exported kernel of SHAPES in the evaluator (separated, back-to-back; medians of candidate, each baseline, separator)
and writes $OUT/pair_evaluator.json; the caller runs the outside harness on the same export afterwards."""
import json, os, sys, time
sys.path.insert(0, '.')
from pathlib import Path
from evaluator.api import evaluate

export, out = Path(sys.argv[1]), Path(sys.argv[2])
shapes = sys.argv[3].split(',')
man = json.loads((export / 'manifest.json').read_text())
rows = []
for e in man['kernels']:
    name = 'x'.join(map(str, e['shape']))
    if name not in shapes:
        continue
    src = (export / e['file']).read_text()
    for mode in ('separated', 'back-to-back'):
        t = time.time()
        r = evaluate(src, tuple(e['shape']), mode=mode)
        row = {'shape': name, 'file': e['file'], 'mode': mode, 'status': r.status, 's': round(time.time() - t, 1)}
        if r.ok:
            row.update(candidate_us=r.candidate.median_us,
                       baselines_us={k: v.median_us for k, v in r.baselines.items()},
                       separator_us=r.candidate.detail.get('timing_meta', {}).get('separator_us'),
                       gpu=r.gpu.get('gpu_uuid'))
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != 'baselines_us'}), 'best_base',
              min(row.get('baselines_us', {0: 0}).values()), flush=True)
        (out / 'pair_evaluator.json').write_text(json.dumps(rows, indent=1))
