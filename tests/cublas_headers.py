"""Where the compile-only tests of the two cuBLAS users (the evaluator's native library, the outside harness) find
cublasLt.h: the CUDA toolkit's include folder, or the nvidia-cublas wheel's headers that scripts/test.sh unpacks
where the toolkit has none (a machine without a GPU driver, like CI's)."""
from __future__ import annotations

import os
from pathlib import Path

WHEEL_HEADERS = Path("/tmp/cublas/nvidia/cu13/include")


def cublas_include() -> Path | None:
    toolkit = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda") / "include"
    return next((d for d in (toolkit, WHEEL_HEADERS) if (d / "cublasLt.h").is_file()), None)


SKIP_REASON = (f"no cublasLt.h in the CUDA toolkit or at {WHEEL_HEADERS} (scripts/test.sh unpacks the nvidia-cublas "
               "wheel's headers there)")
