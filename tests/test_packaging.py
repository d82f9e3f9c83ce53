"""A non-editable install works away from the checkout: the wheel carries prompts/, retrieval_corpus/ and the
report template, and its `cudal2 propose` and `cudal2 report` run from a folder outside the repository. The wheel
goes into a fresh venv that sees the system's site-packages (the dependencies), not the checkout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package, not the checkout
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_wheel_installs_and_runs_outside_the_repository(tmp_path):
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
          str(REPO)], cwd=tmp_path)
    (wheel,) = wheels.glob("cuda_l2-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for data in ("agent/prompts/system.j2", "agent/prompts/step.j2", "agent/prompts/report.html.j2",
                 "agent/retrieval_corpus/hopper-wgmma.md", "agent/families/hopper_wgmma.cu.j2",
                 "evaluator/native/cl2native.cu"):
        assert data in names, data

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], cwd=tmp_path)
    py, cli = venv / "bin" / "python", venv / "bin" / "cudal2"
    _run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run([str(py), "-c", "import agent.resources as r; print(r.data_dir('prompts'))"], cwd=elsewhere)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout

    _run([str(cli), "propose", "--shape", "128", "256", "512", "--model", "builtin", "-n", "2", "--no-retrieval",
          "--out", "cands"], cwd=elsewhere)
    manifest = json.loads((elsewhere / "cands" / "manifest.json").read_text())
    from evaluator.gpu import has_gpu, native_arch

    assert manifest["arch"] == (native_arch() if has_gpu() else "sm_90a")
    assert len(list((elsewhere / "cands").glob("*.cu"))) == 2

    sys.path.insert(0, str(Path(__file__).parent))
    from test_campaign import campaign

    cfg, _, _ = campaign(tmp_path, [(64, 64, 64)], budget=2, final_repeats=1)
    _run([str(cli), "report", str(cfg.run_dir), "-o", "report.html"], cwd=elsewhere)
    html = (elsewhere / "report.html").read_text()
    assert "64x64x64" in html and '<table class="summary"' in html
