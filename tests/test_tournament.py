"""scripts/tournament.py and EvalResult.head_to_head: which leaders a tournament takes from a run folder, how a
leader's figure is read from the rounds they shared, and the table (the tournament itself needs a GPU:
tests/test_evaluator_gpu.py times rivals; docs/benchmarks/data/sweeps/ keeps the device runs)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_module import load_script  # noqa: E402
from http_servers import RecordedEvaluator, kernel_source, scaled_result  # noqa: E402

from agent.campaign.archive import Archive  # noqa: E402
from evaluator.record import EvalResult, Timing  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHAPE = (4096, 4096, 4096)


def _run(tmp_path: Path) -> Path:
    run, ev = tmp_path / "r", RecordedEvaluator()
    a = Archive(run / "archive.sqlite")
    base = ev(kernel_source("wgmma"), SHAPE)
    for i, f in enumerate((1.00, 1.02, 0.97)):  # three correct variants, ranked 1.02, 1.00, 0.97
        a.add("r", "H200", "fp32", SHAPE, kernel_source("wgmma", extra=f"// v{i}\n"), "builtin",
              scaled_result(base, f), family="hopper_raw", params={"v": i})
    a.add("r", "H200", "fp32", (64, 64, 64), kernel_source("naive"), "builtin", ev(kernel_source("naive"), (64, 64, 64)),
          family="small")  # one variant only: nothing to play
    return run


def test_it_takes_each_shapes_ranked_leaders_with_their_sources(tmp_path):
    groups = load_script("tournament").leaders(_run(tmp_path), "fp32", 2, None)
    assert [g["shape"] for g in groups] == [SHAPE]
    lead = groups[0]["leaders"]
    assert [v["params"] for v in lead] == [{"v": 1}, {"v": 0}]
    assert lead[0]["run"] > lead[1]["run"]
    assert all(f"// v{v['params']['v']}" in v["source"] for v in lead)


def test_in_another_mode_it_adds_other_families_close_leaders_as_a_campaign_does(tmp_path):
    run = _run(tmp_path)
    a = Archive(run / "archive.sqlite")
    ev = RecordedEvaluator()
    base = ev(kernel_source("wgmma"), SHAPE)
    a.add("r", "H200", "fp32", SHAPE, kernel_source("wgmma", extra="// cp.async\n"), "builtin",
          scaled_result(base, 0.90), family="ampere_cute", params={"v": 9})
    mod = load_script("tournament")
    assert [v["params"] for v in mod.leaders(run, "fp32", 2, None)[0]["leaders"]] == [{"v": 1}, {"v": 0}]
    mixed = mod.leaders(run, "fp32", 2, None, mix_families=True)[0]["leaders"]
    assert [(v["family"], v["params"]) for v in mixed] == [("hopper_raw", {"v": 1}), ("hopper_raw", {"v": 0}),
                                                           ("ampere_cute", {"v": 9})]
    assert mod.search_mode(run) == "offline"  # a run folder without campaign.json


def test_a_runs_own_tournament_leads_the_leaders_and_shows_in_the_table(tmp_path):
    run = _run(tmp_path)
    a = Archive(run / "archive.sqlite")
    ids = [v.id for v in a.ranked("H200", "fp32", SHAPE)]
    a.add_tournament("H200", "fp32", SHAPE, {ids[2]: 1.02, ids[0]: 1.0}, a.get(ids[2]).result)
    mod = load_script("tournament")
    groups = mod.leaders(run, "fp32", 3, None)
    lead = groups[0]["leaders"]
    assert [v["id"] for v in lead] == [ids[2], ids[0], ids[1]]
    assert [v["run_tournament"] for v in lead] == [1.02, 1.0, None]
    for v in lead:
        v["tournament"] = [1.0]
    groups[0]["pick"] = lead[0]["id"]
    md = mod.table(groups, {"run": "r", "device": "NVIDIA H200", "date": "2026-11-25", "top": 3, "repeats": 1,
                            "rounds": 15, "picks": 0, "command": "x"})
    rows = [line for line in md.splitlines() if line.startswith("| 4096 |")]
    assert "(1) · T 1.020 |" in rows[0] and "· T" not in rows[2]


def test_a_leaders_figure_is_the_median_over_the_rounds_it_shared_with_the_baseline():
    rounds = {"candidate": [10.0, 10.0, 12.0], "rival:7": [9.0, 11.0, 9.5],
              "cublaslt-autotune-NN": [10.0, 11.0, 12.0], "cublaslt-autotune-TN": [20.0, 20.0, 20.0]}
    r = EvalResult(status="ok", candidate=Timing(name="candidate", median_us=10.0, mean_us=10.7, min_us=10.0,
                                                  samples=3, detail={"timing": {"rounds_us": rounds}}))
    h = r.head_to_head("cublaslt-autotune-max")  # NN has the lower median: it is the baseline of every round
    assert h == pytest.approx({"candidate": 1.0, "7": 10.0 / 9.0})  # rounds: 10/9, 11/11, 12/9.5
    assert r.head_to_head("cublaslt-autotune-TN")["candidate"] == pytest.approx(2.0)
    assert EvalResult(status="ok").head_to_head() == {}


def test_rivals_survive_the_record_round_trip():
    t = Timing(name="rival:3", median_us=1.0, mean_us=1.0, min_us=1.0, samples=5, speedup_mean=1.01)
    r = EvalResult(status="ok", rivals={"3": t})
    assert EvalResult.from_json(r.to_json()) == r


def test_the_table_marks_both_picks(tmp_path):
    mod = load_script("tournament")
    groups = mod.leaders(_run(tmp_path), "fp32", 3, None)
    for v, figs in zip(groups[0]["leaders"], ([0.99, 0.995], [1.01, 1.004], [0.98])):
        v["tournament"] = figs
    groups[0]["pick"] = groups[0]["leaders"][1]["id"]
    md = mod.table(groups, {"run": "r", "device": "NVIDIA H200", "date": "2026-11-25", "top": 3, "repeats": 2,
                            "rounds": 15, "picks": 0, "command": "x"})
    rows = [line for line in md.splitlines() if line.startswith("| 4096 |")]
    assert len(rows) == 3
    assert rows[0].endswith("| 0.990 / 0.995 | yes |  |") and rows[1].endswith("| 1.010 / 1.004 |  | yes |")
    assert "another leader than the run on 1 of 1 shapes" in md


def test_a_folder_without_an_archive_is_refused_clearly(tmp_path):
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "tournament.py"), str(tmp_path / "none"), "--out",
                        str(tmp_path / "o")], capture_output=True, text=True)
    assert p.returncode == 2 and "no archive.sqlite" in p.stderr
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "tournament.py"), str(tmp_path), "--out",
                        str(tmp_path / "o"), "--top", "1"], capture_output=True, text=True)
    assert p.returncode == 2 and "at least 2 leaders" in p.stderr
