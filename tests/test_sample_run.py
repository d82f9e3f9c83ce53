"""The shipped sample run (examples/sample_run, made on a GPU machine) reads on this machine: `cudal2 inspect` and
`cudal2 report` take its folder path. Skips until the run's files are in the checkout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample_run"
pytestmark = pytest.mark.skipif(
    not all((SAMPLE / f).is_file() for f in ("transcript.jsonl", "archive.sqlite", "campaign.json")),
    reason="examples/sample_run holds no run yet (transcript.jsonl, archive.sqlite, campaign.json)")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="160")
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_inspect_and_report_read_the_sample_run_by_its_path(tmp_path):
    import shutil

    # a copy: opening a run's databases may add tables or switch their journal, and the checkout must stay clean
    sample = shutil.copytree(SAMPLE, tmp_path / "sample_run")
    shapes = ["x".join(map(str, s)) for s in json.loads((SAMPLE / "campaign.json").read_text())["shapes"]]
    shown = _cli("inspect", str(sample), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert all(s in shown.stdout for s in shapes), shown.stdout
    out = tmp_path / "report.html"
    made = _cli("report", str(sample), "-o", str(out), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    html = out.read_text()
    assert '<table class="summary"' in html and all(s in html for s in shapes)
