"""What a kernel family is: one module plus its template in agent/families/, found there by the registry
(`agent.families.names()`); nothing else names it. The module carries everything the search needs to know."""
from __future__ import annotations

from typing import Any, Protocol


class Family(Protocol):
    NAME: str  # the module's own name
    TEMPLATE: str  # its `.cu.j2` beside it
    ORDER: int  # the policy visits families in this order (smallest problems first); ties go by NAME
    SHORT: str  # the candidate names' prefix
    DOMAIN: dict[str, tuple]  # every knob's values (a family may add SEARCH_DOMAIN: the values worth a search slot,
    # or a function search_domain(shape) returning them per shape, and DEFAULTS: the knobs its canonical params leave
    # out)
    # A fresh batch's share per size class (agent.families.pricing.size_class); a class it leaves out gets none. Where
    # `runs_on(arch)` is false its share goes to the family named by ARCH_FALLBACK, if it names one.
    SHARES: dict[str, float]

    def validate(self, params: dict[str, Any]) -> dict[str, Any]: ...  # canonical params, or ValueError

    def feasible(self, params: dict[str, Any], shape: tuple[int, int, int] | None,
                 arch: str) -> tuple[bool, str]: ...

    def render(self, params: dict[str, Any]) -> str: ...  # a complete contract .cu

    def space(self, shape: tuple[int, int, int], acc: str, arch: str) -> list[dict[str, Any]]: ...

    def runs_on(self, arch: str) -> bool: ...

    # its starting points for a shape, best first (the policy adds the launch knobs)
    def priors(self, shape: tuple[int, int, int], acc: str, arch: str, mode: str) -> list[dict[str, Any]]: ...

    # analytic time of one call in µs, for ranking before any measurement
    def estimate_us(self, params: dict[str, Any], shape: tuple[int, int, int], arch: str) -> float: ...

    # a mutated config with its coupled knobs made consistent again
    def repair(self, params: dict[str, Any]) -> dict[str, Any]: ...

    # Optional: cold_twin(params, shape) -> params | None, the same kernel tuned for a cold single call; a search
    # timed in that mode (agent.families.COLD_MODE) starts from its priors' twins, and the campaign plays it beside
    # the leader it came from in that mode's tournament
    # Optional: settle(params, shape) -> params, the knobs the family sets by the shape instead of searching them
    # (hopper_raw's edge); the policy applies it to every prior, seed, mutation and sample before `feasible`


REQUIRED = ("NAME", "TEMPLATE", "ORDER", "SHORT", "DOMAIN", "SHARES", "validate", "feasible", "render", "space",
            "runs_on", "priors", "estimate_us", "repair")
