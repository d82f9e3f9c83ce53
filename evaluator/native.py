"""Build and bind the evaluator's native library (native/cl2native.cu): buffers, reference, baselines, timing.

Built once per (source, arch, nvcc) through the same content-hash cache as candidates, linked against cuBLAS and
cuBLASLt. Only the worker process loads it.
"""
from __future__ import annotations

import ctypes
import math
from ctypes import POINTER, c_double, c_float, c_int, c_longlong, c_size_t, c_ulonglong, c_ushort, c_void_p
from pathlib import Path

from evaluator.lt_variations import FIELDS

NATIVE_SOURCE = Path(__file__).with_name("native") / "cl2native.cu"


class NativeError(RuntimeError):
    pass


def build(arch: str | None = None) -> str:
    """Compile the native library (cached) and return the .so path."""
    from evaluator.compile import compile_kernel

    info = compile_kernel(NATIVE_SOURCE.read_text(), arch, link_flags=["-lcublas", "-lcublasLt"],
                          screen_source=False, timeout=600)
    if not info.ok or not info.so_path:
        raise NativeError(f"building the evaluator's native library failed:\n{info.log[-4000:]}")
    return info.so_path


_SIGS = {
    "cl2_last_error": (ctypes.c_char_p, []),
    "cl2_init": (c_int, [c_int]),
    "cl2_stream": (c_void_p, []),
    "cl2_info": (c_int, [POINTER(c_longlong)]),
    "cl2_sync": (c_int, []),
    "cl2_device_sync": (c_int, []),
    "cl2_buf_alloc": (c_int, [c_size_t]),
    "cl2_buf_ptr": (c_void_p, [c_int]),
    "cl2_plain_alloc": (c_void_p, [c_size_t]),
    "cl2_plain_free": (c_int, [c_void_p]),
    "cl2_buf_free": (c_int, [c_int]),
    "cl2_buf_guard_damage": (c_longlong, [c_int]),
    "cl2_fill_value": (c_int, [c_void_p, c_size_t, c_ushort]),
    "cl2_fill_normal": (c_int, [c_void_p, c_size_t, c_ulonglong, c_float]),
    "cl2_fill_binary": (c_int, [c_void_p, c_size_t, c_ulonglong, c_float]),
    "cl2_fill_honesty": (c_int, [c_void_p, c_void_p, c_int, c_int, c_int, c_ulonglong]),
    "cl2_transpose": (c_int, [c_void_p, c_void_p, c_int, c_int]),
    "cl2_copy": (c_int, [c_void_p, c_void_p, c_size_t]),
    "cl2_late_write": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_void_p, c_size_t, c_void_p, c_void_p,
                               c_void_p, c_size_t, c_ulonglong]),
    "cl2_count_diff": (c_longlong, [c_void_p, c_void_p, c_size_t]),
    "cl2_reference": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_int, c_int]),
    "cl2_compare": (c_int, [c_void_p, c_void_p, c_size_t, c_float, POINTER(c_double)]),
    "cl2_register_candidate": (c_int, [c_void_p, c_int, c_int, c_int]),
    "cl2_register_cublas": (c_int, [c_int, c_int, c_int, c_int, c_int]),
    "cl2_lt_heuristics": (c_int, [c_int, c_int, c_int, c_int, c_int, c_int, c_void_p]),
    "cl2_register_lt": (c_int, [c_int, c_int, c_int, c_int, c_int, c_void_p]),
    "cl2_lt_algo_ids": (c_int, [c_int, c_int, POINTER(c_int)]),
    "cl2_lt_algo_caps": (c_int, [c_int, c_int, c_int, POINTER(c_int)]),
    "cl2_lt_algo_try": (c_int, [c_int, c_int, c_int, c_int, c_int, c_void_p, c_int, POINTER(c_int), c_void_p,
                                POINTER(c_int), POINTER(c_int), POINTER(c_double), POINTER(c_float)]),
    "cl2_release_callables": (c_int, []),
    "cl2_call": (c_int, [c_int, c_void_p, c_void_p, c_void_p, c_void_p]),
    "cl2_hold": (c_int, []),
    "cl2_release": (c_int, []),
    "cl2_hold_timed_out": (c_int, []),
    "cl2_record": (c_int, [c_int]),
    "cl2_elapsed_ms": (c_float, []),
    "cl2_time_batch": (c_double, [c_int, c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_int, c_int, POINTER(c_int)]),
    "cl2_time_graph": (c_double, [c_int, c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_int, POINTER(c_int)]),
    "cl2_time_rot": (c_double, [c_int, c_void_p, c_int, c_int, c_int, c_int, POINTER(c_int)]),
    "cl2_time_graph_rot": (c_double, [c_int, c_void_p, c_int, c_int, c_int, POINTER(c_int)]),
    "cl2_spot_check": (c_int, [c_void_p, c_int, c_int, c_int, c_int, c_int, c_ulonglong, POINTER(c_double)]),
    "cl2_separator": (c_int, []),
    "cl2_escape_probe": (c_int, [c_int, c_void_p, c_void_p, c_void_p, c_void_p, c_int, POINTER(c_double)]),
}

HALF_NAN_POISON = 0x7E00  # canonical quiet NaN: C is filled with it before every checked call
LT_CONFIG_FIELDS = len(FIELDS)  # cl2_lt_algo_try's configuration fields, in evaluator.lt_variations's order


class Native:
    """Thin, checked wrapper over the library. Methods raise NativeError with the library's message."""

    def __init__(self, so_path: str, device: int = 0):
        self.lib = ctypes.CDLL(so_path)
        for name, (res, args) in _SIGS.items():
            f = getattr(self.lib, name)
            f.restype, f.argtypes = res, args
        self._check(self.lib.cl2_init(device), "init")
        self.stream = self.lib.cl2_stream()

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise NativeError(f"{what}: {self.lib.cl2_last_error().decode(errors='replace')} (rc={rc})")

    def __getattr__(self, name: str):
        # Passthrough for entry points whose return value is data, not a status.
        return getattr(self.lib, "cl2_" + name)

    def ok(self, name: str, *args) -> None:
        self._check(getattr(self.lib, "cl2_" + name)(*args), name)

    def info(self) -> dict:
        arr = (c_longlong * 9)()
        self.ok("info", arr)
        keys = ("driver", "runtime", "cublas", "cublaslt", "sms", "smem_optin", "l2_bytes", "cc_major", "cc_minor")
        return dict(zip(keys, (int(x) for x in arr)))

    def alloc(self, nbytes: int) -> int:
        h = self.lib.cl2_buf_alloc(nbytes)
        if h < 0:
            raise NativeError(f"allocating {nbytes} bytes: {self.lib.cl2_last_error().decode()}")
        return h

    def compare(self, c_ptr: int, ref_ptr: int, n: int, exact_limit: float = 0.0) -> dict:
        out = (c_double * 6)()
        self.ok("compare", c_ptr, ref_ptr, n, exact_limit, out)
        finite = n - int(out[1])
        return {"max_abs_diff": out[0], "nonfinite": int(out[1]), "exact_mismatches": int(out[2]),
                "exact_eligible": int(out[3]), "max_abs_ref": out[4],
                "rms_diff": math.sqrt(out[5] / finite) if finite > 0 else float("inf")}

    def count_diff(self, a: int, b: int, n_half: int) -> int:
        r = self.lib.cl2_count_diff(a, b, n_half)
        if r < 0:
            raise NativeError(f"count_diff: {self.lib.cl2_last_error().decode()}")
        return int(r)

    def guard_damage(self, h: int) -> int:
        r = self.lib.cl2_buf_guard_damage(h)
        if r < 0:
            raise NativeError(f"guard check: {self.lib.cl2_last_error().decode()}")
        return int(r)

    def time_batch(self, cid: int, a: int, b: int, bc: int, c: int, reps: int, hold: bool = True,
                   sep: bool = False) -> float:
        """Milliseconds per call of a batch; `sep` puts the ordinary separator kernel after every call, and
        cid < 0 times separators alone."""
        st = c_int(0)
        ms = self.lib.cl2_time_batch(cid, a, b, bc, c, reps, int(hold), int(sep), ctypes.byref(st))
        if st.value != 0 or ms < 0:
            raise CallFailed(st.value, self.lib.cl2_last_error().decode(errors="replace"))
        return ms

    def time_graph(self, cid: int, a: int, b: int, bc: int, c: int, reps: int, sep: bool = False) -> float:
        """As time_batch, the batch captured once into a CUDA graph and replayed."""
        st = c_int(0)
        ms = self.lib.cl2_time_graph(cid, a, b, bc, c, reps, int(sep), ctypes.byref(st))
        if st.value != 0 or ms < 0:
            raise CallFailed(st.value, self.lib.cl2_last_error().decode(errors="replace"))
        return ms

    def time_rot(self, cid: int, table: "PointerTable", reps: int, hold: bool = True, sep: bool = False,
                 graph: bool = False) -> float:
        """Milliseconds per call of a batch whose call r uses operand set r % len(table) (see cl2_time_rot);
        `graph` captures the batch once into a CUDA graph and replays it."""
        st = c_int(0)
        if graph:
            ms = self.lib.cl2_time_graph_rot(cid, table.array, table.count, reps, int(sep), ctypes.byref(st))
        else:
            ms = self.lib.cl2_time_rot(cid, table.array, table.count, reps, int(hold), int(sep), ctypes.byref(st))
        if st.value != 0 or ms < 0:
            raise CallFailed(st.value, self.lib.cl2_last_error().decode(errors="replace"))
        return ms

    def spot_check(self, table: "PointerTable", m: int, n: int, k: int, samples: int, seed: int) -> list[dict]:
        """Per operand set: the largest |C - fp32 reference| over `samples` positions drawn from `seed`, how many of
        those outputs were not finite, and the largest |reference|."""
        out = (c_double * (3 * table.count))()
        self.ok("spot_check", table.array, table.count, m, n, k, samples, seed, out)
        return [{"max_abs_diff": out[3 * i], "nonfinite": int(out[3 * i + 1]), "max_abs_ref": out[3 * i + 2]}
                for i in range(table.count)]

    def lt_heuristics(self, tn: int, acc16: int, m: int, n: int, k: int, max_algos: int = 100) -> list[bytes]:
        buf = ctypes.create_string_buffer(64 * max_algos)
        got = self.lib.cl2_lt_heuristics(tn, acc16, m, n, k, max_algos, buf)
        if got < 0:
            raise NativeError(f"cuBLASLt heuristics: {self.lib.cl2_last_error().decode()}")
        return [buf.raw[64 * i: 64 * (i + 1)] for i in range(got)]

    def lt_algo_ids(self, acc16: int, max_ids: int = 1024) -> list[int]:
        ids = (c_int * max_ids)()
        got = self.lib.cl2_lt_algo_ids(acc16, max_ids, ids)
        if got < 0:
            raise NativeError(f"cuBLASLt algorithm ids: {self.lib.cl2_last_error().decode()}")
        return list(ids[:got])

    def lt_algo_caps(self, acc16: int, algo_id: int) -> dict | None:
        """What algorithm `algo_id` lets a caller configure (split-K, reduction schemes, swizzling, tiles, stages), or
        None where cuBLASLt has no such algorithm for these types."""
        out = (c_int * 4096)()
        got = self.lib.cl2_lt_algo_caps(acc16, algo_id, len(out), out)
        if got == -1:
            return None
        if got < 0:
            raise NativeError(f"cuBLASLt algorithm {algo_id}: {self.lib.cl2_last_error().decode()}")
        n_tiles, n_stages = out[3], out[4]
        return {"splitk": bool(out[0]), "reduction_mask": out[1], "swizzle": bool(out[2]),
                "tiles": tuple(out[5:5 + n_tiles]), "stages": tuple(out[5 + n_tiles:5 + n_tiles + n_stages])}

    def lt_algo_try(self, tn: int, acc16: int, m: int, n: int, k: int, bases: list[bytes],
                    rows: list[tuple[int, ...]]) -> list[dict]:
        """Each row (base index or -1, then the 9 configuration fields of evaluator.lt_variations.FIELDS, -1 to
        keep) applied and checked by cuBLASLt for this problem: per row its status (0: runs within the baselines'
        workspace), 64-byte record, fields as read back, workspace bytes and wave count."""
        width = 1 + LT_CONFIG_FIELDS
        if any(len(b) != 64 for b in bases) or any(len(r) != width or r[0] >= len(bases) for r in rows):
            raise ValueError(f"64-byte records, and rows of {width} ints that start from one of the {len(bases)}")
        count = len(rows)
        if count == 0:
            return []
        base_buf = ctypes.create_string_buffer(b"".join(bases), max(64, 64 * len(bases)))
        flat = (c_int * (width * count))(*[v for r in rows for v in r])
        algos = ctypes.create_string_buffer(64 * count)
        cfg = (c_int * (LT_CONFIG_FIELDS * count))()
        status, ws, waves = (c_int * count)(), (c_double * count)(), (c_float * count)()
        self._check(self.lib.cl2_lt_algo_try(tn, acc16, m, n, k, base_buf, count, flat, algos, cfg, status, ws,
                                             waves), "cuBLASLt algorithm check")
        return [{"status": status[i], "algo": algos.raw[64 * i:64 * (i + 1)],
                 "config": tuple(cfg[LT_CONFIG_FIELDS * i:LT_CONFIG_FIELDS * (i + 1)]), "workspace": int(ws[i]),
                 "waves": float(waves[i])} for i in range(count)]

    def register_lt(self, tn: int, acc16: int, m: int, n: int, k: int, algo: bytes | None) -> int:
        ptr = ctypes.create_string_buffer(algo, 64) if algo else None
        cid = self.lib.cl2_register_lt(tn, acc16, m, n, k, ptr)
        if cid < 0:
            raise NativeError(f"cuBLASLt setup: {self.lib.cl2_last_error().decode()}")
        return cid


class PointerTable:
    """(A, B, B_col_major, C) device pointers of several operand sets, laid out for the native side."""

    def __init__(self, sets: list[tuple[int, int, int, int]]):
        self.count = len(sets)
        flat = [p for s in sets for p in s]
        self.array = (c_void_p * len(flat))(*flat)


class CallFailed(RuntimeError):
    """A timed callable returned non-zero or the stream reported an error."""

    def __init__(self, rc: int, message: str):
        super().__init__(f"rc={rc}: {message}")
        self.rc = rc
