"""`cudal2 dataset export` on a campaign the real evaluator timed: the built-in policy's steps get prompts rendered
with the GPU's own facts, refused kernels keep their reasons, and nothing of this machine's paths comes along."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=1800)


def test_export_of_a_builtin_campaign_timed_on_this_gpu(tmp_path):
    from agent.dataset.privacy import has_absolute_path, strings_in
    from agent.proposers.parse import parse_reply

    shapes = tmp_path / "shapes.txt"
    shapes.write_text("64 64 64\n256 512 1024\n")
    r = _cli("campaign", "--shapes", str(shapes), "--model", "builtin", "--budget", "4", "--per-step", "2",
             "--confirm-top", "0", "--final-repeats", "1", "--no-global", "--no-retrieval", "--ncu", "off",
             "--runs-dir", str(tmp_path / "runs"), "--run", "gpu")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for fmt in ("reward", "chat"):
        r = _cli("dataset", "export", "gpu", "--runs-dir", str(tmp_path / "runs"), "--format", fmt,
                 "--out", str(tmp_path / f"{fmt}.jsonl"))
        assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "reward.manifest.json").read_text())
    assert man["runs"][0]["prompts_without_gpu_facts"] == 0 and man["runs"][0]["proposers"]
    recs = [json.loads(line) for s in ("train", "validation") for line in (tmp_path / f"reward.{s}.jsonl").open()]
    assert len(recs) == man["runs"][0]["variants"] >= 8
    for rec in recs:
        user = rec["prompt"][1]["content"]
        assert rec["prompt_from"] == "rendered" and "- SMs: " in user and "- compute capability: " in user
        assert parse_reply(rec["completion"][0]["content"], None).ok
        if not rec["correct"]:
            assert rec["reason"]
    for f in tmp_path.glob("*.json*"):
        text = f.read_text()
        assert str(tmp_path) not in text and str(Path.home()) not in text, f.name
        docs = [json.loads(line) for line in text.splitlines()] if f.suffix == ".jsonl" else [json.loads(text)]
        assert not [s for s in strings_in(docs) if has_absolute_path(s)], f.name
