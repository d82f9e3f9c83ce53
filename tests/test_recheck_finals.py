"""scripts/recheck_finals.py: which kernels and figures it takes from a run folder, and the table it writes (the
re-measurement itself needs a GPU; it ran on an H200: docs/benchmarks/data/sweeps/recheck_gpu70a0_2026-11-24_71bf97c.md)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import load_script  # noqa: E402
from http_servers import RecordedEvaluator, kernel_source, scaled_result  # noqa: E402

from agent.campaign.archive import Archive  # noqa: E402
from agent.campaign.db import CampaignDB  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHAPE = (4096, 4096, 4096)


def _mod():
    return load_script("recheck_finals")


def _run_with_finals(tmp_path: Path) -> tuple[Path, list[float]]:
    run, ev = tmp_path / "r", RecordedEvaluator()
    a = Archive(run / "archive.sqlite")
    for tag in ("naive", "wgmma"):
        a.add("r", "H200", "fp32", SHAPE, kernel_source(tag), "builtin", ev(kernel_source(tag), SHAPE),
              family="hopper_wgmma")
    best = a.ranked("H200", "fp32", SHAPE)[0]
    db, figures = CampaignDB(run / "campaign.sqlite"), []
    for rep, f in enumerate((0.99, 1.01, 1.0)):
        res = scaled_result(best.result, f)
        db.put_final("H200", "fp32", SHAPE, "offline", best.id, best.source_hash, res, rep=rep)
        figures.append(res.speedup("cublaslt-autotune-max"))
    db.put_final("H200", "fp32", SHAPE, "server", best.id, best.source_hash, scaled_result(best.result, 0.9))
    return run, figures


def test_it_takes_the_kernel_the_finals_timed_and_the_runs_figures(tmp_path):
    run, figures = _run_with_finals(tmp_path)
    groups = _mod().load_finals(run, ["offline"])
    assert len(groups) == 1
    g = groups[0]
    assert g["shape"] == SHAPE and g["mode"] == "offline" and g["run"] == pytest.approx(figures)
    assert "// variant: wgmma" in g["source"] or "// variant: naive" in g["source"]
    assert g["source"] == (run / "kernels" / f"{g['source_hash']}.cu").read_text()
    assert {x["mode"] for x in _mod().load_finals(run, ["offline", "server"])} == {"offline", "server"}


def test_the_table_puts_the_recheck_beside_the_run(tmp_path):
    run, figures = _run_with_finals(tmp_path)
    mod = _mod()
    groups = mod.load_finals(run, ["offline"])
    groups[0]["recheck"] = [0.97, None, 0.99]  # one evaluation that failed a check has no ratio
    md = mod.table(groups, {"run": "r", "device": "NVIDIA H200", "gpu_uuids": ["GPU-1"], "date": "2026-11-24",
                            "repeats": 3, "baseline": "cublaslt-autotune-max", "picks": 2, "command": "x"})
    row = next(line for line in md.splitlines() if line.startswith("| 4096 | 4096 | 4096 |"))
    run_med = sorted(figures)[1]
    assert "| 0.970 / - / 0.990 | 0.980 |" in row and row.endswith(f"| {run_med:.3f} |")
    assert f"Medians above 1.0: recheck 0 of 1, run {int(run_med > 1.0)} of 1" in md


def test_a_folder_without_finals_or_kernels_is_refused_clearly(tmp_path):
    script = REPO / "scripts" / "recheck_finals.py"
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "nothing"), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "no campaign.sqlite" in p.stderr
    run, _ = _run_with_finals(tmp_path)
    for f in (run / "kernels").glob("*.cu"):
        f.unlink()
    with pytest.raises(ValueError, match="missing"):
        _mod().load_finals(run, ["offline"])
    with pytest.raises(ValueError, match="no final measurements"):
        _mod().load_finals(run, ["graph"])


def test_a_shape_list_keeps_only_the_shapes_it_names(tmp_path):
    run, _ = _run_with_finals(tmp_path)
    assert [g["shape"] for g in _mod().load_finals(run, ["offline"], shapes={SHAPE})] == [SHAPE]
    with pytest.raises(ValueError, match="for the shapes asked for"):
        _mod().load_finals(run, ["offline"], shapes={(64, 64, 64)})
    bad = tmp_path / "shapes.txt"
    bad.write_text("4096 4096\n")
    script = REPO / "scripts" / "recheck_finals.py"
    p = subprocess.run([sys.executable, str(script), str(run), "--out", str(tmp_path / "o"), "--shapes", str(bad)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "shapes.txt:1" in p.stderr
