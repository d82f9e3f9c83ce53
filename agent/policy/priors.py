"""Starting points before any measurement: each family's priors for a shape (the family carries them, see
agent.families.protocol), with the launch knobs the search's timing mode uses, and a fresh batch's split between
the families by the shape's size class.

Following the paper's analysis (§5-6), by size: launch-bound shapes go to one-launch kernels with split-K inside
them, mid shapes to split-K mma.sync kernels and Hopper stream-K, large shapes to wgmma kernels.
"""
from __future__ import annotations

from typing import Any

from agent.families import (ARCHS, COLD_MODE, cold_twin, families, get, normal_params, settled,
                            with_launch_knobs)
# the size classes live beside the other problem-size boundaries, where the families' priors can test them too
from agent.families.pricing import SIZE_CLASSES, size_class  # noqa: F401


def family_shares(shape: tuple[int, int, int], arch: str, acc: str = "fp32") -> dict[str, float]:
    """Share of a fresh batch per family, before any measurement: each family's share of the shape's size class;
    a family that cannot run on `arch` hands its share to its ARCH_FALLBACK."""
    cls = size_class(shape, arch)
    fams = families()
    listed: dict[tuple[str, str], bool] = {}

    def lists(name: str, on: str) -> bool:  # each family's priors are asked for once per arch
        if (name, on) not in listed:
            listed[name, on] = bool(fams[name].priors(shape, acc, on))
        return listed[name, on]

    shares = {name: float(mod.SHARES.get(cls, 0.0)) for name, mod in fams.items()}
    for name, mod in fams.items():
        # a family that lists no prior for the shape and accumulator where it runs knows no place to start there
        # (hopper_raw on a mid shape that none of its tiles fills, or at fp16): it gets no share and hands none on
        own = next((a for a in ARCHS if mod.runs_on(a)), arch)
        if shares[name] > 0 and not lists(name, own):
            shares[name] = 0.0
    for name, mod in fams.items():
        if not mod.runs_on(arch):
            fallback = getattr(mod, "ARCH_FALLBACK", None)
            # a fallback that lists no prior here cannot take the slots (hopper_raw's launch_wave prior on sm_80 at
            # K = 1000, where no ampere_cute tile runs)
            if fallback and lists(fallback, arch):
                shares[fallback] += shares[name]
            shares[name] = 0.0
    if not any(shares.values()):
        # no family of the class can start here (a class that leaves families out, at an accumulator its families do
        # not list priors for): every family that runs here and lists priors gets an even share, so no batch is empty
        shares = {name: float(mod.runs_on(arch) and lists(name, arch)) for name, mod in fams.items()}
    return shares


def priors(family: str, shape: tuple[int, int, int], acc: str, arch: str,
           mode: str = "offline") -> list[dict[str, Any]]:
    listed = get(family).priors(shape, acc, arch, mode)
    if mode == COLD_MODE:  # a search timed cold starts from each prior's cold twin, where its family has one
        listed = [cold_twin(family, p, shape) or p for p in listed]
    return [_fit_ring(family, settled(family, with_launch_knobs(family, p, arch, mode), shape), shape, arch)
            for p in listed]


def _fit_ring(family: str, p: dict[str, Any], shape: tuple[int, int, int], arch: str) -> dict[str, Any]:
    """The mma.sync families' priors are written for sm_90's 227 KB of shared memory; on sm_80 (163 KB) and sm_86/89
    (99 KB) the policy's pool would drop those that overflow without a word (54 and 729 on the grid). The tile is the
    prior's point, so its ring gives way: the deepest that fits, else the prior as listed."""
    mod = get(family)
    if not p.get("stages") or mod.feasible(normal_params(family, p), shape, arch)[0]:
        return p
    for stages in range(p["stages"] - 1, 1, -1):
        q = mod.repair(dict(p, stages=stages))
        if mod.feasible(normal_params(family, q), shape, arch)[0]:
            return q
    return p
