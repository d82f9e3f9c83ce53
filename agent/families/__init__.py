"""Kernel families: each renders complete contract `.cu` files from a validated parameter dict.

Every family module exposes NAME, DOMAIN, `space(shape, acc, arch)`, `feasible(params, shape, arch) -> (ok, why)`
and `render(params) -> str`. A candidate is identified by (family, canonical(params)); `candidate_name` gives its
short stable name.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from .common import ARCHS, arch_limits, candidate_name, canonical, cutlass_include_dirs, launch_knobs

FAMILY_NAMES = ("small", "ampere_cute", "hopper_wgmma", "hopper_raw")


def get(name: str) -> ModuleType:
    if name not in FAMILY_NAMES:
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(FAMILY_NAMES)}")
    return importlib.import_module(f"{__name__}.{name}")


def families() -> dict[str, ModuleType]:
    return {n: get(n) for n in FAMILY_NAMES}


def render(family: str, params: dict[str, Any], shape: tuple[int, int, int] | None = None,
           arch: str = "sm_90a") -> str:
    """Render after checking feasibility; an infeasible config raises ValueError with the reason."""
    mod = get(family)
    ok, why = mod.feasible(params, shape, arch)
    if not ok:
        raise ValueError(f"{family} config refused: {why}")
    return mod.render(params)


def current_source(family: str | None, params: dict[str, Any] | None, stored: str) -> str:
    """A family kernel as today's template writes it. A config renders the same source across template versions
    unless the template took over something the harness used to supply: hopper_wgmma's tiles 144/160/176 now
    define CuTe's extended wgmma shapes themselves, and their older sources would build with narrower atoms.
    Kernels of no family (a model's own) and configs the family no longer takes keep their stored source."""
    if family not in FAMILY_NAMES or not params:
        return stored
    try:
        return get(family).render(params)
    except ValueError:
        return stored


def full_params(family: str, params: dict[str, Any]) -> dict[str, Any]:
    """Every knob spelled out: the canonical params leave out knobs at their default (a family's DEFAULTS)."""
    return {**getattr(get(family), "DEFAULTS", {}), **params}


def normal_params(family: str, params: dict[str, Any]) -> dict[str, Any]:
    """The canonical form (defaults left out); raises ValueError for unknown knobs or values."""
    return get(family).validate(params)


def with_launch_knobs(family: str, params: dict[str, Any], arch: str, mode: str = "offline") -> dict[str, Any]:
    """The params with the launch knobs the policy uses on `arch` in timing `mode`, where the family supports them
    for this config."""
    knobs = launch_knobs(arch, mode)
    q = {**params, **knobs}
    return q if get(family).feasible(q, None, arch)[0] else {**params, **{k: False for k in knobs}}


def needs_cutlass(family: str) -> bool:
    """Whether the family's sources include CUTLASS/CuTe headers (the compile needs cutlass_include_dirs())."""
    return bool(getattr(get(family), "NEEDS_CUTLASS", False))


__all__ = ["ARCHS", "FAMILY_NAMES", "arch_limits", "candidate_name", "canonical", "cutlass_include_dirs",
           "families", "full_params", "get", "needs_cutlass", "normal_params", "render", "with_launch_knobs"]
