#!/usr/bin/env python3
"""Time hand-picked family configs (GPU machine): render, compile in parallel, evaluate each with the project's
evaluator (quick profile, every check; offline unless --mode says otherwise) and print its speedup against
cuBLASLt-AutoTuning-max.

    python3 scripts/sweep_configs.py SPEC.json --out DIR [--acc fp32] [--mode graph] [--budget-s 400] [--jobs 16]

SPEC.json is a list of {"family": ..., "params": {...}, "shape": [M, N, K]}. Results go to DIR/sweep.json, one
record per entry, as soon as each is measured, so a run cut short keeps what it finished. This is the tool for
kernel-family work; the built-in policy's search goes through `cudal2 campaign`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from evaluator.contract import MODES  # noqa: E402

BASELINE = "cublaslt-autotune-max"


def main() -> int:
    from agent.families import candidate_name, render
    from evaluator.api import evaluate
    from evaluator.compile import compile_many

    ap = argparse.ArgumentParser()
    ap.add_argument("spec", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--acc", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--mode", choices=MODES, default="offline", help="the evaluator's timing mode")
    ap.add_argument("--budget-s", type=float, default=400.0, help="stop starting evaluations after this long")
    ap.add_argument("--jobs", type=int, default=None, help="parallel nvcc processes (default: CPU count)")
    a = ap.parse_args()
    t0 = time.monotonic()
    entries = json.loads(a.spec.read_text())
    a.out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for e in entries:
        shape = tuple(e["shape"])
        try:
            src = render(e["family"], e["params"], shape, a.arch)
        except ValueError as err:
            print(f"refused {e['family']} {e['params']}: {err}", flush=True)
            continue
        jobs.append((e, shape, src, candidate_name(e["family"], e["params"])))
    infos = compile_many(sorted({j[2] for j in jobs}), a.arch, jobs=a.jobs)
    failed = sum(not i.ok for i in infos)
    print(f"{len(jobs)} entries, {len(infos)} distinct sources compiled in {time.monotonic() - t0:.0f} s"
          f" ({failed} failed)", flush=True)
    rows = []
    for e, shape, src, name in jobs:
        if time.monotonic() - t0 > a.budget_s:
            print("time budget spent; stopping", flush=True)
            break
        r = evaluate(src, shape, acc=a.acc, mode=a.mode, profile="quick", arch=a.arch)
        sp = r.speedup(BASELINE)
        at = [t.median_us for n, t in r.baselines.items() if n.startswith("cublaslt-autotune")]
        row = {"name": name, "family": e["family"], "params": e["params"], "shape": list(shape), "mode": a.mode,
               "status": r.status,
               "reason": r.reason[:300], "speedup": sp, "kernel_us": r.candidate.median_us if r.candidate else None,
               "autotune_us": min(at, default=None), "eval_s": round(r.wall_seconds, 2)}
        rows.append(row)
        (a.out / "sweep.json").write_text(json.dumps(rows, indent=1))
        shown = "-" if sp is None else f"{sp:.3f}"
        print(f"{name:28s} {'x'.join(map(str, shape)):17s} {r.status:10s} {shown:>6s} "
              f"kernel {row['kernel_us']} us, autotune {row['autotune_us']} us {r.reason[:100]}", flush=True)
    print(f"done in {time.monotonic() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
