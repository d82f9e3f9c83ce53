"""scripts/knob_pairs.py: the rows of a probe that differ in one knob only, and what the knob's other value read."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import REPO, load_script  # noqa: E402

RAW = {"tile_m": 64, "tile_n": 112, "stages": 7, "group": 1, "acc": "fp32", "pdl": True}
SHAPE = [1856, 408, 1536]


def _row(params, fig, mode="separated", status="ok", shape=SHAPE, family="hopper_raw", gpu="GPU-x"):
    return {"name": "k", "family": family, "params": params, "shape": shape, "role": "", "mode": mode,
            "status": status, "reason": "", "vs_best_nvidia": fig, "gpu": "H200", "gpu_uuid": gpu}


def _probe(tmp_path, rows, name="probe.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"what": "", "device": "", "date": "2026-11-29", "commit": "", "results": rows}))
    return path


def test_pairs_are_rows_that_differ_in_the_knob_alone_against_the_familys_default(tmp_path):
    m = load_script("knob_pairs")
    rows = [
        _row(RAW, 0.80), _row(dict(RAW, edge="shift"), 1.00),  # edge left out is its default, pad
        _row(dict(RAW, edge="pad"), 0.90, mode="server"), _row(dict(RAW, edge="shift"), 0.81, mode="server"),
        _row(dict(RAW, tile_n=128), 0.70), _row(dict(RAW, tile_n=96, edge="shift"), 0.99),  # two knobs apart
        _row(dict(RAW, stages=6, edge="shift"), 0.95, status="wrong output"),  # failed a check: no figure counts
        _row(dict(RAW, stages=6), 0.85),
        _row(RAW, 0.82, shape=[1856, 400, 1536]),  # alone on its shape
        _row(dict(RAW, edge="shift"), 0.50, gpu="GPU-y"),  # another GPU's rounds: no pair with GPU-x's pad row
    ]
    found = m.pairs(m.load_rows([_probe(tmp_path, rows)]), "edge", None)
    assert [(p["mode"], p["base"], p["value"], round(p["ratio"], 6)) for p in found] == [
        ("separated", "pad", "shift", 1.25), ("server", "pad", "shift", 0.9)]
    lines = m.summary(found)
    assert lines == ["separated: 1 pairs, geomean 1.250, below 1 on 0, range 1.250-1.250",
                     "server: 1 pairs, geomean 0.900, below 1 on 1, range 0.900-0.900"]
    # a numeric knob against a base given on the command line, over two files
    more = _probe(tmp_path, [_row(dict(RAW, tile_n=96), 0.75), _row(dict(RAW, tile_n=96), 0.60, mode="server")],
                  "more.json")
    found = m.pairs(m.load_rows([_probe(tmp_path, rows), more]), "tile_n", 112)
    # the 96-wide shifted row pairs with the 112-wide shifted one: they too differ in tile_n alone
    assert [(p["mode"], p["value"], round(p["ratio"], 6)) for p in found] == [
        ("separated", 96, 0.9375), ("separated", 96, 0.99), ("separated", 128, 0.875),
        ("server", 96, round(0.60 / 0.90, 6))]
    geo = (0.9375 * 0.99 * 0.875) ** (1 / 3)
    assert m.summary(found)[0] == f"separated: 3 pairs, geomean {geo:.3f}, below 1 on 3, range 0.875-0.990"


def test_the_command_prints_each_pair_and_says_when_there_is_none(tmp_path):
    path = _probe(tmp_path, [_row(RAW, 0.80), _row(dict(RAW, edge="shift"), 1.00)])
    run = [sys.executable, str(REPO / "scripts" / "knob_pairs.py"), str(path)]
    p = subprocess.run(run + ["--knob", "edge", "--base", "pad"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "1856x408x1536" in p.stdout and "edge=shift 1.000 against pad 0.800: x1.250" in p.stdout
    p = subprocess.run(run + ["--knob", "k_order"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "no pairs of rows that differ only in k_order" in p.stdout


def test_a_file_that_is_not_a_probe_is_refused_by_name(tmp_path):
    m = load_script("knob_pairs")
    bad = tmp_path / "summary.json"
    bad.write_text(json.dumps({"results": {"1024x1024x1024": {"separated": 1.0}}}))
    with pytest.raises(SystemExit, match="summary.json is not a probe file"):
        m.load_rows([bad])
