"""Correctness checks of one candidate, run inside the worker. Every check draws fresh inputs.

A check that cannot be passed by a wrong kernel is the point: exact {0,1} products, a deviation bound set by the
NVIDIA baselines of the same accumulator class, inputs built to expose fp16 accumulation, guard bands, NaN-poisoned
outputs, rewritten inputs and moved buffers, bitwise repeatability, and work that must finish on the contract stream.
"""
from __future__ import annotations

from typing import Callable

from evaluator.baselines import NativeCallable
from evaluator.buffers import OperandSet, Reference, rounding_floor
from evaluator.native import Native
from evaluator.record import CheckOutcome

EXACT_LIMIT = 2048.0  # fp16 represents every integer up to 2048 exactly
DEVIATION_HEADROOM = 1.05  # summation order may move the max deviation a little; one extra ulp is 2x
# With fp16 accumulation the error is the accumulation chain's, and the max over millions of outputs is an extreme
# value that moves several percent between draws: a kernel as accurate as cuBLAS (RMS 0.995 of it) read max ratios
# of 0.954-1.031 over 12 draws and was refused in 2 of 6 final evaluations, while its RMS ratio held 0.994-0.995
# (H100, docs/benchmarks/data/sweeps/fp16_accuracy_2026-11-25_7548d28.json). So the fp16 class is judged on the RMS
# error, with the max as a backstop for a few wild elements.
FP16_RMS_HEADROOM = 1.05
FP16_MAX_BACKSTOP = 1.5  # an RMS-equal kernel's max reached 1.08x the baselines'; one 25% worse in RMS, 1.16-1.84x
ESCAPE_TRIES = 3
PREDECESSOR_SPIN_NS = 200_000  # how long the late writer keeps an early-launched candidate waiting
# CUDA errors after which the context is unusable: the worker reports them and is replaced.
STICKY = {700: "illegal address", 701: "launch out of resources", 702: "launch timeout",
          714: "hardware stack error", 715: "illegal instruction", 716: "misaligned address",
          717: "invalid address space", 718: "invalid pc", 719: "launch failure", 720: "cooperative launch too large"}


def deviation_bound(devs: dict[str, float], max_abs_ref: float, k: int = 0) -> float:
    """The largest same-class baseline deviation on these inputs, never below the rounding floor of a K-long
    product; NaN without one."""
    return max(max(devs.values()), rounding_floor(max_abs_ref, k)) if devs else float("nan")


def accuracy_verdict(rc: dict, devs: dict[str, dict], acc16: bool, k: int = 0) -> tuple[bool, str, dict]:
    """Whether a candidate's output `rc` (a Reference.compare) is as accurate as the same-class baselines' on the
    same inputs (`devs`: name -> their compare). fp32 class: max |C - ref| within 5% of the largest baseline's, with
    the rounding floor of a `k`-long product (buffers.rounding_floor). fp16 class: RMS within 5% of the largest
    baseline RMS, and max within 1.5x. No baseline: NaN bounds, which refuse."""
    bad = rc["nonfinite"] != 0
    dev = float("inf") if bad else rc["max_abs_diff"]
    bound = deviation_bound({name: v["max_abs_diff"] for name, v in devs.items()}, rc["max_abs_ref"], k)
    metrics = {"max_abs_diff": dev, "bound": bound, "rounding_floor": rounding_floor(rc["max_abs_ref"], k)}
    if not acc16:
        return (dev <= bound * DEVIATION_HEADROOM,
                f"max |C - ref| = {dev:.6g} vs largest fp32-class baseline deviation {bound:.6g} "
                f"(x{DEVIATION_HEADROOM} headroom)", metrics)
    rms = float("inf") if bad else rc["rms_diff"]
    rms_bound = max(v["rms_diff"] for v in devs.values()) if devs else float("nan")
    metrics.update(rms_diff=rms, rms_bound=rms_bound)
    return (rms <= rms_bound * FP16_RMS_HEADROOM and dev <= bound * FP16_MAX_BACKSTOP,
            f"RMS |C - ref| = {rms:.6g} vs largest fp16-class baseline RMS {rms_bound:.6g} (x{FP16_RMS_HEADROOM}), "
            f"max {dev:.6g} vs {bound:.6g} (x{FP16_MAX_BACKSTOP})", metrics)


def _ratio(x: float, bound: float) -> float:
    return x / bound if bound > 0 else (0.0 if x == 0 else float("inf"))


class Unsupported(Exception):
    """The candidate returned non-zero: it declines this shape."""


class CudaFault(Exception):
    """The stream reported a CUDA error after a candidate call."""

    def __init__(self, code: int, message: str):
        self.code = code
        name = STICKY.get(code, "CUDA error")
        super().__init__(f"{name} (cudaError {code}): {message}")


class Checker:
    def __init__(self, nat: Native, cand: NativeCallable, baselines: dict[str, object], shape: tuple[int, int, int],
                 acc16: bool, seed: int, draws: int, progress: Callable[[str], None]):
        self.nat, self.cand, self.baselines = nat, cand, baselines
        self.m, self.n, self.k = shape
        self.acc16, self.seed, self.draws, self.progress = acc16, seed, draws, progress
        self.checks: list[CheckOutcome] = []

    # -- helpers ------------------------------------------------------------------------------------------------
    def run_candidate(self, ops: OperandSet, poison: bool = True) -> None:
        if poison:
            ops.poison_output()
        rc = self.cand.call(ops)
        if rc != 0:
            raise Unsupported(f"hgemm returned {rc} for M={self.m} N={self.n} K={self.k}")
        err = self.nat.sync()
        if err != 0:
            raise CudaFault(err, self.nat.last_error().decode(errors="replace"))

    def same_class_baselines(self) -> dict[str, object]:
        # torch joins the fp32 class only; with fp16 accumulation it still accumulates in fp32.
        return {k: v for k, v in self.baselines.items() if not (k == "torch" and self.acc16)}

    def baseline_devs(self, ops: OperandSet, ref: Reference) -> dict[str, dict]:
        """Each same-class baseline's compare against the reference on the inputs now in `ops`."""
        devs = {}
        for name, b in self.same_class_baselines().items():
            ops.poison_output()
            if b.call(ops) != 0 or self.nat.sync() != 0:
                continue
            r = ref.compare(ops.ptr["C"])
            if r["nonfinite"] == 0:
                devs[name] = r
        return devs

    def add(self, name: str, passed: bool, detail: str = "", **metrics) -> None:
        self.checks.append(CheckOutcome(name=name, passed=bool(passed), detail=detail, metrics=metrics))

    # -- the checks ---------------------------------------------------------------------------------------------
    def run(self, ref: Reference) -> list[CheckOutcome]:
        """All checks, with the caller's reference scratch (the fp32 copies are the largest buffers of all)."""
        nat, m, n, k = self.nat, self.m, self.n, self.k
        s1 = OperandSet(nat, m, n, k)
        s2 = None
        try:
            self.binary_draws(s1, ref)
            s2 = OperandSet(nat, m, n, k)
            self.pointer_independence(s1, s2, ref)
            s1.free()
            self.deviation_and_determinism(s2, ref)
            self.accumulator_honesty(s2, ref)
            self.waits_for_predecessor(s2)
            self.escape_probe(s2)
        finally:
            s1.free()
            if s2 is not None:
                s2.free()
        return self.checks

    def binary_draws(self, ops: OperandSet, ref: Reference) -> None:
        mism = nonfinite = eligible = 0
        damage: dict[str, int] = {}
        changed: dict[str, int] = {}
        for d in range(self.draws):
            self.progress(f"exact {{0,1}} draw {d + 1}/{self.draws}")
            ops.fill("binary", self.seed + d)
            ref.compute(ops)
            self.run_candidate(ops)
            r = ref.compare(ops.ptr["C"], EXACT_LIMIT)
            mism += r["exact_mismatches"]
            nonfinite += r["nonfinite"]
            eligible += r["exact_eligible"]
            for key, v in ops.guard_damage().items():
                damage[key] = damage.get(key, 0) + v
            for key, v in ops.inputs_changed().items():
                changed[key] = changed.get(key, 0) + v
        total = self.draws * self.m * self.n
        self.add("output_fully_written", nonfinite == 0,
                 f"{nonfinite} of {total} outputs still NaN-poisoned or non-finite" if nonfinite else "",
                 nonfinite=nonfinite)
        self.add("exact_binary", mism == 0 and nonfinite == 0,
                 f"{mism} mismatches among {eligible} outputs below {EXACT_LIMIT:g}, {nonfinite} non-finite"
                 if (mism or nonfinite) else f"{eligible} outputs exact over {self.draws} draws",
                 mismatches=mism, eligible=eligible, draws=self.draws)
        self.add("guard_bands", not damage,
                 "; ".join(f"{k_}: {v} guard elements overwritten" for k_, v in damage.items()), damaged=damage)
        self.add("inputs_unchanged", not changed,
                 "; ".join(f"{k_}: {v} elements modified" for k_, v in changed.items()), changed=changed)

    def pointer_independence(self, s1: OperandSet, s2: OperandSet, ref: Reference) -> None:
        self.progress("pointer independence")
        problems = []
        s1.fill("binary", self.seed + 101)  # new data at the same addresses
        ref.compute(s1)
        self.run_candidate(s1)
        r = ref.compare(s1.ptr["C"], EXACT_LIMIT)
        if r["exact_mismatches"] or r["nonfinite"]:
            problems.append(f"inputs rewritten in place: {r['exact_mismatches']} mismatches, "
                            f"{r['nonfinite']} non-finite")
        moved = set(s2.ptr.values()) & set(s1.ptr.values())
        s2.fill("binary", self.seed + 202)  # new data at new addresses
        ref.compute(s2)
        self.run_candidate(s2)
        r = ref.compare(s2.ptr["C"], EXACT_LIMIT)
        if r["exact_mismatches"] or r["nonfinite"]:
            problems.append(f"buffers moved: {r['exact_mismatches']} mismatches, {r['nonfinite']} non-finite")
        self.add("pointer_independence", not problems and not moved, "; ".join(problems))

    def deviation_and_determinism(self, ops: OperandSet, ref: Reference) -> None:
        verdicts, devs_all, diffs = [], {}, 0
        snap = self.nat.alloc(2 * self.m * self.n)
        try:
            for d in range(max(1, self.draws // 2)):
                self.progress(f"deviation draw {d + 1}")
                ops.fill("normal", self.seed + 303 + d)
                ref.compute(ops)
                self.run_candidate(ops)
                rc = ref.compare(ops.ptr["C"])
                self.nat.ok("copy", self.nat.buf_ptr(snap), ops.ptr["C"], 2 * self.m * self.n)
                self.run_candidate(ops)
                diffs += self.nat.count_diff(ops.ptr["C"], self.nat.buf_ptr(snap), self.m * self.n)
                devs = self.baseline_devs(ops, ref)  # same inputs: the bound holds for this draw only
                verdicts.append(accuracy_verdict(rc, devs, self.acc16, self.k))
                for k_, v in devs.items():
                    devs_all[k_] = max(v["max_abs_diff"], devs_all.get(k_, 0.0))
        finally:
            self.nat.buf_free(snap)
        mets = [m for _, _, m in verdicts]
        worst = {"max_abs_diff": max(m["max_abs_diff"] for m in mets),
                 "worst_ratio_to_bound": max(_ratio(m["max_abs_diff"], m["bound"]) for m in mets),
                 "rounding_floor": max(m["rounding_floor"] for m in mets), "baselines": devs_all}
        if self.acc16:
            worst.update(rms_diff=max(m["rms_diff"] for m in mets),
                         worst_rms_ratio=max(_ratio(m["rms_diff"], m["rms_bound"]) for m in mets))
        self.add("baseline_bounded_deviation", all(ok for ok, _, _ in verdicts),
                 "; ".join(f"draw {i + 1}: {detail}" for i, (_, detail, _) in enumerate(verdicts)), **worst)
        self.add("deterministic", diffs == 0,
                 f"{diffs} output elements differ bitwise between two identical calls" if diffs else "")

    def accumulator_honesty(self, ops: OperandSet, ref: Reference) -> None:
        if self.acc16:
            self.add("accumulator_honesty", True, "not applicable: evaluated as fp16-accumulate")
            return
        self.progress("accumulator honesty")
        ops.fill("honesty", self.seed + 404)
        ref.compute(ops)
        self.run_candidate(ops)
        r = ref.compare(ops.ptr["C"])
        dev_c = r["max_abs_diff"] if r["nonfinite"] == 0 else float("inf")
        devs = self.baseline_devs(ops, ref)
        bound = deviation_bound({k_: v["max_abs_diff"] for k_, v in devs.items()}, r["max_abs_ref"], self.k)
        # For contrast: what a genuinely fp16-accumulating library kernel gets on the same inputs.
        cid = self.nat.register_cublas(0, 1, self.m, self.n, self.k)
        ops.poison_output()
        fp16_dev = None
        if self.nat.call(cid, *ops.args) == 0 and self.nat.sync() == 0:
            fp16_dev = ref.compare(ops.ptr["C"])["max_abs_diff"]
        ok = dev_c <= bound * DEVIATION_HEADROOM + 1e-6
        self.add("accumulator_honesty", ok,
                 f"max |C - ref| = {dev_c:.6g} on fp16-accumulation-exposing inputs; fp32-class baselines reach "
                 f"{bound:.6g}, an fp16-accumulating cuBLAS reaches {fp16_dev if fp16_dev is None else f'{fp16_dev:.6g}'}",
                 max_abs_diff=dev_c, bound=bound, fp16_class_dev=fp16_dev,
                 rounding_floor=rounding_floor(r["max_abs_ref"], self.k))

    def waits_for_predecessor(self, ops: OperandSet) -> None:
        """The kernel before the call writes the inputs late and lets programmatically dependent launches start at
        once: a candidate that overlaps its predecessor (PDL) must still wait for it before touching global memory,
        so the output must equal a plain call's bit for bit (determinism is checked separately)."""
        self.progress("waits for the previous kernel on the stream")
        m, n, k = self.m, self.n, self.k
        ops.fill("normal", self.seed + 707)
        self.run_candidate(ops)
        snap = self.nat.alloc(2 * m * n)
        try:
            plain = self.nat.buf_ptr(snap)
            self.nat.ok("copy", plain, ops.ptr["C"], 2 * m * n)
            for name in ("A", "B", "Bc"):  # stale inputs until the late writer restores them from the snapshots
                self.nat.ok("fill_value", ops.ptr[name], ops.sizes[name], 0)
            p = ops.ptr
            self.nat.ok("late_write", p["A"], p["A_snap"], m * k, p["B"], p["B_snap"], k * n, p["Bc"], p["Bc_snap"],
                        p["C"], m * n, PREDECESSOR_SPIN_NS)
            self.run_candidate(ops, poison=False)  # the late writer poisons C itself, after its spin
            diff = self.nat.count_diff(ops.ptr["C"], plain, m * n)
        finally:
            self.nat.buf_free(snap)
        self.add("waits_for_predecessor", diff == 0,
                 f"{diff} output elements differ from a plain call when the previous kernel on the stream writes the "
                 f"inputs late and allows an early dependent launch: the kernel touches global memory before "
                 f"griddepcontrol.wait" if diff else "", differing=diff)

    def escape_probe(self, ops: OperandSet) -> None:
        self.progress("work completes on the contract stream")
        ops.fill("normal", self.seed + 505)
        t1 = max(self.cand.time(ops, 1, True), 1e-4)
        reps = max(10, min(200, int(2.0 / t1)))
        import ctypes

        # The device-busy time is read on the host (until cudaDeviceSynchronize returns), so a host thread
        # descheduled by other load (a campaign's parallel nvcc builds) looks like escaped work. Work that really
        # runs outside the stream does so on every try; scheduling noise does not: up to 3 tries, any clean one wins.
        for attempt in range(1, ESCAPE_TRIES + 1):
            out = (ctypes.c_double * 3)()
            rc = self.nat.escape_probe(self.cand.cid, *ops.args, reps, out)
            if rc != 0:
                err = self.nat.sync()
                if err:
                    raise CudaFault(err, self.nat.last_error().decode(errors="replace"))
                raise Unsupported(f"hgemm returned {rc} during the stream probe")
            event_ms, enqueue_ms, wall_ms = out[0], out[1], out[2]
            excess = wall_ms - max(event_ms, enqueue_ms)
            escaped = excess > max(0.3, 0.5 * wall_ms)
            if not escaped:
                break
        self.add("work_completes_on_stream", not escaped,
                 (f"{reps} calls took {event_ms:.3f} ms between events on the contract stream but the device was "
                  f"busy for {wall_ms:.3f} ms (host enqueue {enqueue_ms:.3f} ms): work runs outside the stream")
                 if escaped else "", event_ms=event_ms, enqueue_ms=enqueue_ms, wall_ms=wall_ms, reps=reps,
                 tries=attempt)

    def timed_output(self, ops: OperandSet, ref: Reference, reps: int, cand=None,
                     label: str = "timed_output_correct", record: bool = True) -> CheckOutcome:
        """After timing: the output of a timed batch must still be right (no skipping work on repeat calls). `cand`:
        another kernel timed in the same rounds (a rival), checked the same way under its own label. `record=False`
        returns the verdict without adding it to `self.checks` (a rival's verdict is not the candidate's)."""
        ref.compute(ops)
        devs = self.baseline_devs(ops, ref)  # the bound of these very inputs: max deviation varies per draw
        ops.poison_output()
        (cand or self.cand).time(ops, reps, True)
        r = ref.compare(ops.ptr["C"])
        if devs:
            ok, detail, mets = accuracy_verdict(r, devs, self.acc16, self.k)
        else:  # no baseline ran on these inputs: only a non-finite output can be judged
            ok, detail, mets = True, f"max |C - ref| = {r['max_abs_diff']:.6g}, no baseline to compare", {
                "max_abs_diff": r["max_abs_diff"], "rounding_floor": rounding_floor(r["max_abs_ref"], self.k)}
        outcome = CheckOutcome(name=label, passed=bool(ok and r["nonfinite"] == 0),
                               detail=f"after a timed batch of {reps}: {detail}, {r['nonfinite']} non-finite",
                               metrics={"nonfinite": r["nonfinite"], **mets})
        if record:
            self.checks.append(outcome)
        return outcome
