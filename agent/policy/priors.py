"""Starting points before any measurement: each family's priors for a shape (the family carries them, see
agent.families.protocol), with the launch knobs the search's timing mode uses, and a fresh batch's split between
the families by the shape's size class.

Following the paper's analysis (§5-6), by size: launch-bound shapes go to one-launch kernels with split-K inside
them, mid shapes to split-K mma.sync kernels and Hopper stream-K, large shapes to wgmma kernels.
"""
from __future__ import annotations

from typing import Any

from agent.families import families, get, with_launch_knobs
from agent.families.pricing import LARGE_FLOP, SMALL_FLOP, flop

SIZE_CLASSES = ("skinny_long_k", "output_bound", "launch_bound", "mid_low", "mid_high", "large")


def size_class(shape: tuple[int, int, int], arch: str) -> str:
    m, n, k = shape
    f = flop(shape)
    if arch == "sm_90a" and k >= 2048 and f < LARGE_FLOP and m * n <= 2 ** 20:
        return "skinny_long_k"  # where wgmma's batched split-K can run
    if f < 2 ** 31:
        return "output_bound" if m * n >= 2 ** 19 else "launch_bound"
    if f < SMALL_FLOP:
        return "mid_low"
    return "mid_high" if f < LARGE_FLOP else "large"


def family_shares(shape: tuple[int, int, int], arch: str) -> dict[str, float]:
    """Share of a fresh batch per family, before any measurement: each family's share of the shape's size class;
    a family that cannot run on `arch` hands its share to its ARCH_FALLBACK."""
    cls = size_class(shape, arch)
    fams = families()
    shares = {name: float(mod.SHARES.get(cls, 0.0)) for name, mod in fams.items()}
    for name, mod in fams.items():
        if not mod.runs_on(arch):
            fallback = getattr(mod, "ARCH_FALLBACK", None)
            if fallback:
                shares[fallback] += shares[name]
            shares[name] = 0.0
    return shares


def priors(family: str, shape: tuple[int, int, int], acc: str, arch: str,
           mode: str = "offline") -> list[dict[str, Any]]:
    return [with_launch_knobs(family, p, arch, mode) for p in get(family).priors(shape, acc, arch, mode)]
