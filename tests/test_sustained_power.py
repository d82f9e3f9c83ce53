"""scripts/sustained_power.py: its spec is checked before anything needs a GPU, and a machine without one is told."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.gpu import has_gpu

REPO = Path(__file__).resolve().parents[1]
OK = {"tile_m": 128, "tile_n": 256, "tile_k": 64, "cluster_m": 1, "cluster_n": 1, "schedule": "cooperative",
      "scheduler": "persistent", "splits": 1, "raster": "along_n", "swizzle": 4, "stages": 0, "b_operand": "col",
      "swap_ab": False, "acc": "fp32"}


def _run(tmp_path: Path, spec, *extra: str) -> subprocess.CompletedProcess:
    f = tmp_path / "spec.json"
    f.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    return subprocess.run([sys.executable, "scripts/sustained_power.py", str(f), "--out", str(tmp_path / "out"),
                           *extra], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("spec,says", [
    ("{not json", "spec.json"),
    ({}, "non-empty"),
    ({"1024x4096": {"a": {"family": "hopper_wgmma", "params": OK}}}, "'1024x4096' is not a shape"),
    ({"1024x4096x8192": {"lt-NN": {"family": "hopper_wgmma", "params": OK}}}, "name of a baseline"),
    ({"1024x4096x8192": {"a": {"params": OK}}}, "needs 'family' and 'params'"),
    ({"1024x4096x8192": {"a": {"family": "hopper_wgmma", "params": dict(OK, tile_n=168)}}}, "a: refused"),
    ({"1024x4096x8192": {"p": {"file": "spec.json"}}}, "p: a file target needs 'probe'"),
    ({"1024x4096x8192": {"p": {"file": "spec.json", "probe": " "}}}, "p: a file target needs 'probe'"),
    ({"1024x4096x8192": {"p": {"file": "absent.cu", "probe": "no loads"}}}, "p: cannot read 'absent.cu'"),
])
def test_bad_specs_are_refused_with_the_entry_named(tmp_path, spec, says):
    p = _run(tmp_path, spec)
    assert p.returncode == 2
    assert says in p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(has_gpu(), reason="checks the message shown on machines without a GPU")
@pytest.mark.parametrize("extra", [(), ("--separator",)])
def test_a_machine_without_a_gpu_is_told(tmp_path, extra):
    p = _run(tmp_path, {"1024x4096x8192": {"base": {"family": "hopper_wgmma", "params": OK}}}, *extra)
    assert p.returncode == 2
    assert "needs a CUDA GPU" in p.stderr


@pytest.mark.skipif(has_gpu(), reason="checks the message shown on machines without a GPU")
def test_a_probe_file_next_to_the_spec_is_accepted_before_the_gpu_is_asked_for(tmp_path):
    (tmp_path / "probe.cu").write_text("// a contract file with its loads cut out\n")
    p = _run(tmp_path, {"1024x4096x8192": {"p": {"file": "probe.cu", "probe": "no loads"}}})
    assert p.returncode == 2
    assert "needs a CUDA GPU" in p.stderr
