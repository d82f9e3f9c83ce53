"""The kernel contract: what every candidate `.cu` file exports. See README.md, "The kernel contract"."""
from __future__ import annotations

SYMBOL = "hgemm"
SIGNATURE = ('extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C, '
             'int M, int N, int K, cudaStream_t stream);')

# ctypes view of the signature, for the worker: (A, B, B_col_major, C, M, N, K, stream) -> int
ARGTYPES = ("void_p", "void_p", "void_p", "void_p", "int", "int", "int", "void_p")

MAX_SOURCE_BYTES = 256 * 1024

ACCUMULATORS = ("fp32", "fp16")
MODES = ("offline", "server", "graph", "back-to-back", "separated", "steady")
# Modes whose every evaluation runs in a worker process started for it. In server mode a long-lived worker sometimes
# had every NVIDIA baseline 0.8-1.0 us slower for a whole evaluation while our kernels held (H200s, 2026-11-28 to
# 11-30; 512x512x64: best NVIDIA 5.86 us cold in all three finals of one campaign, 4.86 in another's), which reads up
# to ~20% in our favour on small shapes; in workers started for one evaluation it was never seen
# (docs/evaluator.md, server mode).
FRESH_WORKER_MODES = ("server",)
PROFILES = ("quick", "paper")


def check_shape(shape: tuple[int, int, int] | list[int]) -> tuple[int, int, int]:
    """Validate (M, N, K); raise ValueError with a readable reason."""
    if len(shape) != 3:
        raise ValueError(f"a shape is three integers M N K, got {shape!r}")
    m, n, k = (int(x) for x in shape)
    for name, v in (("M", m), ("N", n), ("K", k)):
        if v <= 0:
            raise ValueError(f"{name} must be positive, got {v}")
        if v > 65536:
            raise ValueError(f"{name}={v} is beyond what the evaluator supports (65536)")
    return m, n, k
