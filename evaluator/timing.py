"""Interleaved timing of the candidate and the baselines with CUDA events on the contract stream.

Every round visits all callables in a new shuffled order, so drift (clocks, temperature, neighbours) hits them
alike. Offline mode times back-to-back batches behind a host-released hold, so host launch cost never appears as
idle GPU time. Every offline call is followed by an ordinary empty kernel (the separator) whose own time, measured
alone in the same round, is subtracted: a candidate launched with programmatic dependent launch overlaps its launch
with the kernel before it, as it would in any stream, but never with its own previous call. For launches without
PDL the separator adds its time and nothing else (measured on the H200: +0.00-0.01 us). Server mode leaves the GPU
idle for a random exponential gap before each single call and does not count the gap. Speedups are per-round
ratios t_baseline / t_candidate, averaged as in the paper (eq. 2), with the median and a 95% bootstrap interval
over rounds.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from evaluator.buffers import OperandSet
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


PROFILES = {
    "quick": Profile(0.2, 1.0, 10, 60, 0.8, 0.3, 1.0, 2, 3),
    "paper": Profile(10.0, 10.0, 30, 100000, 30.0, 1.0, 2.0, 6, 10),
}


def settle(callables: dict[str, object], cand_name: str, ops: OperandSet, reps: dict[str, int], prof: Profile,
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


def measure(nat: Native, callables: dict[str, object], cand_name: str, ops: OperandSet, mode: str, prof: Profile,
            rng: random.Random, progress: Callable[[str], None]) -> tuple[dict[str, list[float]], dict]:
    """Returns per-callable lists of per-round times in microseconds (same length, aligned by round)."""
    hold = {name: True for name in callables}
    est: dict[str, float] = {}
    for name, c in callables.items():
        c.time(ops, 1)
        ms = c.time(ops, 1)
        if nat.hold_timed_out() == 1:  # the callable synchronises inside its call: time it without a hold
            hold[name] = False
            ms = c.time(ops, 1, False)
        est[name] = max(ms, 1e-4)
    if mode == "offline":
        reps = {n: max(1, min(200, round(prof.batch_target_ms / est[n]))) for n in callables}
    else:
        reps = {n: 1 for n in callables}
    sep = mode == "offline"
    warm_s = settle({n: _Held(c, hold[n], sep) for n, c in callables.items()}, cand_name, ops, reps, prof, progress)
    if sep:
        est_sep = max(nat.time_batch(-1, *ops.args, 1, True, True), 1e-4)
        reps_sep = max(1, min(200, round(prof.batch_target_ms / est_sep)))
    times: dict[str, list[float]] = {n: [] for n in callables}
    sep_us: list[float] = []
    order = list(callables) + ([SEPARATOR] if sep else [])
    t0 = time.perf_counter()
    rounds = 0
    while rounds < prof.max_rounds:
        elapsed = time.perf_counter() - t0
        if rounds >= prof.min_rounds and elapsed >= prof.budget_s:
            break
        if rounds % 10 == 0:
            progress(f"timing round {rounds + 1}")
        rng.shuffle(order)
        raw = {}
        for name in order:
            if mode == "server":
                time.sleep(rng.expovariate(1.0 / (prof.server_gap_ms / 1e3)))
            if name == SEPARATOR:
                raw[name] = 1e3 * nat.time_batch(-1, *ops.args, reps_sep, True, True)
            else:
                raw[name] = 1e3 * callables[name].time(ops, reps[name], hold[name], sep)
        s_us = raw.get(SEPARATOR, 0.0)
        sep_us.append(s_us)
        for name in callables:
            times[name].append(max(raw[name] - s_us, 1e-3))
        rounds += 1
    meta = {"rounds": rounds, "warmup_s": round(warm_s, 3), "reps": reps,
            "unheld": [n for n, h in hold.items() if not h], "mode": mode}
    if sep:
        meta["separator_us"] = round(float(np.median(sep_us)), 3)
    return times, meta


class _Held:
    def __init__(self, c, hold: bool, sep: bool):
        self.c, self.hold, self.sep = c, hold, sep

    def time(self, ops, reps):
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
