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
