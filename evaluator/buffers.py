"""Guarded operand sets on the GPU and the fp32 reference, for one (M, N, K)."""
from __future__ import annotations

import math

from evaluator.native import HALF_NAN_POISON, Native, NativeError


class OperandSet:
    """A, B, B_col_major and C in guarded buffers (fresh addresses per set), plus input snapshots."""

    def __init__(self, nat: Native, m: int, n: int, k: int, snapshots: bool = True):
        self.nat, self.m, self.n, self.k = nat, m, n, k
        self.handles: dict[str, int] = {}
        sizes = {"A": m * k, "B": k * n, "Bc": k * n, "C": m * n}
        if snapshots:
            sizes.update({"A_snap": m * k, "B_snap": k * n, "Bc_snap": k * n})
        try:
            for name, elems in sizes.items():
                self.handles[name] = nat.alloc(2 * elems)
        except NativeError:
            self.free()
            raise
        self.sizes = sizes
        self.ptr = {name: nat.buf_ptr(h) for name, h in self.handles.items()}

    @property
    def args(self) -> tuple[int, int, int, int]:
        return self.ptr["A"], self.ptr["B"], self.ptr["Bc"], self.ptr["C"]

    def fill(self, kind: str, seed: int) -> None:
        """kind: normal | binary | honesty. B_col_major is always derived from B."""
        nat, m, n, k = self.nat, self.m, self.n, self.k
        if kind == "normal":
            nat.ok("fill_normal", self.ptr["A"], m * k, seed, 1.0)
            nat.ok("fill_normal", self.ptr["B"], k * n, seed ^ 0x5BD1E995, 1.0)
        elif kind == "binary":
            p = binary_probability(k)
            nat.ok("fill_binary", self.ptr["A"], m * k, seed, p)
            nat.ok("fill_binary", self.ptr["B"], k * n, seed ^ 0x5BD1E995, p)
        elif kind == "honesty":
            nat.ok("fill_honesty", self.ptr["A"], self.ptr["B"], m, n, k, seed)
        else:
            raise ValueError(kind)
        nat.ok("transpose", self.ptr["B"], self.ptr["Bc"], k, n)
        if "A_snap" in self.ptr:
            for name in ("A", "B", "Bc"):
                nat.ok("copy", self.ptr[name + "_snap"], self.ptr[name], 2 * self.sizes[name])
        self.poison_output()

    def poison_output(self) -> None:
        self.nat.ok("fill_value", self.ptr["C"], self.m * self.n, HALF_NAN_POISON)

    def guard_damage(self) -> dict[str, int]:
        return {name: d for name in ("A", "B", "Bc", "C") if (d := self.nat.guard_damage(self.handles[name]))}

    def inputs_changed(self) -> dict[str, int]:
        out = {}
        for name in ("A", "B", "Bc"):
            d = self.nat.count_diff(self.ptr[name], self.ptr[name + "_snap"], self.sizes[name])
            if d:
                out[name] = d
        return out

    def free(self) -> None:
        for h in self.handles.values():
            try:
                self.nat.buf_free(h)
            except Exception:  # freeing after a sticky error fails too; the worker is replaced anyway
                pass
        self.handles = {}


def binary_probability(k: int) -> float:
    """P(1) for {0,1} inputs so that C = A·B mostly lands in (0, 2048): K·p² ≈ 1024 (the paper's §2.3.2 idea)."""
    return min(0.5, math.sqrt(1024.0 / k))


class Reference:
    """fp32 reference C (CUDA-core SGEMM, no TF32) for the inputs currently in an OperandSet."""

    def __init__(self, nat: Native, m: int, n: int, k: int):
        self.nat, self.m, self.n, self.k = nat, m, n, k
        self.h = [nat.alloc(4 * m * k), nat.alloc(4 * k * n), nat.alloc(4 * m * n)]
        self.a32, self.b32, self.cref = (nat.buf_ptr(h) for h in self.h)

    def compute(self, ops: OperandSet) -> None:
        self.nat.ok("reference", ops.ptr["A"], ops.ptr["B"], self.a32, self.b32, self.cref, self.m, self.n, self.k)

    def compare(self, c_ptr: int, exact_limit: float = 0.0) -> dict:
        return self.nat.compare(c_ptr, self.cref, self.m * self.n, exact_limit)

    def free(self) -> None:
        for h in self.h:
            try:
                self.nat.buf_free(h)
            except Exception:
                pass
