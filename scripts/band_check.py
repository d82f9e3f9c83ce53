#!/usr/bin/env python3
"""Does hopper_raw's tile-order rule pick the band that measured fastest? (no GPU needed)

    python3 scripts/band_check.py docs/benchmarks/data/raw_gpc_band_*.json [--mode back-to-back] [--runs 8,12,16]

Reads probe files (`scripts/sweep_configs.py --together`'s probe.json) in which one hopper_raw config of 128-row
tiles ran in several bands (`group`) on a shape, in the same rounds, and for each such set prints the band
`grid_order.gpc_band` picks now against the fastest measured, with the pick's shortfall. The summary line gives the
geomean shortfall and the pick's geomean gain over rows where rows ran. --runs re-counts the operand panels for
other run lengths than GPC_CTAS (the panel count only; the passes over B stay as they are), which is how GPC_CTAS
was fitted. Sets where the pick was not measured are listed and left out of the summary.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def band_sets(paths: list[Path], mode: str) -> dict[tuple, dict[int, float]]:
    """(file, shape, params without group) -> {group: speedup over best NVIDIA} for sets of two bands or more."""
    sets: dict[tuple, dict[int, float]] = defaultdict(dict)
    for path in paths:
        for r in json.loads(path.read_text())["results"]:
            p = dict(r["params"])
            if (r["family"] != "hopper_raw" or r["mode"] != mode or r.get("vs_best_nvidia") is None
                    or p.get("tile_m") != 128 or p.get("cluster_m", 1) != 1):
                continue
            g = p.pop("group")
            sets[(path.name, tuple(r["shape"]), json.dumps(p, sort_keys=True))][g] = r["vs_best_nvidia"]
    return {k: v for k, v in sets.items() if len(v) > 1}


def pick(shape: tuple[int, int, int], params: dict, run: int | None = None) -> int:
    from agent.families import grid_order
    from agent.families.common import ceil_div

    m, n, k = shape
    rows, cols = ceil_div(m, 128), ceil_div(n, params["tile_n"])
    if run is None:
        return grid_order.gpc_band(rows, cols, 128, params["tile_n"], 2 * n * k)
    grid_order.run_panels.cache_clear()  # cached per run length: the patched constant changes every count
    with mock.patch.object(grid_order, "GPC_CTAS", run):
        g = grid_order.gpc_band(rows, cols, 128, params["tile_n"], 2 * n * k)
    grid_order.run_panels.cache_clear()
    return g


def summary(sets: dict[tuple, dict[int, float]], run: int | None = None, show: bool = False) -> dict[str, float]:
    short, gain, missing = [], [], 0
    for (name, shape, pj), by_band in sorted(sets.items()):
        g = pick(shape, json.loads(pj), run)
        best = max(by_band, key=by_band.get)
        if g not in by_band:
            missing += 1
            if show:
                print(f"{name} {shape} {pj}: pick {g} not measured ({sorted(by_band)})")
            continue
        short.append(by_band[best] / by_band[g])
        if 1 in by_band:
            gain.append(by_band[g] / by_band[1])
        if show:
            bands = "  ".join(f"g{b} {v:.3f}" for b, v in sorted(by_band.items()))
            print(f"{shape} {json.loads(pj)['tile_n']}: pick g{g}, fastest g{best}  ({bands})")
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")  # noqa: E731
    return {"sets": len(short), "unmeasured": missing, "shortfall": gm(short), "worst": max(short, default=1.0),
            "gain_over_rows": gm(gain)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("probes", type=Path, nargs="+")
    ap.add_argument("--mode", default="back-to-back")
    ap.add_argument("--runs", default="", help="comma-separated run lengths to compare with GPC_CTAS")
    a = ap.parse_args()
    sets = band_sets(a.probes, a.mode)
    if not sets:
        raise SystemExit("no hopper_raw config ran in two bands or more on one shape in these files")
    for run in [None] + [int(x) for x in a.runs.split(",") if x]:
        s = summary(sets, run, show=run is None)
        label = "GPC_CTAS" if run is None else f"runs of {run}"
        print(f"{label}: {s['sets']} sets ({s['unmeasured']} picks unmeasured), shortfall from the fastest band "
              f"{s['shortfall'] - 1:.2%} (worst {s['worst'] - 1:.2%}), gain over rows {s['gain_over_rows'] - 1:+.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
