"""The probe behind docs/benchmarks/data/overhanging_tile_h200_2026-11-29_*.json (run from the repository root on a
GPU machine; OUT names the output folder): does a tile hanging over the output's edge cost more than its idle rows?
hopper_wgmma's 64x96 and 64x80 one-wave tiles on shapes whose side spanned by the tile is a multiple of the width or
leaves the last tile partly outside, both kernels in the same rounds (separated mode), their medians in microseconds."""
import json
import os
import statistics
import sys

sys.path.insert(0, ".")
from agent.families import render  # noqa: E402
from evaluator.api import evaluate  # noqa: E402

base = {"pdl": True, "tile_m": 64, "tile_k": 64, "cluster_m": 1, "cluster_n": 1, "schedule": "pingpong",
        "scheduler": "persistent", "splits": 1, "raster": "heuristic", "swizzle": 1, "stages": 0, "b_operand": "col",
        "acc": "fp32"}
cases = [  # (shape, swap_ab): both widths on every shape, so that their rounds are head to head
    ((232, 2240, 4480), True), ((288, 2240, 4480), True), ((240, 2240, 4480), True),
    ((232, 2240, 1536), True), ((288, 2240, 1536), True), ((240, 2240, 1536), True),
    ((2432, 216, 2176), False), ((2432, 288, 2176), False), ((2432, 240, 2176), False),
    ((3640, 136, 2496), False), ((3640, 192, 2496), False), ((3640, 160, 2496), False),
]
cases = [(s, [(96, sw), (80, sw)]) for s, sw in cases]
out = []
for shape, tiles in cases:
    srcs = {}
    for tn, sw in tiles:
        p = dict(base, tile_n=tn, swap_ab=sw)
        srcs[f"64x{tn}{'s' if sw else ''}"] = render("hopper_wgmma", p)
    names = list(srcs)
    r = evaluate(srcs[names[0]], shape, acc="fp32", mode="separated", profile="quick", arch="sm_90a", rounds=8,
                 rivals={n: srcs[n] for n in names[1:]})
    rounds = (r.candidate.detail.get("timing", {}).get("rounds_us") if r.candidate else None) or {}
    med = {(names[0] if k == "candidate" else k.removeprefix("rival:")): statistics.median(v)
           for k, v in rounds.items() if k == "candidate" or k.startswith("rival:")}
    nv = min((statistics.median(v) for k, v in rounds.items() if k != "candidate" and not k.startswith("rival:")),
             default=None)
    row = {"shape": shape, "status": r.status, "reason": r.reason[:200], "median_us": med, "best_nvidia_us": nv,
           "vs_best_nvidia": r.head_to_head("best-nvidia") if r.ok else {}}
    print(json.dumps(row), flush=True); out.append(row)
    json.dump(out, open(os.path.join(os.environ["OUT"], "padprobe.json"), "w"), indent=1)
