"""Interleaved timing of the candidate and the baselines with CUDA events on the contract stream.

Every round visits all callables in a new shuffled order, so drift (clocks, temperature, neighbours) hits them
alike. Offline mode times back-to-back batches behind a host-released hold, so host launch cost never appears as
idle GPU time. Every offline call is followed by an ordinary empty kernel (the separator) whose own time, measured
alone in the same round, is subtracted: a candidate launched with programmatic dependent launch overlaps its launch
with the kernel before it, as it would in any stream, but never with its own previous call. For launches without
PDL the separator adds its time and nothing else (measured on the H200: +0.00-0.01 us). Server mode leaves the GPU
idle for a random exponential gap before each single call and does not count the gap. Graph mode is offline mode
with each batch (separators included) captured once into a CUDA graph and replayed, as a caller that replays graphs
runs it: a graph leaves less gap between kernels, so launch overlap is worth less there. torch is not timed in it
(its Python call cannot be captured from the worker's native side), and a power-limited shape is timed
power-steady with plain launches, as offline (a graph changes nothing in a 0.1-5 ms call). Speedups are per-round
ratios t_baseline / t_candidate, averaged as in the paper (eq. 2), with the median and a 95% bootstrap interval
over rounds.

Offline timing of a power-limited shape (the fastest NVIDIA baseline takes at least `steady_min_ms` per call, or
cuBLASLt-AutoTuning's pick slows down when held: `steady_reason`) is power-steady. A GPU running such GEMMs back to
back sits at its power limit, and its clock follows the kernel's power within ~60 ms (H200: a kernel that moves
twice the DRAM bytes runs at 1120-1210 MHz where cuBLAS holds 1360-1400 MHz). Short interleaved batches average the
clock over all callables, so a power-hungry kernel runs on its neighbours' clock: 0.98 of cuBLAS interleaved, 0.86
on its own (docs/evaluator.md). Each timed batch is therefore preceded by an untimed lead-in of the same callable,
and only the candidate and the cuBLAS/cuBLASLt-AutoTuning baselines are timed (torch and the heuristic picks are
left out, to bound the cost).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from evaluator.buffers import OperandPool, rounding_floor
from evaluator.native import Native
from evaluator.record import Timing


SEPARATOR = "__separator__"


@dataclass(frozen=True)
class Profile:
    warmup_min_s: float
    warmup_max_s: float
    min_rounds: int
    max_rounds: int
    budget_s: float  # timed rounds stop once this is spent and min_rounds are done
    batch_target_ms: float  # offline: calls per batch so that a batch lasts about this long
    server_gap_ms: float  # mean of the exponential idle gap before each server-mode call
    draws: int  # correctness draws
    autotune_rounds: int
    steady_min_ms: float  # offline: power-steady timing when the fastest baseline takes at least this per call
    steady_lead_ms: float  # untimed calls of the same callable before each timed batch
    steady_batch_ms: float  # a timed power-steady batch lasts about this long
    steady_rounds: int  # rounds of power-steady timing (each costs ~(lead + batch) x callables)
    # offline: power-steady timing also when an AutoTuning pick ran at least this much slower held than in its
    # screening's short bursts: the shape reaches the power limit back to back, however short one call is
    steady_gap: float = 1.05


PROFILES = {
    "quick": Profile(0.2, 1.0, 10, 60, 0.8, 0.3, 1.0, 2, 3, 0.05, 150.0, 40.0, 5),
    "paper": Profile(10.0, 10.0, 30, 100000, 30.0, 1.0, 2.0, 6, 10, 0.05, 500.0, 200.0, 20),
}
# The callables a power-steady measurement times besides the candidate (the speedup targets and cublas-NN, the
# reference of baseline-only timing), with AutoTuning's runners-up (cublaslt-autotune-NN#2, ...).
STEADY_BASELINES = ("cublas-NN", "cublas-TN", "cublaslt-autotune-NN", "cublaslt-autotune-TN")
# The timing regimes: whether an ordinary kernel (the separator) follows every call, when the measurement is
# power-steady ("auto": when the shape is power-limited, see steady_reason), and what the L2 holds before each timed
# batch (the operand refill's prelude, evaluator.buffers.PRELUDES; "refill" unless given).
REGIMES = {
    "back-to-back": {"separator": False, "steady": "never"},
    "separated": {"separator": True, "steady": "never"},
    "steady": {"separator": True, "steady": "always"},
    "offline": {"separator": True, "steady": "auto"},
    "graph": {"separator": True, "steady": "auto"},
    "server": {"separator": False, "steady": "never", "prelude": "activations"},
}
# Sampled timed outputs may be off by this many times the worst the NVIDIA baselines were off on the same kind of
# draw (or by four half-ulps of the largest output, whichever is larger); a skipped call leaves the NaN poison and
# a stale product is off by the size of the outputs themselves.
SPOT_HEADROOM = 2.0


def steady_timed(name: str) -> bool:
    return name in STEADY_BASELINES or name.startswith("cublaslt-autotune-")
# Names of the other kernels timed beside the candidate in a tournament (evaluate(..., rivals=)): always timed.
RIVAL = "rival:"


def held_calls(batch_ms: float, est_ms: float) -> int:
    """Calls of a held batch lasting about `batch_ms` for a callable of `est_ms` a call. A held batch must fit the
    launch queue (the hold would time out behind a full queue): at most 200 calls."""
    return max(1, min(200, round(batch_ms / est_ms)))


def steady_calls(prof: Profile, est_ms: float) -> tuple[int, int]:
    """(untimed lead-in calls, timed calls) of one power-steady batch for a callable of `est_ms` a call."""
    return max(1, round(prof.steady_lead_ms / est_ms)), held_calls(prof.steady_batch_ms, est_ms)


def held_over_burst(tuned: dict) -> float | None:
    """An AutoTuning pick's time held power-steady (its final) over its time in the screening's short bursts, from
    autotune_lt's detail; None for a pick without a final. Well above 1: the shape is power-limited back to back."""
    final, burst = tuned.get("steady"), tuned.get("median_ms")
    if not final or not burst:
        return None
    return final["finalist_median_ms"][final["chosen_finalist"]] / burst


def steady_reason(mode: str, base_ms: list[float], callables: dict[str, object], prof: Profile) -> str | None:
    """Why an offline measurement is timed power-steady, or None. A shape is power-limited when its fastest baseline
    takes at least `steady_min_ms` a call, or when cuBLASLt-AutoTuning's pick ran `steady_gap` times slower held
    than in the screening's bursts (256x2048x16384 on the H200: 36 us a call held, 32 in bursts)."""
    if REGIMES[mode]["steady"] == "always":
        return "the power-steady regime was asked for"
    if REGIMES[mode]["steady"] != "auto" or not base_ms:
        return None
    if min(base_ms) >= prof.steady_min_ms:
        return f"the fastest baseline takes {min(base_ms):.3f} ms a call"
    for name in ("cublaslt-autotune-NN", "cublaslt-autotune-TN"):
        ratio = held_over_burst(getattr(callables.get(name), "detail", None) or {})
        if ratio is not None and ratio >= prof.steady_gap:
            return f"{name} ran {ratio:.3f}x slower held than in bursts"
    return None


def settle(callables: dict[str, object], cand_name: str, ops: OperandPool, reps: dict[str, int], prof: Profile,
           progress: Callable[[str], None]) -> float:
    """Warm up until the candidate's batch time is stable (three batches within 2%) and warmup_min_s has passed."""
    progress("warm-up")
    t0 = time.perf_counter()
    recent: list[float] = []
    while True:
        for name, c in callables.items():
            t = c.time(ops, reps[name])
            if name == cand_name:
                recent = (recent + [t])[-3:]
        elapsed = time.perf_counter() - t0
        stable = len(recent) == 3 and (max(recent) - min(recent)) <= 0.02 * min(recent)
        if elapsed >= prof.warmup_max_s or (elapsed >= prof.warmup_min_s and stable):
            return elapsed


def measure(nat: Native, callables: dict[str, object], cand_name: str, ops: OperandPool, mode: str, prof: Profile,
            rng: random.Random, progress: Callable[[str], None], seed: int = 0) -> tuple[dict[str, list[float]], dict]:
    """Returns per-callable lists of per-round times in microseconds (same length, aligned by round). Every timed
    batch runs on freshly drawn inputs, one operand set per call (OperandPool), and its outputs are spot-checked:
    meta["outputs"] says, per callable, whether every timed call's output was right (`verify_outputs`)."""
    graph_out: list[str] = []
    if mode == "graph":  # the native side captures what it calls itself: the callables with a native id
        graph_out = [n for n, c in callables.items() if not hasattr(c, "cid")]
        callables = {n: c for n, c in callables.items() if n not in graph_out}
    hold = {name: True for name in callables}
    est: dict[str, float] = {}
    for name, c in callables.items():
        # A kernel's first call in a process may spend long on the host (its module loaded on first launch, device
        # queries): behind a hold that reads as a kernel that synchronises, and the callable was then timed unheld,
        # launch gaps and all. The rivals of a tournament meet this (the candidate and baselines ran in the checks):
        # first evaluation in a fresh worker on an H100, their 39 us kernels read 41-42 us, 6% slow.
        c.time(ops, 1, False)
        nat.hold_timed_out()  # clears the flag
        c.time(ops, 1)
        ms = c.time(ops, 1)
        if nat.hold_timed_out() == 1:  # the callable synchronises inside its call: time it without a hold
            hold[name] = False
            ms = c.time(ops, 1, False)
        est[name] = max(ms, 1e-4)
    base_ms = [est[n] for n in callables if n in STEADY_BASELINES]
    why = steady_reason(mode, base_ms, callables, prof)
    steady = why is not None
    left_out: list[str] = []
    # A power-steady lead-in runs on the pool's last set, never on the sets it is then timed on.
    timed_sets = ops.count - 1 if steady and ops.count > 1 else ops.count
    if steady:
        left_out = [n for n in callables if n != cand_name and not steady_timed(n) and not n.startswith(RIVAL)]
        callables = {n: c for n, c in callables.items() if n not in left_out}
        calls = {n: steady_calls(prof, est[n]) for n in callables}
        lead = {n: c[0] for n, c in calls.items()}
        reps = {n: min(c[1], timed_sets) for n, c in calls.items()}
    elif mode != "server":
        reps = {n: min(held_calls(prof.batch_target_ms, est[n]), timed_sets) for n in callables}
    else:
        reps = {n: 1 for n in callables}
    sep = REGIMES[mode]["separator"]
    prelude = REGIMES[mode].get("prelude", "refill")
    graph = mode == "graph" and not steady
    warm_s = settle({n: _Held(c, hold[n], sep, graph) for n, c in callables.items()}, cand_name, ops, reps, prof,
                    progress)
    if sep:
        est_sep = max(nat.time_batch(-1, *ops.args, 1, True, True), 1e-4)
        reps_sep = held_calls(prof.batch_target_ms, est_sep)
    times: dict[str, list[float]] = {n: [] for n in callables}
    outputs: dict[str, list[dict]] = {n: [] for n in callables}
    sep_us: list[float] = []
    order = list(callables) + ([SEPARATOR] if sep else [])
    t0 = time.perf_counter()
    rounds = draw = 0
    while rounds < (prof.steady_rounds if steady else prof.max_rounds):
        elapsed = time.perf_counter() - t0
        if not steady and rounds >= prof.min_rounds and elapsed >= prof.budget_s:
            break
        if rounds % 10 == 0:
            progress(f"timing round {rounds + 1}")
        rng.shuffle(order)
        raw = {}
        for name in order:
            if name == SEPARATOR:
                if graph:
                    raw[name] = 1e3 * nat.time_graph(-1, *ops.args, reps_sep, True)
                else:
                    raw[name] = 1e3 * nat.time_batch(-1, *ops.args, reps_sep, True, True)
                continue
            draw += 1
            ops.refill(reps[name], seed * 1_000_003 + draw, prelude)
            if steady:  # reach this callable's own power state; unheld, so any number of calls can queue
                callables[name].time(ops.sets[-1], lead[name], False, sep)
            if mode == "server":
                time.sleep(rng.expovariate(1.0 / (prof.server_gap_ms / 1e3)))
            if graph:
                raw[name] = 1e3 * callables[name].time(ops, reps[name], True, sep, True)
            else:
                raw[name] = 1e3 * callables[name].time(ops, reps[name], hold[name], sep)
            outputs[name].append(ops.spot_check(reps[name], seed * 7_777_777 + draw))
        s_us = raw.get(SEPARATOR, 0.0)
        sep_us.append(s_us)
        for name in callables:
            times[name].append(max(raw[name] - s_us, 1e-3))
        rounds += 1
    meta = {"rounds": rounds, "warmup_s": round(warm_s, 3), "reps": reps,
            "unheld": [n for n in callables if not hold[n]], "mode": mode, "prelude": prelude,
            "operand_sets": {"count": ops.count, "timed": timed_sets, "bytes_each": ops.first.bytes_total(),
                             "drawn": draw},
            "outputs": verify_outputs(outputs, [n for n in callables if n == cand_name or n.startswith(RIVAL)])}
    if mode == "graph":
        meta["graph"] = {"replayed": graph, "not_timed": graph_out}
    if sep:
        meta["separator_us"] = round(float(np.median(sep_us)), 3)
    if steady:
        meta["steady"] = {"lead": lead, "lead_ms": prof.steady_lead_ms, "batch_ms": prof.steady_batch_ms,
                          "not_timed": left_out, "why": why}
    return times, meta


def verify_outputs(outputs: dict[str, list[dict]], judged: list[str]) -> dict[str, dict]:
    """Per judged callable (the candidate, rivals): whether the sampled outputs of every timed batch were right.
    The tolerance is set by the NVIDIA baselines' own sampled deviations in the same measurement (SPOT_HEADROOM
    times the worst), never below four half-ulps of the largest output."""
    base = [o for n, os_ in outputs.items() if n not in judged for o in os_]
    worst_base = max((o["max_abs_diff"] for o in base if o["nonfinite"] == 0), default=0.0)
    largest = max((o["max_abs_ref"] for os_ in outputs.values() for o in os_), default=0.0)
    tol = max(SPOT_HEADROOM * worst_base, 4 * rounding_floor(largest))
    out = {}
    for name in judged:
        batches = outputs.get(name, [])
        bad = [i for i, o in enumerate(batches) if o["nonfinite"] or o["max_abs_diff"] > tol]
        worst = max((o["max_abs_diff"] for o in batches), default=0.0)
        nonfinite = sum(o["nonfinite"] for o in batches)
        detail = "" if not bad else (
            f"{len(bad)} of {len(batches)} timed batches returned wrong outputs (first: batch {bad[0] + 1}; "
            f"{nonfinite} sampled outputs not written or not finite, worst |C - ref| {worst:.4g} against a "
            f"tolerance of {tol:.4g}): the kernel skipped work or returned a product it kept from an earlier call")
        out[name] = {"passed": not bad, "batches": len(batches), "calls_checked": sum(o["sets"] for o in batches),
                     "failed_batches": len(bad), "nonfinite": nonfinite, "max_abs_diff": worst, "tolerance": tol,
                     "detail": detail}
    return out
class _Held:
    def __init__(self, c, hold: bool, sep: bool, graph: bool = False):
        self.c, self.hold, self.sep, self.graph = c, hold, sep, graph

    def time(self, ops, reps):
        if self.graph:
            return self.c.time(ops, reps, True, self.sep, True)
        return self.c.time(ops, reps, self.hold, self.sep)


def summarise(times: dict[str, list[float]], cand_name: str, details: dict[str, dict], seed: int = 0
              ) -> tuple[Timing, dict[str, Timing]]:
    cand = np.asarray(times[cand_name])
    cand_t = _timing(cand_name, cand, details.get(cand_name, {}))
    rng = np.random.default_rng(seed)
    out = {}
    for name, ts in times.items():
        if name == cand_name:
            continue
        t = _timing(name, np.asarray(ts), details.get(name, {}))
        ratios = np.asarray(ts) / cand
        t.speedup_mean = float(ratios.mean())
        t.speedup_median = float(np.median(ratios))
        idx = rng.integers(0, len(ratios), size=(2000, len(ratios)))
        boots = ratios[idx].mean(axis=1)
        t.speedup_ci95 = (float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5)))
        out[name] = t
    return cand_t, out


def _timing(name: str, ts: np.ndarray, detail: dict) -> Timing:
    return Timing(name=name, median_us=float(np.median(ts)), mean_us=float(ts.mean()), min_us=float(ts.min()),
                  samples=int(len(ts)), detail=dict(detail))
