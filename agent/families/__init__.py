"""Kernel families: each renders complete contract `.cu` files from a validated parameter dict.

A family is one module in this package and its template (see protocol.Family): the registry finds every module
here that defines NAME and TEMPLATE. A candidate is identified by (family, canonical(params)); `candidate_name`
gives its short stable name.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import pkgutil
from types import ModuleType
from typing import Any

from .common import ARCHS, arch_limits, canonical, cutlass_include_dirs, launch_knobs
from .protocol import REQUIRED


@functools.lru_cache(maxsize=1)
def _registry() -> dict[str, ModuleType]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if not (hasattr(mod, "NAME") and hasattr(mod, "TEMPLATE")):
            continue  # a shared helper, not a family
        missing = [a for a in REQUIRED if not hasattr(mod, a)]
        if missing or mod.NAME != info.name:
            raise ImportError(f"kernel family module {mod.__name__} is incomplete: "
                              f"{'missing ' + ', '.join(missing) if missing else 'its NAME is not its module name'}")
        found.append(mod)
    return {m.NAME: m for m in sorted(found, key=lambda m: (m.ORDER, m.NAME))}


def names() -> tuple[str, ...]:
    """Every family, in the order the policy visits them."""
    return tuple(_registry())


def get(name: str) -> ModuleType:
    try:
        return _registry()[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(names())}") from None


def families() -> dict[str, ModuleType]:
    return dict(_registry())


def candidate_name(family: str, params: dict[str, Any]) -> str:
    """Short, stable, filename-safe name: family prefix, a few readable knobs, and a hash of the canonical params."""
    h = hashlib.sha1(f"{family}|{canonical(params)}".encode()).hexdigest()[:8]
    mod = _registry().get(family)
    short = mod.SHORT if mod is not None else family[:4]
    dims = "x".join(str(params[k]) for k in ("bm", "bn", "bk") if k in params)
    if not dims:
        dims = "x".join(str(params[k]) for k in ("tile_m", "tile_n", "tile_k") if k in params)
    return f"{short}_{dims}_{h}" if dims else f"{short}_{h}"


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
    if family not in _registry() or not params:
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


def settled(family: str, params: dict[str, Any], shape: tuple[int, int, int]) -> dict[str, Any]:
    """The params with the knobs their family settles by the shape rather than searches (its optional `settle`):
    the kernel runs any shape, but which value pays depends on the one it is timed on."""
    settle = getattr(get(family), "settle", None)
    return settle(params, tuple(shape)) if settle else params


def with_launch_knobs(family: str, params: dict[str, Any], arch: str, mode: str = "offline") -> dict[str, Any]:
    """The params with the launch knobs the policy uses on `arch` in timing `mode`, where the family supports them
    for this config."""
    knobs = launch_knobs(arch, mode)
    q = {**params, **knobs}
    return q if get(family).feasible(q, None, arch)[0] else {**params, **{k: False for k in knobs}}


# The timing mode whose single call after an idle gap a family's cold twin is for: its searches start from twins and
# its campaign tournament plays them
COLD_MODE = "server"


def cold_twin(family: str | None, params: dict[str, Any] | None,
              shape: tuple[int, int, int]) -> dict[str, Any] | None:
    """The family's variant of `params` for a cold single call (COLD_MODE), canonical, or None where the family has
    none (its optional `cold_twin`) or is no registered family, or the variant has no family or params (a model's own
    kernel)."""
    twin = getattr(_registry().get(family), "cold_twin", None) if params else None
    try:
        q = twin(params, tuple(shape)) if twin else None
    except ValueError:  # params an older archive stored, which no longer validate
        return None
    return normal_params(family, q) if q else None


def needs_cutlass(family: str) -> bool:
    """Whether the family's sources include CUTLASS/CuTe headers (the compile needs cutlass_include_dirs())."""
    return bool(getattr(get(family), "NEEDS_CUTLASS", False))


__all__ = ["ARCHS", "COLD_MODE", "arch_limits", "candidate_name", "canonical", "cold_twin", "cutlass_include_dirs",
           "families", "full_params", "get", "names", "needs_cutlass", "normal_params", "render", "settled",
           "with_launch_knobs"]
