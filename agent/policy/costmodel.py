"""A rough analytic time per call: the prior mean of the policy's surrogate. Each family prices its own configs
(`estimate_us` in its module; the shared rates are in agent.families.pricing); this adds what every family's launch
shares."""
from __future__ import annotations

from typing import Any

from agent.families import get
from agent.families.pricing import PDL_US


def estimate_us(family: str, p: dict[str, Any], shape: tuple[int, int, int], arch: str = "sm_90a") -> float:
    """Estimated time of one call in microseconds (used for ranking only)."""
    return get(family).estimate_us(p, shape, arch) - (PDL_US if p.get("pdl") else 0.0)
