"""Device smoke run of the evaluator: build the native library, evaluate the reference kernels on a few shapes,
time the baselines, and print one line per evaluation. Usage: python3 scripts/gpu_smoke.py [OUT_DIR]"""
import json
import sys
import time
from pathlib import Path

from evaluator.api import evaluate, time_baselines

out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
shapes = [(64, 64, 64), (128, 256, 512), (1000, 1000, 1000), (4096, 4096, 4096)]
rows = []
for kernel in ["tests/kernels/reference_naive.cu", "tests/kernels/reference_wmma.cu"]:
    if not Path(kernel).exists():
        continue
    for shape in shapes:
        t0 = time.time()
        r = evaluate(Path(kernel).read_text(), shape, on_progress=lambda m: None)
        sp = r.speedup("cublaslt-autotune-max")
        print(f"{Path(kernel).stem:18s} {shape} {r.status:14s} {time.time()-t0:6.2f}s "
              f"cand={r.candidate.median_us if r.candidate else None} vs_autotune_max={sp} {r.reason[:300]}",
              flush=True)
        for c in r.checks:
            if not c.passed:
                print("   FAIL", c.name, c.detail[:300])
        rows.append(r.to_dict())
for shape in [(4096, 4096, 4096)]:
    b = time_baselines(shape)
    print(shape, {k: round(v.median_us, 2) for k, v in b.items()})
(out / "smoke.json").write_text(json.dumps(rows, indent=1, default=str))
