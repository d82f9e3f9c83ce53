"""The backstop against state kept between calls: a kernel must not run faster on inputs it has just seen.

Timing already gives no kernel a repeated input (evaluator.buffers.OperandPool), so a memo cannot gain there; this
probe looks for the memo itself. Each probe round times a batch whose calls all see the same buffers and contents
(after an untimed batch on them that primes any memo) against a batch whose consecutive calls alternate between
two sets of different contents, and takes repeated / alternating. An honest kernel reads about 1; a kernel that
returns the last call's result when its key (contents, pointers) repeats reads far below (a memo of
1024x1024x4096 copied its kept C in 19 us where the product takes 315 us: 0.06). The same probe on a cuBLAS
baseline is the control for what the GPU itself does. A memo of several entries would hit in both batches: the
screen refuses the memory it needs, and the timing never repeats an input for it to hit.
"""
from __future__ import annotations

import statistics

from evaluator.buffers import OperandPool

# A kernel whose repeated/fresh ratio is below this fraction of the control's keeps state between calls.
STATEFUL_LIMIT = 0.6
PROBE_ROUNDS = 3
CONTROLS = ("cublas-NN", "cublas-TN", "cublaslt-autotune-NN")


def repeat_ratio(c, pool: OperandPool, reps: int, hold: bool, sep: bool, seed: int) -> float:
    """Median over rounds of (time of a batch on one operand set, the same contents call after call, after an
    untimed batch on it) / (time of a batch alternating two sets of different contents). Both fit the L2 alike
    wherever one set does, so an honest kernel reads about 1; a kernel that keeps the last call's result reads
    what copying it costs."""
    one, two = pool.view(1), pool.view(2)
    ratios = []
    for r in range(PROBE_ROUNDS):
        pool.refill(2, seed + r)
        c.time(one, reps, hold, sep)
        repeated = c.time(one, reps, hold, sep)
        fresh = c.time(two, reps, hold, sep)
        ratios.append(repeated / max(fresh, 1e-9))
    return statistics.median(ratios)


def probe(callables: dict[str, object], cand_name: str, pool: OperandPool, reps: dict[str, int],
          hold: dict[str, bool] | None, sep: bool, seed: int) -> dict:
    """The candidate's and a control's repeat ratios and the verdict (passed, detail, metrics)."""
    hold = hold or {}
    control = next((n for n in CONTROLS if n in callables), None)
    cand = repeat_ratio(callables[cand_name], pool, reps[cand_name], hold.get(cand_name, True), sep, seed)
    ctrl = (repeat_ratio(callables[control], pool, reps[control], hold.get(control, True), sep, seed + 1000)
            if control else 1.0)
    relative = cand / max(ctrl, 1e-9)
    passed = relative >= STATEFUL_LIMIT
    detail = "" if passed else (
        f"runs {1 / max(cand, 1e-9):.2f}x faster on inputs it has just seen than on fresh ones (control "
        f"{control}: {1 / max(ctrl, 1e-9):.2f}x): it keeps state between calls (a memo, a cached result or a call "
        f"counter), which the contract forbids")
    return {"passed": passed, "detail": detail, "candidate_repeat_ratio": round(cand, 4),
            "control": control, "control_repeat_ratio": round(ctrl, 4), "relative": round(relative, 4),
            "limit": STATEFUL_LIMIT}
