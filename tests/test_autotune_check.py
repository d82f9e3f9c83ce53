"""scripts/autotune_check.py: a bad shape is named before anything needs a GPU, and a machine without one is told."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.gpu import has_gpu

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *shapes: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/autotune_check.py", *shapes, "--out", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("bad", ["1024x4096", "1024x4096x0", "1024xfourx8192"])
def test_a_bad_shape_is_named(tmp_path, bad):
    p = _run(tmp_path, "4096x1024x12288", bad)
    assert p.returncode == 2
    assert repr(bad) in p.stderr and "not a shape" in p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(has_gpu(), reason="checks the message shown on machines without a GPU")
def test_a_machine_without_a_gpu_is_told(tmp_path):
    p = _run(tmp_path, "4096x1024x12288")
    assert p.returncode == 2
    assert "needs a CUDA GPU" in p.stderr
    assert not (tmp_path / "out").exists()
