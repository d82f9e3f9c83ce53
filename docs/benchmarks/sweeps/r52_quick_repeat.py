"""Repeat the evaluator's quick-profile evaluation of each config of a sustained_power spec, alternating order (sweep r52).

    python3 docs/benchmarks/sweeps/r52_quick_repeat.py SPEC.json OUT.json REPEATS   (from the repository root, GPU machine)
"""
import json, sys, time
sys.path.insert(0, ".")
from agent.families import render
from evaluator.api import evaluate
spec = json.load(open(sys.argv[1])); out = sys.argv[2]; reps = int(sys.argv[3])
res = {}
for key, targets in spec.items():
    shape = tuple(int(x) for x in key.split("x"))
    srcs = {n: render(c["family"], c["params"], shape, "sm_90a") for n, c in targets.items()}
    for i in range(reps):
        for n in (list(srcs) if i % 2 == 0 else list(srcs)[::-1]):
            r = evaluate(srcs[n], shape, acc="fp32", mode="offline", profile="quick")
            sp = r.speedup("cublaslt-autotune-max") if r.ok else None
            res.setdefault(n, []).append(sp)
            print(key, i, n, r.status, sp, flush=True)
    json.dump(res, open(out, "w"), indent=1)
