"""scripts/ab_summary.py: an A/B probe read shape by shape, and the geomeans a design note quotes."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import REPO, load_script  # noqa: E402

FRESH = REPO / "docs/benchmarks/data/raw_fitting_fresh_ab_h200_2026-11-30_94a4b6a.json"


def _row(shape, mode, role, ratio, status="ok"):
    return {"shape": list(shape), "mode": mode, "role": role, "vs_best_nvidia": ratio, "status": status,
            "reason": "" if status == "ok" else "wrong output"}


def test_the_arms_take_each_side_best_and_a_shared_slot_counts_in_the_batch_not_the_slot():
    m = load_script("ab_summary")
    rows = [_row((64, 64, 64), "server", "old #0; new #0", 1.10), _row((64, 64, 64), "server", "old #3", 0.90),
            _row((64, 64, 64), "server", "new #3", 1.20), _row((64, 64, 64), "server", "new #2", 0.5),
            _row((128, 64, 64), "server", "old #3", 1.00), _row((128, 64, 64), "server", "new #3", 0.80),
            _row((128, 64, 64), "server", "new #1", 2.0, status="failed")]
    best = m.arms(rows, "old", "new")
    assert best[((64, 64, 64), "server")] == {"both": 1.10, "old": 0.90, "new": 1.20}
    assert best[((128, 64, 64), "server")] == {"old": 1.00, "new": 0.80}  # a failed row counts in no arm
    lines, totals = m.summary(best)
    assert totals["server"]["slot"] == pytest.approx((1.20 / 0.90 * 0.80) ** 0.5)
    assert totals["server"]["batch"] == pytest.approx((1.20 / 1.10 * 0.80) ** 0.5)
    assert (totals["server"]["faster"], totals["server"]["shapes"]) == (1, 2)
    assert lines[0].startswith("64x64x64  server: both 1.100 old 0.900 new 1.200")
    assert m.failures(rows) == ["128x64x64 server new #1: wrong output"]
    _, dropped = m.summary(best, {(128, 64, 64)})
    assert dropped["server"]["shapes"] == 1


def test_the_fresh_fitting_tile_probe_reads_as_its_design_note_says(capsys):
    """hopper_raw's FIT_MIN_TILE comment and unseen_shapes.md quote x1.155 / x1.150 / x1.153 for the batch's best."""
    assert load_script("ab_summary").main([str(FRESH)]) == 0
    out = capsys.readouterr().out
    assert "back-to-back: new/old 1.171 (min 0.965, max 1.817, faster on 18 of 20), batch best x1.155" in out
    assert "separated: new/old 1.170" in out and "batch best x1.150" in out
    assert "server: new/old 1.171" in out and "batch best x1.153" in out


def test_a_mode_outside_the_usual_three_is_read_too():
    m = load_script("ab_summary")
    rows = [_row((64, 64, 64), "steady", "old", 1.0), _row((64, 64, 64), "steady", "new", 1.1),
            _row((64, 64, 64), "server", "old", 1.0), _row((64, 64, 64), "server", "new", 0.9)]
    lines, totals = m.summary(m.arms(rows, "old", "new"))
    assert list(totals) == ["server", "steady"]
    assert totals["steady"]["slot"] == pytest.approx(1.1)
    assert lines == ["64x64x64  server: old 1.000 new 0.900  steady: old 1.000 new 1.100"]


def test_bad_input_is_a_clear_error(tmp_path):
    m = load_script("ab_summary")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(SystemExit, match="not a probe file with results"):
        m.main([str(bad)])
    with pytest.raises(SystemExit, match="a shape is MxNxK"):
        m.main([str(FRESH), "--drop", "64by64"])
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"results": [_row((64, 64, 64), "server", "probe tile", 1.0)]}))
    with pytest.raises(SystemExit, match="no shape has both"):
        m.main([str(other)])
