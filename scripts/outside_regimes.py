"""One shape's kernel timed against the harness's own NVIDIA baselines, back to back and separated.

Callables: the exported kernel, torch.matmul, cublasGemmEx NN and TN, and cuBLASLt's autotuned algorithms: every
algorithm its heuristic offers (up to 1024 a layout) is checked on the full product, the correct ones are timed back
to back in a short screen, and the three fastest a layout go on into the regimes, where the fastest by median counts.

Each timed batch queues `calls` calls behind a hold kernel of the harness's own (it spins until the host has queued
the whole batch), between two CUDA events on the harness's stream, so the events see GPU time only, whatever each
callable's host path costs. Call i of a batch uses operand set i: no set is read twice in a batch, and before every
batch the sets it uses get new random contents (C poisoned with NaN), so neither L2 residency of a reused operand nor
a memo can help any callable. Rounds time every callable once, the order reversed every other round; a callable's
figure is its median per-call time over the rounds, a ratio t(baseline) / t(kernel) is taken round by round.

- back-to-back: the calls queued one after another (a kernel launched with PDL may overlap its previous call);
- separated: an ordinary one-block kernel before each call; a batch of those alone is timed in every round and its
  per-call time taken out, so each call starts after a plain kernel boundary, never the tail of its own previous call;
- server: one call per round after an idle gap (exponential, mean SERVER_GAP_S), its operands written as a served
  layer finds them: B, B column-major and C's poison first, then a buffer of SCRUB_L2_TIMES the L2's size written
  over (so the L2 holds nothing of the weights, only dirty lines), then A, as the previous layer's output.

After every timed batch 32 sampled outputs of every set it used are recomputed in fp32 and compared with the
tolerance set at the start: twice the worst error of cublasGemmEx NN on the full product (four times with fp16
accumulation, whose error depends on the summation order), never under two fp16 ulps of the largest output.
"""
from __future__ import annotations

import ctypes
import math
import random
import statistics
import time
from pathlib import Path

from outside_native import LAYOUTS, Native, NativeError

REGIMES = ("back-to-back", "separated", "server")
SERVER_GAP_S = 1e-3
SCRUB_L2_TIMES = 4
SERVER_ROUNDS_PER = 4  # server rounds per round of the other regimes: one call each, so noisier
LEADERS = 3  # cuBLASLt algorithms per layout carried from the screen into the regimes
SAMPLES = 32


def _round_up(x: int, q: int) -> int:
    return (x + q - 1) // q * q


class Operands:
    """`count` operand sets (A, B, B column-major, C), each slot 256-byte aligned as a cudaMalloc'd one would be."""

    def __init__(self, torch, shape: tuple[int, int, int], count: int, seed: int):
        m, n, k = self.shape = shape
        self.torch, self.count = torch, count
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self.flat, views = [], []
        for rows, cols in ((m, k), (k, n), (n, k), (m, n)):
            per = _round_up(rows * cols, 128)
            flat = torch.empty(count * per, device="cuda", dtype=torch.half)
            self.flat.append((flat, per))
            views.append(flat.view(count, per)[:, :rows * cols].unflatten(1, (rows, cols)))
        self.a, self.b, self.bcm, self.c = views
        self.ptrs = [tuple(int(v[i].data_ptr()) for v in views) for i in range(count)]
        self.torch_views = [(self.a[i], self.b[i], self.c[i]) for i in range(count)]
        self.set_bytes = 2 * (m * k + 2 * k * n + m * n)
        self.scrub = None  # the server regime's L2 scrub, made on first use

    def refill(self, used: int, cold: bool = False) -> None:
        """New contents in the first `used` sets; `cold` (server): A written last, after the L2 is scrubbed."""
        (a, per_a), (b, per_b), _, (c, per_c) = self.flat
        if not cold:
            a[:used * per_a].normal_(generator=self.gen)
        b[:used * per_b].normal_(generator=self.gen)
        self.bcm[:used].copy_(self.b[:used].transpose(1, 2))
        c[:used * per_c].fill_(float("nan"))
        if cold:
            if self.scrub is None:
                l2 = self.torch.cuda.get_device_properties(0).L2_cache_size
                self.scrub = self.torch.empty(SCRUB_L2_TIMES * max(l2, 1 << 20) // 4, device="cuda")
            self.scrub.fill_(float(used))
            a[:used * per_a].normal_(generator=self.gen)

    def sampled_error(self, used: int) -> float:
        """Largest |C - fp32 reference| over SAMPLES random outputs of each of the first `used` sets (inf where C is
        not finite: an output the call never wrote is still the NaN poison)."""
        torch, (m, n, _) = self.torch, self.shape
        rows = torch.randint(0, m, (used, SAMPLES), device="cuda", generator=self.gen)
        cols = torch.randint(0, n, (used, SAMPLES), device="cuda", generator=self.gen)
        s = torch.arange(used, device="cuda")[:, None]
        ref = (self.a[s, rows].float() * self.bcm[s, cols].float()).sum(-1)
        got = self.c[s, rows, cols].float()
        err = torch.where(torch.isfinite(got), (got - ref).abs(), torch.full_like(got, math.inf))
        return float(err.max())


def half_ulp(x: float) -> float:
    return 2.0 ** (math.floor(math.log2(x)) - 11) if x > 0 else 2.0 ** -25


class ShapeTimer:
    def __init__(self, torch, native: Native, kernel_so: Path, shape: tuple[int, int, int], acc: str, *,
                 pool_bytes: int, max_calls: int, seed: int = 0):
        self.torch, self.native, self.shape, self.fp16 = torch, native, shape, acc == "fp16"
        m, n, k = shape
        set_bytes = 2 * (m * k + 2 * k * n + m * n)
        self.ops = Operands(torch, shape, max(1, min(max_calls, pool_bytes // set_bytes)), seed or m * 31 + n * 7 + k)
        self.lib = ctypes.CDLL(str(kernel_so))
        self.lib.hgemm.restype = ctypes.c_int
        self.lib.hgemm.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
        self.fns, self.unheld, self.broken = {}, set(), {}
        self.rng = random.Random(seed or m * 31 + n * 7 + k)
        self.stream = torch.cuda.ExternalStream(native.stream)

    # ------------------------------------------------------------------ callables

    def _kernel(self, i: int) -> None:
        a, b, bcm, c = self.ops.ptrs[i]
        rc = self.lib.hgemm(a, b, bcm, c, *self.shape, self.native.stream)
        if rc != 0:
            raise RuntimeError(f"hgemm returned {rc}")

    def _torch(self, i: int) -> None:
        a, b, c = self.ops.torch_views[i]
        self.torch.matmul(a, b, out=c)

    def _make_callables(self, algos: dict[str, int]) -> None:
        p, nat = self.ops.ptrs, self.native
        self.fns = {"kernel": self._kernel, "torch": self._torch,
                    "cublas-NN": lambda i: nat.cublas(0, p[i][0], p[i][1], p[i][3]),
                    "cublas-TN": lambda i: nat.cublas(1, p[i][0], p[i][2], p[i][3])}
        for li, lay in enumerate(LAYOUTS):
            for j in range(algos[lay]):
                self.fns[f"cublaslt-{lay}/{j}"] = (lambda i, li=li, j=j, bi=1 + li:
                                                   nat.lt(li, j, p[i][0], p[i][bi], p[i][3]))

    # ------------------------------------------------------------------ correctness

    def _full_error(self, name: str, ref) -> float:
        c = self.ops.c[0]
        c.fill_(float("nan"))
        self.fns[name](0)
        got = c.float()
        return float(self.torch.where(self.torch.isfinite(got), (got - ref).abs(), math.inf).max())

    def _check_all(self) -> dict:
        torch = self.torch
        self.ops.refill(1)
        ref = self.ops.a[0].float() @ self.ops.b[0].float()
        errs = {}
        for name in list(self.fns):
            try:
                errs[name] = self._full_error(name, ref)
            except (NativeError, RuntimeError) as e:
                self.broken[name] = f"{type(e).__name__}: {e}"[:300]
        torch.cuda.synchronize()
        if "cublas-NN" not in errs:
            raise RuntimeError(f"cublasGemmEx NN failed: {self.broken.get('cublas-NN')}")
        floor = 4 * half_ulp(float(ref.abs().max()))
        self.tol = max((4 if self.fp16 else 2) * errs["cublas-NN"], floor)
        for name, e in errs.items():
            if name.startswith("cublaslt-") and not e <= self.tol:
                self.broken[name] = f"wrong on the full product: max abs err {e:.4g} over the tolerance {self.tol:.4g}"
        return errs

    # ------------------------------------------------------------------ timing

    def _batch_ms(self, name: str | None, calls: int, separated: bool, held: bool,
                  cold: bool = False) -> tuple[float, bool]:
        fn, nat = self.fns.get(name), self.native
        self.ops.refill(calls, cold)
        if cold:
            self.torch.cuda.synchronize()  # the refill done, so the gap is idle
            time.sleep(self.rng.expovariate(1.0 / SERVER_GAP_S))
        nat.begin(held)
        try:
            for i in range(calls):
                if separated:
                    nat.separator()
                if fn is not None:
                    fn(i)
        finally:
            ms, expired = nat.end()
        return ms, expired

    def timed_us(self, name: str | None, calls: int, separated: bool, cold: bool = False) -> float:
        """Per-call microseconds of one batch. A callable whose batch outlasted the hold (it blocks inside its call)
        is timed without the hold from then on, and named in the output."""
        held = name not in self.unheld
        ms, expired = self._batch_ms(name, calls, separated, held, cold)
        if held and expired:
            self.unheld.add(name)
            ms, _ = self._batch_ms(name, calls, separated, False, cold)
        return ms * 1e3 / calls

    def _screen(self, algos: dict[str, int], calls: int, rounds: int) -> dict:
        out = {}
        for lay in LAYOUTS:
            names = [f"cublaslt-{lay}/{j}" for j in range(algos[lay]) if f"cublaslt-{lay}/{j}" not in self.broken]
            us = {nm: [] for nm in names}
            for r in range(rounds):
                for nm in names if r % 2 == 0 else names[::-1]:
                    try:
                        us[nm].append(self.timed_us(nm, calls, False))
                    except NativeError as e:
                        self.broken[nm] = f"NativeError: {e}"[:300]
            timed = sorted((statistics.median(v), nm) for nm, v in us.items() if v and nm not in self.broken)
            out[lay] = {"offered": algos[lay], "correct": len(names),
                        "leaders": [{"name": nm, "screen_us": round(t, 4),
                                     "algo": self.native.describe(LAYOUTS.index(lay), int(nm.split("/")[1]))}
                                    for t, nm in timed[:LEADERS]]}
        return out

    def _regime(self, regime: str, names: list[str], calls: int, rounds: int, warm_s: float) -> dict:
        separated, cold = regime == "separated", regime == "server"
        if cold:  # one call a round, so more rounds
            calls, rounds = 1, SERVER_ROUNDS_PER * rounds
        order = names + ([None] if separated else [])
        t0, passes = time.perf_counter(), 0
        while passes < 2 or time.perf_counter() - t0 < warm_s:  # clocks up, every callable's first launches done
            for nm in order:
                if nm not in self.broken:
                    try:
                        self.timed_us(nm, calls, separated, cold)
                    except (NativeError, RuntimeError) as e:
                        self.broken[nm] = f"{type(e).__name__}: {e}"[:300]
            passes += 1
        raw = {nm or "separator": [] for nm in order}
        fails, worst = {}, {}
        for r in range(rounds):
            for nm in order if r % 2 == 0 else order[::-1]:
                key = nm or "separator"
                if nm in self.broken:
                    raw[key].append(None)
                    continue
                try:
                    raw[key].append(self.timed_us(nm, calls, separated, cold))
                except (NativeError, RuntimeError) as e:
                    self.broken[nm] = f"{type(e).__name__}: {e}"[:300]
                    raw[key].append(None)
                    continue
                if nm is not None:
                    err = self.ops.sampled_error(calls)
                    worst[key] = max(worst.get(key, 0.0), err)
                    if not err <= self.tol:
                        fails[key] = fails.get(key, 0) + 1
        sep = raw.pop("separator", None)
        us = raw
        if separated:
            us = {nm: [None if t is None or s is None else t - s for t, s in zip(v, sep)] for nm, v in raw.items()}
        return {"us": {nm: [None if t is None else round(t, 4) for t in v] for nm, v in us.items()},
                "separator_us": [None if s is None else round(s, 4) for s in sep] if separated else None,
                "sampled_max_abs_err": {nm: float(f"{e:.4g}") for nm, e in worst.items()},
                "sampled_failures": fails}

    def run(self, *, rounds: int, screen_rounds: int, target_ms: float, warm_s: float) -> dict:
        torch, m_n_k = self.torch, self.shape
        with torch.cuda.stream(self.stream):
            algos = self.native.shape(*m_n_k, self.fp16)
            self._make_callables(algos)
            errs = self._check_all()
            out = {"sets": self.ops.count, "set_mib": self.ops.set_bytes / 2 ** 20, "tolerance": self.tol,
                   "max_abs_err": {nm: float(f"{e:.4g}") for nm, e in errs.items()
                                   if not nm.startswith("cublaslt-")}}
            if "kernel" in self.broken:
                out["errors"] = {nm: e for nm, e in self.broken.items() if not nm.startswith("cublaslt-")}
                return out
            probe = min(8, self.ops.count)
            est = min(self.timed_us(nm, probe, False) for nm in ("kernel", "cublas-NN"))
            calls = max(min(3, self.ops.count), min(self.ops.count, math.ceil(target_ms * 1e3 / max(est, 1e-3))))
            out["calls"] = calls
            out["rotation_mib"] = calls * out["set_mib"]
            out["cublaslt"] = self._screen(algos, calls, screen_rounds)
            names = ["kernel", "torch", "cublas-NN", "cublas-TN"] + [
                ld["name"] for lay in LAYOUTS for ld in out["cublaslt"][lay]["leaders"]]
            names = [nm for nm in names if nm not in self.broken]
            out["regimes"] = {reg: self._regime(reg, names, calls, rounds, warm_s) for reg in REGIMES}
            torch.cuda.synchronize()
        out["unheld"] = sorted(nm or "separator" for nm in self.unheld)
        # a cuBLASLt algorithm the screen dropped is no finding; the counts are in out["cublaslt"]
        out["errors"] = {nm or "separator": e for nm, e in self.broken.items()
                         if not (nm or "").startswith("cublaslt-") or nm in names}
        return out
