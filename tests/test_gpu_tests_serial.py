"""GPU tests refuse pytest-xdist: its workers would share the one GPU (tests/conftest.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_gpu_tests_under_xdist_fail_saying_why_and_others_run(tmp_path):
    # a GPU is claimed, so the CPU machine's skip does not apply; the tests themselves never start
    (tmp_path / "claim_gpu.py").write_text("import evaluator.gpu\nevaluator.gpu.has_gpu = lambda: True\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "claim_gpu", "-n", "2"]
    gpu = subprocess.run([*base, "-m", "gpu", "tests/test_prelude_gpu.py"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert gpu.returncode == 1, gpu.stdout + gpu.stderr
    assert "run `pytest -m gpu` without -n" in gpu.stdout and "1 error" in gpu.stdout
    cpu = subprocess.run([*base, "tests/test_family_registry.py"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert cpu.returncode == 0 and "3 passed" in cpu.stdout, cpu.stdout + cpu.stderr
