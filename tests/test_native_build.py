"""The evaluator's native library (evaluator/native/cl2native.cu: operand buffers, checks, the timed batches and the
cuBLAS/cuBLASLt baselines) compiles for both archs the project serves, on the CPU machine: a GPU session that finds
it broken has spent its device time on nothing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cublas_headers import SKIP_REASON, cublas_include  # noqa: E402

from evaluator.compile import BASE_FLAGS, gencode_flags, nvcc_path  # noqa: E402
from evaluator.native import NATIVE_SOURCE  # noqa: E402


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_native_library_compiles(tmp_path, arch):
    inc = cublas_include()
    if inc is None:
        pytest.skip(SKIP_REASON)
    obj = tmp_path / "cl2native.o"
    r = subprocess.run([nvcc_path(), "-c", "-Xcompiler", "-fPIC", *BASE_FLAGS, *gencode_flags(arch), f"-I{inc}",
                        str(NATIVE_SOURCE), "-o", str(obj)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert obj.stat().st_size > 0
