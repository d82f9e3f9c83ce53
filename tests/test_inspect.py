"""`cudal2 inspect` on a real campaign transcript (GPU seam: recorded results; see test_campaign)."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent))
from test_campaign import TournamentSeam, campaign  # noqa: E402

from agent.inspect import InspectError, inspect_run, load_events  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inspect")
    cfg, summary, _ = campaign(tmp, [(64, 64, 64), (128, 256, 512)], budget=4)
    assert not summary["failures"]
    return cfg


def show(cfg, **kw) -> str:
    buf = io.StringIO()
    inspect_run(cfg.run, runs_dir=cfg.runs_dir, console=Console(file=buf, width=160), **kw)
    return buf.getvalue()


def test_run_overview(run):
    out = show(run)
    assert "64x64x64" in out and "128x256x512" in out
    assert "budget_candidates" in out
    assert "0.964×" in out and "1.036×" in out  # best speedups of the recorded variants


def test_shape_and_step_views(run):
    out = show(run, shape=(64, 64, 64))
    assert "64x64x64: 3 steps" in out  # as the overview counts them: the re-measurements (step "–") are no step
    assert "propose → evaluate → record" in out and "compile_error×1" in out and "incorrect×1" in out
    step = show(run, shape=(64, 64, 64), step=1)
    # The archived record behind each evaluation: checks, timings, NCU metrics, and the kernel itself.
    for needle in ("evaluate", "baseline_bounded_deviation", "cublaslt-autotune-TN", "Nsight Compute",
                   "extern \"C\" int hgemm", "exceeds the bound", "source_hash"):
        assert needle in step, needle


def test_the_shape_view_says_how_the_winner_was_chosen(tmp_path):
    from agent.campaign.archive import Archive

    shape = (128, 256, 512)
    cfg, summary, _ = campaign(tmp_path, [shape], budget=6, final_repeats=1,
                               seam=TournamentSeam(tmp_path / "calls.jsonl"))
    assert not summary["failures"]
    win = Archive(cfg.run_dir / "archive.sqlite").best("NVIDIA H200", "fp32", shape)
    out = show(cfg, shape=shape)
    line = next(x for x in out.splitlines() if x.startswith("tournament (15 rounds, vs cublaslt-autotune-max): "))
    assert line.endswith(f"→ #{win.id}") and line.count("×") == 3


def test_diff_between_steps(run):
    out = show(run, shape=(64, 64, 64), diff=(0, 1))
    assert "--- step 0" in out and "+++ step 1" in out
    assert "-// variant: tile128" in out and "+// variant: tile128x256" in out


def test_errors_are_clear(run, tmp_path):
    with pytest.raises(InspectError, match="no transcript for run"):
        show(run.__class__(run="nope", shapes=[(1, 1, 1)], runs_dir=run.runs_dir))
    with pytest.raises(InspectError) as ei:
        inspect_run(str(tmp_path), runs_dir=run.runs_dir)  # an absolute folder: looked for in one place
    assert str(ei.value).count("transcript.jsonl") == 1
    with pytest.raises(InspectError, match="shapes present: 64x64x64, 128x256x512"):
        show(run, shape=(1, 2, 3))
    with pytest.raises(InspectError, match="steps present"):
        show(run, shape=(64, 64, 64), step=99)
    with pytest.raises(InspectError, match="need --shape"):
        show(run, step=1)


def test_torn_last_line_is_reported_not_fatal(run, tmp_path):
    src = run.run_dir / "transcript.jsonl"
    dst = tmp_path / "torn" / "transcript.jsonl"
    dst.parent.mkdir()
    dst.write_text(src.read_text() + '{"ts": 1, "node": "evalu')
    events, problems = load_events(dst)
    assert len(events) == len(src.read_text().splitlines()) and problems and "unreadable" in problems[0]
    buf = io.StringIO()
    assert inspect_run(str(dst.parent), console=Console(file=buf, width=160)) == 0
    assert "unreadable" in buf.getvalue() and "64x64x64" in buf.getvalue()


def test_a_resumed_steps_recovered_evaluations_count_once(run, tmp_path):
    """On resume the graph logs again, marked recovered, what the killed process had evaluated and archived in that
    step (agent.loop.shape_loop's evaluate node; tests/test_graph.py kills a run for real). Its figures must not count twice."""
    import json

    src = run.run_dir / "transcript.jsonl"
    lines = src.read_text().splitlines()
    evals = [json.loads(x) for x in lines if json.loads(x)["node"] == "evaluate"
             and json.loads(x)["shape"] == [64, 64, 64] and json.loads(x)["output"].get("variant_id")]
    again = []
    for e in evals[:2]:
        e["output"] = {"memo": False, "recovered": True, **{k: e["output"][k] for k in
                                                            ("variant_id", "status", "speedup", "speedups")}}
        again.append(json.dumps(e))
    dst = tmp_path / "resumed" / "transcript.jsonl"
    dst.parent.mkdir()
    dst.write_text("\n".join(lines + again) + "\n")

    def shown(path, **kw):  # the tables, without the title that names the folder (two lines where its path is long)
        buf = io.StringIO()
        inspect_run(str(path.parent), console=Console(file=buf, width=200), **kw)
        text = buf.getvalue()
        return text[text.index("┏"):]

    assert "│ 64x64x64 " in shown(dst) and shown(dst) == shown(src)
    assert shown(dst, shape=(64, 64, 64)) == shown(src, shape=(64, 64, 64))


def test_cli(run):
    import subprocess

    r = subprocess.run([sys.executable, "-m", "agent.cli", "inspect", run.run, "--runs-dir", str(run.runs_dir),
                        "--shape", "128", "256", "512", "--step", "0"], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr
    assert "128x256x512" in r.stdout and "evaluation record" in r.stdout
    r = subprocess.run([sys.executable, "-m", "agent.cli", "inspect", "no-such-run", "--runs-dir",
                        str(run.runs_dir)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no transcript" in r.stderr
