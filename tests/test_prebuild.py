"""scripts/prebuild_first_batches.py: a campaign's first builds made on a machine without a GPU, found by the
GPU machine's compile cache (real nvcc builds)."""
from __future__ import annotations

import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from script_module import load_script  # noqa: E402

from agent.families import render  # noqa: E402
from agent.policy import BuiltinPolicy  # noqa: E402
from evaluator.compile import compile_kernel  # noqa: E402


def test_the_first_batch_built_here_is_a_cache_hit_there(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("16 16 128\n")
    out = tmp_path / "prebuilt.tgz"
    assert load_script("prebuild_first_batches").main(
        ["--shapes", str(shapes), "--out", str(out), "--per-step", "2", "--jobs", "2"]) == 0
    there = tmp_path / "gpu_machine_cache"
    with tarfile.open(out) as tar:
        names = tar.getnames()
        tar.extractall(there, filter="data")
    assert names and not any("tmp-" in n for n in names)  # published entries only
    batch = BuiltinPolicy(0).propose((16, 16, 128), "fp32", "sm_90a", [], n=2, mode="offline")
    assert len(batch) == 2
    for c in batch:  # what the campaign compiles first: already built
        info = compile_kernel(render(c.family, c.params, (16, 16, 128)), "sm_90a", cache_dir=there)
        assert info.ok and info.cached, info.log
