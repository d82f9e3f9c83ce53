"""Guarded operand sets on the GPU and the fp32 reference, for one (M, N, K)."""
from __future__ import annotations

import math

from evaluator.native import HALF_NAN_POISON, Native, NativeError, PointerTable


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
            self.fill_activations(seed)
            self._weights(seed)
            return
        if kind == "binary":
            p = binary_probability(k)
            nat.ok("fill_binary", self.ptr["A"], m * k, seed, p)
            nat.ok("fill_binary", self.ptr["B"], k * n, seed ^ 0x5BD1E995, p)
        elif kind == "honesty":
            nat.ok("fill_honesty", self.ptr["A"], self.ptr["B"], m, n, k, seed)
        else:
            raise ValueError(kind)
        self._derive()

    def fill_weights(self, seed: int) -> None:
        """The first half of a normal fill split around an L2 scrub (PRELUDES' "activations"): B, B_col_major and
        C's poison, the same contents `fill("normal", seed)` writes; `fill_activations(seed)` writes A after the
        scrub. A set with snapshots is refused: they would be taken before A is written."""
        if "A_snap" in self.ptr:
            raise ValueError("a set with input snapshots cannot be filled around a scrub")
        self._weights(seed)

    def fill_activations(self, seed: int) -> None:
        self.nat.ok("fill_normal", self.ptr["A"], self.m * self.k, seed, 1.0)

    def _weights(self, seed: int) -> None:
        self.nat.ok("fill_normal", self.ptr["B"], self.k * self.n, seed ^ 0x5BD1E995, 1.0)
        self._derive()

    def _derive(self) -> None:
        """What follows the inputs: B_col_major from B, the snapshots where the set keeps them, C's poison."""
        self.nat.ok("transpose", self.ptr["B"], self.ptr["Bc"], self.k, self.n)
        if "A_snap" in self.ptr:
            for name in ("A", "B", "Bc"):
                self.nat.ok("copy", self.ptr[name + "_snap"], self.ptr[name], 2 * self.sizes[name])
        self.poison_output()

    def poison_output(self) -> None:
        self.nat.ok("fill_value", self.ptr["C"], self.m * self.n, HALF_NAN_POISON)

    def bytes_total(self) -> int:
        return sum(2 * e for e in self.sizes.values())

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


# fp32 summation error that a correct kernel and the fp32 reference may carry together, per unit of
# K x max |C| x 2^-24: beyond each element's own half ulp, on normal inputs, it read at most 0.024 (K = 4096) and 0.019
# (K = 32768) for cuBLAS, cuBLASLt, CUTLASS and hand-written kernels alike (H200, five shapes, twelve draws;
# docs/benchmarks/data/fp32_summation_error_h200_2026-11-28_6048a7c.json). 1/16 is 2.6 times that, and at K = 16384
# still under a fifth of half an ulp at the largest output, far below what an fp16 accumulator or an fp16 partial
# sum is off by.
SUMMATION_SLACK = 1.0 / 16


def rounding_floor(max_abs_ref: float, k: int = 0) -> float:
    """Half an fp16 ulp at the largest |reference| value: what even a correctly rounded output may be off by there,
    plus the fp32 summation error of a K-long dot product at that size (SUMMATION_SLACK; nothing for k = 0).
    The baselines' max deviation can fall short of it by luck of the draw (no large element near a rounding
    midpoint), and a kernel as accurate as they are, summing in another order, then rounds one such element the other
    way: 0.2598 against a bound of 0.2522 (cuBLAS 0.2402, half an ulp 0.25) on 256x2048x16384 in the H200 GPU suite.
    Past half an ulp the summation error shows at long K: every CUTLASS and hand-written kernel read 0.279 on
    1024x1024x32768 where cuBLAS read 0.2559 (half an ulp 0.25), so without the slack only a cuBLASLt variant that
    happened to match them kept them in."""
    if not max_abs_ref > 0 or math.isinf(max_abs_ref):
        return 0.0
    ref = min(max_abs_ref, 65504.0)
    return 2.0 ** (math.floor(math.log2(ref)) - 11) + SUMMATION_SLACK * 2.0 ** -24 * max(k, 0) * ref


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


# Device memory the timing pool may take: every call of a timed batch gets its own operand set, up to this much.
POOL_BYTES = 4 << 30
MAX_POOL_SETS = 200  # a held batch has at most 200 calls (timing.held_calls)
SPOT_SAMPLES = 64  # outputs recomputed per operand set after each timed batch


def set_bytes(m: int, n: int, k: int) -> int:
    return 2 * (m * k + 2 * k * n + m * n)


def pool_size(m: int, n: int, k: int, budget: int = POOL_BYTES) -> int:
    """Operand sets for timing: as many as a batch has calls, within `budget`; at least two where two fit in four
    times the budget (so a power-steady lead-in never runs on the contents it is then timed on), else one."""
    per = set_bytes(m, n, k)
    count = min(MAX_POOL_SETS, budget // per)
    if count < 2:
        count = 2 if 2 * per <= 4 * budget else 1
    return max(1, int(count))


# What the L2 holds when a timed batch starts (OperandPool.refill). "refill": the inputs as just written, A, then B,
# then B_col_major from B, then C's poison (the L2 keeps the tail of that, dirty). "activations": a layer of a model
# served, whose input A the previous layer has just written and whose weights (B, B_col_major) were last read a
# forward pass ago: B, B_col_major and C's poison are written, the L2 is scrubbed, then A is written, so the L2 holds
# A's tail and other lines, all dirty, and none of the weights. Server mode's (evaluator.timing.REGIMES).
PRELUDES = ("refill", "activations")
SCRUB_L2_TIMES = 4  # the scrub writes this many times the L2's size, so no line of what was there before survives


class Scrub:
    """A buffer whose write evicts the L2, which then holds the scrub's own lines, dirty, as it holds whatever
    another kernel last wrote: a cold call's loads evict dirty lines (written back) either way. Scrubbing by reading
    instead, so that every line is clean, takes away what an L2 hint gains (docs/evaluator.md, "Timing regimes")."""

    def __init__(self, nat: Native):
        self.nat = nat
        self.halves = SCRUB_L2_TIMES * max(nat.info()["l2_bytes"], 1 << 20) // 2
        self.handle = nat.alloc(2 * self.halves)
        self.ptr = nat.buf_ptr(self.handle)
        self.runs = 0

    def run(self) -> None:
        self.runs += 1
        self.nat.ok("fill_value", self.ptr, self.halves, self.runs & 0x3BFF)  # finite halves, a new value each time

    def free(self) -> None:
        try:
            self.nat.buf_free(self.handle)
        except Exception:  # after a sticky error; the worker is replaced anyway
            pass


class OperandPool:
    """The operand sets a measurement times on. Call r of a timed batch uses set r, so no two calls of a batch see
    the same buffers; before every timed batch the sets it will use are refilled with inputs drawn from a new seed,
    so no two timed calls of a kernel see the same contents; after it, sampled outputs of every set are recomputed
    (`spot_check`), so a call that skipped its work or returned a stale product is found, not only the last one.
    A memo, a call counter or a pointer-keyed cache has nothing to gain here. L2 residency: the refill writes the
    sets just before the batch, so a rotation smaller than the L2 (50 MiB on the H100 and H200) stays resident, as
    in a back-to-back loop over one set; a larger one streams from DRAM. Server mode refills with its own prelude
    (PRELUDES), which leaves none of the weights there."""

    def __init__(self, nat: Native, m: int, n: int, k: int, count: int | None = None):
        self.nat, self.m, self.n, self.k = nat, m, n, k
        self.sets: list[OperandSet] = []
        try:
            for _ in range(count or pool_size(m, n, k)):
                self.sets.append(OperandSet(nat, m, n, k, snapshots=False))
        except NativeError:
            if not self.sets:
                raise
            # fewer sets than asked: batches get shorter, never repeat a set
        self._tables: dict[int, PointerTable] = {}
        self._scrub: Scrub | None = None

    @property
    def count(self) -> int:
        return len(self.sets)

    @property
    def first(self) -> OperandSet:
        return self.sets[0]

    @property
    def args(self) -> tuple[int, int, int, int]:
        return self.sets[0].args

    def table(self, used: int) -> PointerTable:
        used = max(1, min(used, self.count))
        if used not in self._tables:
            self._tables[used] = PointerTable([s.args for s in self.sets[:used]])
        return self._tables[used]

    def refill(self, used: int, seed: int, prelude: str = "refill") -> None:
        """Fresh normal inputs (and a NaN-poisoned C) in the first `used` sets; waits until they are written, so
        that a server-mode gap that follows is idle. `prelude` (PRELUDES) decides what the L2 holds afterwards."""
        if prelude not in PRELUDES:
            raise ValueError(f"unknown prelude {prelude!r}; known: {', '.join(PRELUDES)}")
        sets = list(enumerate(self.sets[:max(1, min(used, self.count))]))
        if prelude == "activations":
            # every set's weights, one scrub, then every set's A: a later set's scrub would evict an earlier A
            if self._scrub is None:
                self._scrub = Scrub(self.nat)
            for i, s in sets:
                s.fill_weights(seed * 7919 + i)
            self._scrub.run()
            for i, s in sets:
                s.fill_activations(seed * 7919 + i)
        else:
            for i, s in sets:
                s.fill("normal", seed * 7919 + i)
        self.nat.ok("sync")

    def spot_check(self, used: int, seed: int, samples: int = SPOT_SAMPLES) -> dict:
        """The worst sampled output over the first `used` sets (see Native.spot_check)."""
        per_set = self.nat.spot_check(self.table(used), self.m, self.n, self.k, samples, seed)
        return {"max_abs_diff": max(r["max_abs_diff"] for r in per_set),
                "nonfinite": sum(r["nonfinite"] for r in per_set),
                "max_abs_ref": max(r["max_abs_ref"] for r in per_set), "sets": len(per_set)}

    def view(self, count: int) -> "OperandPool":
        """The first `count` sets as a pool of their own (batches rotate over them alone); freeing it frees only
        the scrub buffer it made."""
        v = OperandPool.__new__(OperandPool)
        v.nat, v.m, v.n, v.k = self.nat, self.m, self.n, self.k
        v.sets, v._tables, v._owner, v._scrub = self.sets[:max(1, count)], {}, False, None
        return v

    def free(self) -> None:
        if getattr(self, "_owner", True):
            for s in self.sets:
                s.free()
        if getattr(self, "_scrub", None) is not None:
            self._scrub.free()
        self.sets, self._scrub = [], None
