"""When a shape's loop stops: its budget, and the rule that reads the loop's state against it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MAX_FAILED_STEPS = 3  # steps in a row without a single kernel from the model stop the shape


@dataclass(frozen=True)
class LoopBudget:
    candidates: int = 16  # kernels proposed (with a source), memo hits included
    minutes: float | None = None  # the loop's own time (its nodes), not the wall clock
    plateau: int | None = 4  # steps without a gain of plateau_min_gain stop the shape (once it has a best)
    plateau_min_gain: float = 0.005
    target_speedup: float | None = None
    n_per_step: int = 4
    max_failed_steps: int = MAX_FAILED_STEPS
    max_steps: int | None = None  # default: enough for the candidates four times over, plus four

    def __post_init__(self) -> None:
        if self.candidates < 1 or self.n_per_step < 1:
            raise ValueError("budget_candidates and n_per_step must be at least 1")
        if self.max_steps is None:
            object.__setattr__(self, "max_steps", 4 * math.ceil(self.candidates / self.n_per_step) + 4)

    def stop_reason(self, state: dict[str, Any]) -> str | None:
        best = state.get("best_speedup")
        if self.target_speedup is not None and best is not None and best >= self.target_speedup:
            return "target_reached"
        if state.get("candidates", 0) >= self.candidates:
            return "budget_candidates"
        if self.minutes is not None and state.get("elapsed_s", 0.0) >= self.minutes * 60:
            return "budget_minutes"
        if self.plateau is not None and state.get("no_improve_steps", 0) >= self.plateau and best is not None:
            return "plateau"
        if state.get("failed_steps_in_row", 0) >= self.max_failed_steps:
            return "proposer_failing"
        if state.get("step", 0) >= self.max_steps:
            return "max_steps"
        return None

    def would_continue(self, values: dict[str, Any]) -> bool:
        """Whether a finished thread would run further under this budget (a campaign re-run with more)."""
        reason = values.get("stop_reason")
        best = values.get("best_speedup")
        if self.target_speedup is not None and best is not None and best >= self.target_speedup:
            return False
        if reason == "budget_candidates":
            return values.get("candidates", 0) < self.candidates
        if reason == "budget_minutes":
            return self.minutes is None or values.get("elapsed_s", 0.0) < self.minutes * 60
        if reason == "target_reached":
            return self.target_speedup is None or best is None or best < self.target_speedup
        if reason == "proposer_failing":  # the endpoint may be back (or the key set): spend what the budget has left
            return values.get("candidates", 0) < self.candidates and (
                self.minutes is None or values.get("elapsed_s", 0.0) < self.minutes * 60)
        return False
