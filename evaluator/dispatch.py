"""The dispatch library: use an exported archive's kernels in your own code.

    from evaluator.dispatch import Dispatcher
    d = Dispatcher("exported_archive/")         # written by `cudal2 archive export DIR`
    c = d.matmul(a, b)                          # a: M×K, b: K×N, fp16, torch or CuPy, on the GPU

For each (M, N, K) it runs the archived kernel when the archive holds one for this GPU model and accumulator that
beat the baseline when it was measured, and cuBLAS (torch.matmul / cupy.matmul) otherwise: the paper's
max(CUDA-L2, baseline). A kernel that declines a shape at run time (non-zero return) is also answered by cuBLAS,
and the shape is not tried again.

The contract wants B twice: row-major (K×N) and column-major (the same B stored as N×K row-major). When the caller
passes only one layout, the other is made by a contiguous copy on the current stream: K·N·2 bytes read and written
per call, which for small M can cost as much as the GEMM itself. Callers that reuse B (weights) should keep both
and pass `b_col_major=`; `prepare_b(b)` makes the pair once. An `nn.Linear` weight W (N×K, row-major) *is* B
column-major for y = x @ W.T: `b, bcm = d.prepare_b(W.t())` costs one copy, after which
`d.matmul(x, b, b_col_major=bcm)` costs none (`d.linear(x, W)` is the convenient form that copies every call).
"""
from __future__ import annotations

import ctypes
import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .contract import ACCUMULATORS, check_shape

MANIFEST = "manifest.json"


@dataclass
class ArchivedKernel:
    shape: tuple[int, int, int]
    acc: str
    gpu: str
    path: Path
    speedups: dict[str, float]
    arch: str | None = None
    source_hash: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def speedup(self, baseline: str) -> float | None:
        v = self.speedups.get(baseline)
        return None if v is None else float(v)


@dataclass
class _Loaded:
    kernel: ArchivedKernel
    fn: Any  # ctypes function hgemm
    lib: Any  # keeps the CDLL alive
    declined: bool = False


def read_manifest(archive_dir: str | Path) -> list[ArchivedKernel]:
    """The kernels listed in DIR/manifest.json; raises ValueError naming what is wrong with it."""
    root = Path(archive_dir)
    mpath = root / MANIFEST
    if not mpath.is_file():
        raise FileNotFoundError(f"{mpath}: no manifest; export an archive with `cudal2 archive export {root}`")
    try:
        doc = json.loads(mpath.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{mpath}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("kernels"), list):
        raise ValueError(f"{mpath}: expected an object with a 'kernels' list")
    out = []
    for i, k in enumerate(doc["kernels"]):
        try:
            shape = check_shape(k["shape"])
            acc = k["acc"]
            if acc not in ACCUMULATORS:
                raise ValueError(f"acc must be one of {ACCUMULATORS}, got {acc!r}")
            path = (root / k["file"]).resolve()
            if root.resolve() not in path.parents:
                raise ValueError(f"file {k['file']!r} points outside the archive")
            out.append(ArchivedKernel(shape=shape, acc=acc, gpu=str(k.get("gpu", "")), path=path,
                                      speedups={n: float(v) for n, v in (k.get("speedups") or {}).items()
                                                if v is not None},
                                      arch=k.get("arch"), source_hash=k.get("source_hash", ""), extra=k))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{mpath}: kernels[{i}]: {e}") from None
    return out


class Dispatcher:
    """Archived kernel where it wins, cuBLAS elsewhere. Thread-safe; kernels are compiled on first use."""

    def __init__(self, archive_dir: str | Path, *, acc: str = "fp32", baseline: str = "torch",
                 min_speedup: float = 1.0, gpu_name: str | None = None, any_gpu: bool = False,
                 arch: str | None = None):
        """baseline/min_speedup: a kernel is used only where its archived speedup against `baseline` (an
        EvalResult baseline name such as 'torch' or 'cublaslt-autotune-max'; 'torch' falls back to 'cublas-max'
        for archives without a torch timing) exceeds min_speedup; min_speedup=0 uses every archived kernel. Kernels timed
        on another GPU model are skipped unless any_gpu=True (their speed there is unknown)."""
        if acc not in ACCUMULATORS:
            raise ValueError(f"acc must be one of {ACCUMULATORS}, got {acc!r}")
        self.archive_dir = Path(archive_dir)
        self.acc, self.baseline, self.min_speedup = acc, baseline, float(min_speedup)
        self._gpu_name, self._any_gpu, self._arch = gpu_name, any_gpu, arch
        self._all = read_manifest(self.archive_dir)
        self._table: dict[tuple[int, int, int], ArchivedKernel] | None = None
        self._loaded: dict[tuple[int, int, int], _Loaded] = {}
        self._lock = threading.Lock()
        self.stats = {"kernel": 0, "fallback": 0}

    # ------------------------------------------------------------ selection

    def _device_gpu(self) -> str:
        if self._gpu_name is None:
            from .gpu import device_name
            self._gpu_name = device_name(0)
        return self._gpu_name

    def table(self) -> dict[tuple[int, int, int], ArchivedKernel]:
        """shape -> the kernel that dispatch uses for it (only winners on this GPU model and accumulator)."""
        if self._table is None:
            gpu = None if self._any_gpu else self._device_gpu()
            table: dict[tuple[int, int, int], ArchivedKernel] = {}
            for k in self._all:
                if k.acc != self.acc or (gpu is not None and k.gpu != gpu):
                    continue
                s = self._score(k)
                if s is None or not s > self.min_speedup:
                    continue
                cur = table.get(k.shape)
                if cur is None or s > (self._score(cur) or 0.0):
                    table[k.shape] = k
            self._table = table
        return self._table

    def _score(self, k: ArchivedKernel) -> float | None:
        # Archives timed where torch was absent have no 'torch' baseline; cuBLAS is what torch.matmul calls.
        s = k.speedup(self.baseline)
        return k.speedup("cublas-max") if s is None and self.baseline == "torch" else s

    def kernel_for(self, shape: tuple[int, int, int]) -> ArchivedKernel | None:
        return self.table().get(tuple(int(v) for v in shape))

    def _load(self, shape: tuple[int, int, int]) -> _Loaded | None:
        hit = self._loaded.get(shape)
        if hit is not None or shape not in self.table():
            return hit
        with self._lock:
            hit = self._loaded.get(shape)
            if hit is None:
                k = self.table()[shape]
                lib = ctypes.CDLL(str(_build_shared_object(k.path.read_text(), self._arch)))
                fn = lib.hgemm
                fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
                fn.restype = ctypes.c_int
                hit = self._loaded[shape] = _Loaded(k, fn, lib)
        return hit

    def warmup(self, shapes: list[tuple[int, int, int]] | None = None) -> int:
        """Compile and load ahead of time (first use otherwise pays the nvcc build); returns how many loaded."""
        n = 0
        for s in shapes if shapes is not None else list(self.table()):
            n += self._load(tuple(s)) is not None
        return n

    # ------------------------------------------------------------ the GEMM

    def matmul(self, a, b, *, b_col_major=None, out=None):
        """C = A @ B for fp16 A (..., K) and B (K, N) on one CUDA device; torch tensors or CuPy arrays.
        Leading dimensions of A are folded into M (A must then be contiguous)."""
        xp = _backend(a)
        if _backend(b) is not xp or (b_col_major is not None and _backend(b_col_major) is not xp):
            raise TypeError("a, b and b_col_major must all be torch tensors or all CuPy arrays")
        return xp.matmul(self, a, b, b_col_major, out)

    @staticmethod
    def prepare_b(b):
        """(B row-major, B column-major) as contiguous copies, for callers that reuse B across calls."""
        if _backend(b) is _Cupy:
            import cupy
            return cupy.ascontiguousarray(b), cupy.ascontiguousarray(b.T)
        return b.contiguous(), b.t().contiguous()

    def linear(self, x, weight):
        """y = x @ weight.T for an nn.Linear-style weight (N×K row-major), which is B column-major as is."""
        return self.matmul(x, weight.T if _backend(weight) is _Cupy else weight.t(), b_col_major=weight)

    def _run(self, shape, a_ptr, b_ptr, bcm_ptr, c_ptr, stream_ptr) -> bool:
        ld = self._load(shape)
        if ld is None or ld.declined:
            return False
        rc = ld.fn(a_ptr, b_ptr, bcm_ptr, c_ptr, shape[0], shape[1], shape[2], stream_ptr)
        if rc != 0:
            ld.declined = True  # the kernel does not support this shape after all; cuBLAS from now on
            return False
        return True


def _build_shared_object(source: str, arch: str | None) -> Path:
    """nvcc build through the evaluator's content-hash cache; the .so is shared with evaluations."""
    from . import compile as compile_mod
    from .gpu import native_arch

    info = compile_mod.compile_kernel(source, arch=arch or native_arch(0))
    if not info.ok or not info.so_path:
        raise RuntimeError(f"archived kernel failed to build for {info.arch}:\n{info.log[-2000:]}")
    return Path(info.so_path)


# ---------------------------------------------------------------- array backends

def _backend(x):
    mod = type(x).__module__
    if mod.startswith("torch"):
        return _Torch
    if mod.startswith("cupy"):
        return _Cupy
    raise TypeError(f"expected a torch tensor or a CuPy array, got {type(x).__name__}")


def _fold(shape_a, b_shape) -> tuple[int, int, int]:
    if len(shape_a) < 1 or len(b_shape) != 2:
        raise ValueError(f"a must be (..., K) and b (K, N); got a{tuple(shape_a)}, b{tuple(b_shape)}")
    k = shape_a[-1]
    if b_shape[0] != k:
        raise ValueError(f"inner dimensions differ: a(..., {k}) @ b{tuple(b_shape)}")
    m = math.prod(shape_a[:-1]) if len(shape_a) > 1 else 1
    return m, b_shape[1], k


class _Torch:
    @staticmethod
    def matmul(d: Dispatcher, a, b, bcm, out):
        import torch

        if a.dtype != torch.float16 or b.dtype != torch.float16:
            raise TypeError(f"fp16 tensors expected, got {a.dtype} and {b.dtype}")
        if not (a.is_cuda and b.is_cuda) or a.device != b.device:
            raise ValueError("a and b must be CUDA tensors on the same device")
        m, n, k = _fold(a.shape, b.shape)
        lead = tuple(a.shape[:-1])
        shape = (m, n, k)
        if m == 0 or n == 0 or k == 0 or d.kernel_for(shape) is None:
            d.stats["fallback"] += 1
            return torch.matmul(a, b, out=out)
        with torch.cuda.device(a.device):
            stream = torch.cuda.current_stream(a.device)
            a2 = a.reshape(m, k).contiguous()
            b_rm = b.contiguous()
            if bcm is None:
                bcm = b.t().contiguous()  # the documented copy: K·N halves
            elif tuple(bcm.shape) != (n, k) or not bcm.is_contiguous() or bcm.dtype != torch.float16:
                raise ValueError(f"b_col_major must be a contiguous fp16 ({n}, {k}) tensor: B stored "
                                 f"column-major, i.e. B.T row-major")
            c = out if out is not None else torch.empty((m, n), dtype=torch.float16, device=a.device)
            if tuple(c.shape) not in ((m, n), lead + (n,)) or not c.is_contiguous():
                raise ValueError("out must be a contiguous fp16 tensor of the result's shape")
            if d._run(shape, a2.data_ptr(), b_rm.data_ptr(), bcm.data_ptr(), c.data_ptr(), stream.cuda_stream):
                d.stats["kernel"] += 1
                return c.reshape(lead + (n,)) if out is None else out
            d.stats["fallback"] += 1
            return torch.matmul(a, b, out=out)


class _Cupy:
    @staticmethod
    def matmul(d: Dispatcher, a, b, bcm, out):
        import cupy

        if a.dtype != cupy.float16 or b.dtype != cupy.float16:
            raise TypeError(f"fp16 arrays expected, got {a.dtype} and {b.dtype}")
        if a.device.id != b.device.id:
            raise ValueError("a and b must be on the same device")
        m, n, k = _fold(a.shape, b.shape)
        lead = tuple(a.shape[:-1])
        shape = (m, n, k)
        if m == 0 or n == 0 or k == 0 or d.kernel_for(shape) is None:
            d.stats["fallback"] += 1
            return cupy.matmul(a, b, out=out)
        with a.device:
            stream = cupy.cuda.get_current_stream()
            a2 = cupy.ascontiguousarray(a.reshape(m, k))
            b_rm = cupy.ascontiguousarray(b)
            if bcm is None:
                bcm = cupy.ascontiguousarray(b.T)  # the documented copy: K·N halves
            elif tuple(bcm.shape) != (n, k) or not bcm.flags.c_contiguous or bcm.dtype != cupy.float16:
                raise ValueError(f"b_col_major must be a contiguous fp16 ({n}, {k}) array: B stored "
                                 f"column-major, i.e. B.T row-major")
            c = out if out is not None else cupy.empty((m, n), dtype=cupy.float16)
            if tuple(c.shape) not in ((m, n), lead + (n,)) or not c.flags.c_contiguous:
                raise ValueError("out must be a contiguous fp16 array of the result's shape")
            if d._run(shape, a2.data.ptr, b_rm.data.ptr, bcm.data.ptr, c.data.ptr, stream.ptr):
                d.stats["kernel"] += 1
                return c.reshape(lead + (n,)) if out is None else out
            d.stats["fallback"] += 1
            return cupy.matmul(a, b, out=out)
