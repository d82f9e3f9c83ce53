"""scripts/band_check.py: hopper_raw's tile-order rule against the bands the committed probes measured."""
from __future__ import annotations

from pathlib import Path

from script_module import load_script

DATA = Path(__file__).resolve().parents[1] / "docs/benchmarks/data"
# probes where `grid_order.gpc_band` orders the grids: one and two waves, short grids, one wave of 4-7 tile-rows (the
# last file's taller grids beyond a wave take `grid_order.widest_band`'s band, where the count's fewest passes over B
# agree or it went untimed)
PROBES = ("raw_gpc_band_h200_2026-11-27_7d6dff4.json", "raw_gpc_band_two_waves_176_h200_2026-11-27_00b0b9f.json",
          "raw_short_grid_bands_h200_2026-11-27_852a1b4.json", "raw_band_rows_9_31_h200_2026-11-27_e0e89b9.json")


def test_the_band_rule_picks_within_a_hair_of_the_fastest_band_measured():
    """A change to `grid_order.gpc_band` (run length, band set, passes over B) that drifts from what the H200 measured
    fails here: on the committed probes its picks stay within 0.5% of the fastest band (geomean; 0.04-0.22% as set) and
    5% at worst (1.1-4.3%), and 5% or more ahead of rows (7.0-7.2%), in every mode."""
    m = load_script("band_check")
    for mode in ("back-to-back", "separated", "server"):
        s = m.summary(m.band_sets([DATA / p for p in PROBES], mode))
        assert s["sets"] >= 45 and s["unmeasured"] <= 9, (mode, s)
        assert s["shortfall"] < 1.005 and s["worst"] < 1.05, (mode, s)
        assert s["gain_over_rows"] > 1.05, (mode, s)


def test_runs_of_another_length_count_their_own_panels_and_leave_the_constant_alone():
    from agent.families import grid_order

    m = load_script("band_check")
    params = {"tile_n": 128}
    assert m.pick((1024, 2048, 4096), params) == 4  # 8 x 16 tiles: runs of 12 as 4 x 3
    assert m.pick((1024, 2048, 4096), params, run=8) == 2  # runs of 8: 2 x 4 and 4 x 2 tie, the narrower
    assert grid_order.GPC_CTAS == 12 and m.pick((1024, 2048, 4096), params) == 4
