"""scripts/profile_misses.py: which kernels of a run miss a target (the ones the benchmark doc owes a profile), and
the summary it writes from Nsight Compute records (here the sample campaign's, committed under docs/)."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from script_module import load_script  # noqa: E402
from http_servers import RecordedEvaluator, kernel_source, scaled_result  # noqa: E402

from agent.campaign.archive import Archive  # noqa: E402
from agent.campaign.db import CampaignDB  # noqa: E402
from evaluator.record import BEST_NVIDIA  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "docs" / "benchmarks" / "data" / "sample_misses_ncu_h200_2026-11-28_9600019"
BIG = (4096, 4096, 4096)


def _run_with_finals(tmp_path: Path, figures: dict[str, float]) -> tuple[Path, str]:
    """A run of one big shape whose winner's three finals in each mode read `figures[mode]` against best NVIDIA."""
    ev, run = RecordedEvaluator(), tmp_path / "runs" / "r"
    a = Archive(run / "archive.sqlite")
    for tag in ("naive", "tile128", "wgmma"):
        a.add("r", "H200", "fp32", BIG, kernel_source(tag), "builtin", ev(kernel_source(tag), BIG),
              family="hopper_wgmma")
    best = a.ranked("H200", "fp32", BIG)[0]
    cdb = CampaignDB(run / "campaign.sqlite")
    for mode, want in figures.items():
        r = scaled_result(best.result, want / best.result.speedup(BEST_NVIDIA))
        for rep in range(3):
            cdb.put_final("H200", "fp32", BIG, mode, best.id, best.source_hash, r, rep)
    return run, best.source_hash


def test_a_big_shape_below_parity_back_to_back_is_a_miss_and_a_won_mode_is_not(tmp_path):
    pm = load_script("profile_misses")
    run, h = _run_with_finals(tmp_path, {"back-to-back": 0.95, "server": 1.02, "separated": 1.01})
    found = pm.find_misses(run)
    assert list(found) == [f"4096x4096x4096_{h[:8]}"]
    (entry,) = found.values()
    assert entry["shape"] == list(BIG) and entry["misses"] == ["back-to-back 0.950"]
    assert Path(entry["kernel"]).is_file()
    assert pm.find_misses(run, {"4096x4096x4096"}) == {}  # --skip: profiled already


def test_server_at_parity_counts_as_a_miss(tmp_path):
    pm = load_script("profile_misses")
    run, _ = _run_with_finals(tmp_path, {"server": 1.0, "back-to-back": 1.01})
    (entry,) = pm.find_misses(run).values()
    assert entry["misses"] == ["server 1.000"]


def test_the_summary_counts_cycles_and_names_what_was_not_profiled(tmp_path):
    pm = load_script("profile_misses")
    d = tmp_path / "p"
    shutil.copytree(SAMPLE, d)
    (d / "4096x4096x2048_93c0d03d.json").unlink()
    assert pm.main(["--render", str(d), "--note", "the sample campaign"]) == 0
    md = (d / "summary.md").read_text()
    assert md.startswith("# Nsight Compute of 14 target misses\n\nthe sample campaign\n")
    assert "- 13 of 14 profiled; GPU NVIDIA H200" in md
    row = next(line for line in md.splitlines() if line.startswith("| 16384×12288×8192 | `16384x12288x8192_bd45bbb2`"))
    rec = json.loads((d / "16384x12288x8192_bd45bbb2.json").read_text())
    c, b = rec["candidate"], rec["baseline"]["record"]
    cycles = c["duration_us"] * c["sm_clock_mhz"] / (b["duration_us"] * b["sm_clock_mhz"])
    assert f"| {cycles:.3f} |" in row and cycles == pytest.approx(1.029, abs=5e-4)
    assert "| 4096×4096×2048 | `4096x4096x2048_93c0d03d` | server 0.998 | not profiled |" in md


def test_bad_invocations_say_what_is_needed(tmp_path, capsys):
    pm = load_script("profile_misses")
    for argv, said in (([], "give RUN_DIR and --out DIR"), (["--render", str(tmp_path)], "has no misses.json"),
                       ([str(tmp_path), "--out", str(tmp_path / "o")], "not a campaign's run folder")):
        with pytest.raises(SystemExit) as e:
            pm.main(argv)
        assert e.value.code == 2 and said in capsys.readouterr().err
