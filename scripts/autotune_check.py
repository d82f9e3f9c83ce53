#!/usr/bin/env python3
"""How good is cuBLASLt-AutoTuning's pick? (GPU machine)

    python3 scripts/autotune_check.py MxNxK [MxNxK ...] --out DIR [--repeats 3] [--truth-rounds 6] [--acc fp32]

Per shape and layout (NN, TN): every algorithm cuBLASLt offers that is exact on {0,1} inputs is timed power-steady
(the truth: what a baseline costs a user who runs the shape back to back), then the evaluator's autotuning runs
`repeats` times from an empty cache: with the short interleaved bursts of the screening only ("screening") and as
it is now ("steady": the screening's leaders re-timed power-steady, on every shape). Each pick is
reported as its truth time over the best truth time (1.0 = the fastest algorithm; 1.05 = a baseline 5% slower than
it could be, which inflates every speedup measured against it). The result goes to DIR/autotune_check.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def check_layout(nat, gpu: str, lt_version: int, shape, acc16: bool, tn: bool, a) -> dict:
    from evaluator.baselines import (STEADY_FINALISTS, autotune_cache_dir, autotune_lt, steady_medians,
                                     valid_lt_algos)
    from evaluator.buffers import OperandSet, Reference
    from evaluator.timing import PROFILES

    prof = PROFILES["quick"]
    methods = {"screening": 1, "steady": STEADY_FINALISTS}
    ops, ref = OperandSet(nat, *shape, snapshots=False), Reference(nat, *shape)
    try:
        _, cands = valid_lt_algos(nat, shape, acc16, tn, ops, ref)
        ops.fill("normal", 1)
        est = {cid: max(nat.time_batch(cid, *ops.args, 1, True), 1e-4) for cid, _ in cands}
        truth = steady_medians(nat, ops, [c for c, _ in cands], est, prof, a.truth_rounds, random.Random(7))
        by_algo = {algo.hex(): truth[cid] for cid, algo in cands}
        best = min(by_algo.values())
        picks: dict[str, list[float]] = {m: [] for m in methods}
        for rep in range(a.repeats):
            for name, finalists in methods.items():
                for f in autotune_cache_dir().glob("*.json"):
                    f.unlink()
                algo, _ = autotune_lt(nat, gpu, lt_version, shape, acc16, tn, ops, ref, prof, lambda msg: None,
                                      finalists)
                picks[name].append(round(by_algo[algo.hex()] / best, 4))
        return {"algos_valid": len(cands), "truth_ms_sorted": sorted(round(v, 5) for v in by_algo.values()),
                "pick_over_best": picks}
    finally:
        nat.release_callables()
        ops.free()
        ref.free()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--truth-rounds", type=int, default=6)
    ap.add_argument("--acc", choices=["fp32", "fp16"], default="fp32")
    a = ap.parse_args()
    from agent.shapes import parse_shape_line

    shapes = []
    for text in a.shapes:
        try:
            shapes.append(tuple(parse_shape_line(text)))
        except ValueError as e:
            print(f"autotune_check: {text!r} is not a shape (write it as MxNxK): {e}", file=sys.stderr)
            return 2
    from evaluator.gpu import gpu_missing

    if gpu_missing("autotune_check"):
        return 2
    from evaluator.gpu import device_name
    from evaluator.native import Native, build

    nat = Native(build("sm_90a"), 0)
    # the picks made here must not reach (or come from) the evaluator's own cache; the native build above may
    os.environ["CUDAL2_CACHE"] = tempfile.mkdtemp(prefix="autotune_check_")
    gpu, lt_version = device_name(0), nat.info()["cublaslt"]
    a.out.mkdir(parents=True, exist_ok=True)
    result = {"device": gpu, "date": datetime.date.today().isoformat(), "acc": a.acc, "repeats": a.repeats,
              "truth_rounds": a.truth_rounds, "shapes": {}}
    for shape in shapes:
        key = "x".join(map(str, shape))
        for tn, lay in ((False, "NN"), (True, "TN")):
            r = check_layout(nat, gpu, lt_version, shape, a.acc == "fp16", tn, a)
            result["shapes"][f"{key} {lay}"] = r
            print(f"{key} {lay}: {r['algos_valid']} algos, truth {r['truth_ms_sorted'][:4]} ms, pick/best "
                  f"{r['pick_over_best']}", flush=True)
            (a.out / "autotune_check.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
