"""scripts/replay_search.py: the current policy's proposals at a step of a finished run, from what the run had
measured before it (an archive written here, the policy's own first batch with made-up timings)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from script_module import load_script

from agent.campaign.archive import Archive
from agent.policy import BuiltinPolicy
from evaluator.record import OK, EvalResult, Timing

REPO = Path(__file__).resolve().parents[1]
SHAPE = (4096, 128, 8192)


def _result(cand_us: float, base_us: float = 100.0) -> EvalResult:
    base = {"cublaslt-autotune-NN": Timing(name="cublaslt-autotune-NN", median_us=base_us, mean_us=base_us,
                                           min_us=base_us, samples=10, speedup_mean=base_us / cand_us,
                                           speedup_median=base_us / cand_us)}
    cand = Timing(name="candidate", median_us=cand_us, mean_us=cand_us, min_us=cand_us, samples=10)
    return EvalResult(status=OK, reason="", shape=SHAPE, acc="fp32", baselines=base, candidate=cand)


def _run(tmp_path: Path) -> tuple[Path, list]:
    """A run of one shape: the policy's first batch as step 0 (timed 100-130 us), and one made-up step-1 variant."""
    run = tmp_path / "r"
    a = Archive(run / "archive.sqlite")
    first = BuiltinPolicy(0).propose(SHAPE, "fp32", "sm_90a", [], n=4)
    for i, c in enumerate(first):
        a.add("r", "H200", "fp32", SHAPE, c.source, "builtin", _result(100.0 + 10 * i), family=c.family,
              params=c.params, step=0)
    a.add("r", "H200", "fp32", SHAPE, first[0].source + "\n// step 1\n", "builtin", _result(90.0),
          family=first[0].family, params=dict(first[0].params, stages=3), step=1)
    (run / "campaign.json").write_text(json.dumps({"n_per_step": 4, "mode": "offline"}))
    return run, first


def test_the_replay_proposes_from_the_measured_first_step_and_marks_what_the_run_measured(tmp_path):
    run, first = _run(tmp_path)
    [row] = load_script("replay_search").replay(run, 1)
    assert row["shape"] == list(SHAPE) and len(row["run"]) == 1 and row["run"][0]["measured"] > 1.0
    assert len(row["now"]) == 4
    # the same call the campaign's step 1 makes, from the step-0 history
    hist = [v.as_history() for v in Archive(run / "archive.sqlite").history("H200", "fp32", SHAPE) if v.step == 0]
    again = BuiltinPolicy(0).propose(SHAPE, "fp32", "sm_90a", hist, n=4)
    assert [c["config"] for c in row["now"]] == [load_script("replay_search")._describe(c.family, c.params)
                                                 for c in again]
    # a proposal the run measured carries its figure; any other is unknown
    key = load_script("replay_search")._key
    known = {key(c.family, c.params): 100.0 / (100.0 + 10 * i) for i, c in enumerate(first)}
    known[key(first[0].family, dict(first[0].params, stages=3))] = 100.0 / 90.0
    for c in row["now"]:
        assert c["measured"] == (pytest.approx(known[c["key"]]) if c["key"] in known else None)


def test_the_command_prints_both_lists_and_refuses_what_it_cannot_read(tmp_path):
    run, _ = _run(tmp_path)
    p = subprocess.run([sys.executable, "scripts/replay_search.py", str(run), "--json", str(tmp_path / "o.json")],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "the run proposed:" in p.stdout and "the current policy proposes:" in p.stdout
    assert "proposals differ from the run's at step 1" in p.stdout and (tmp_path / "o.json").is_file()
    none = subprocess.run([sys.executable, "scripts/replay_search.py", str(run), "--step", "5"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert none.returncode == 1 and "no shape" in none.stderr
    bad = subprocess.run([sys.executable, "scripts/replay_search.py", str(tmp_path / "nope")], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "no archive" in bad.stderr
