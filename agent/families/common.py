"""What every kernel family shares: target limits, canonical parameters, candidate names, template rendering."""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any

import jinja2

_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class ArchLimits:
    name: str
    sm: int
    smem_per_block: int  # opt-in maximum of dynamic + static shared memory, bytes
    regs_per_thread: int
    regs_per_sm: int
    max_threads: int
    num_sms: int  # a typical part; only used for occupancy/wave estimates in the policy


ARCHS: dict[str, ArchLimits] = {
    "sm_90a": ArchLimits("sm_90a", 90, 227 * 1024, 255, 65536, 1024, 132),
    "sm_90": ArchLimits("sm_90", 90, 227 * 1024, 255, 65536, 1024, 132),
    "sm_80": ArchLimits("sm_80", 80, 163 * 1024, 255, 65536, 1024, 108),
    "sm_86": ArchLimits("sm_86", 86, 99 * 1024, 255, 65536, 1536, 84),
    "sm_89": ArchLimits("sm_89", 89, 99 * 1024, 255, 65536, 1536, 128),
}


def arch_limits(arch: str) -> ArchLimits:
    try:
        return ARCHS[arch]
    except KeyError:
        raise ValueError(f"unknown arch {arch!r}; known: {', '.join(ARCHS)}") from None


def canonical(params: dict[str, Any]) -> str:
    """One string per parameter set: sorted keys, no whitespace. Identity of a candidate is (family, canonical)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    # CUDA source is full of `{{`, `{%0` (inline asm) and `#`, so templates use `${ x }` for values and
    # `//% if ...` lines for statements; the other delimiters are set to strings that never occur in C++.
    return jinja2.Environment(loader=jinja2.FileSystemLoader(_HERE), undefined=jinja2.StrictUndefined,
                              variable_start_string="${", variable_end_string="}",
                              block_start_string="<%", block_end_string="%>",
                              comment_start_string="<#", comment_end_string="#>",
                              line_statement_prefix="//%", trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True)


def render_template(name: str, **values: Any) -> str:
    return _env().get_template(name).render(**values)


def check_keys(params: dict[str, Any], allowed: dict[str, tuple]) -> None:
    """Reject unknown keys and values outside the declared domain, with a readable reason."""
    # A family's space() validates every config it enumerates (hundreds of thousands per shape), so the common case,
    # the same keys, is one comparison of key views; the sets are built only to say what is wrong.
    if params.keys() != allowed.keys():
        unknown = set(params) - set(allowed)
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)}; expected {sorted(allowed)}")
        raise ValueError(f"missing parameter(s) {sorted(set(allowed) - set(params))}")
    for k, dom in allowed.items():
        if params[k] not in dom:
            raise ValueError(f"{k}={params[k]!r} is outside {list(dom)}")


def validate_with_defaults(params: dict[str, Any], domain: dict[str, tuple], defaults: dict[str, Any]) -> dict[str, Any]:
    """The canonical form: every knob checked, knobs at their default left out (knobs added after the first
    configs were measured default to the old behaviour, so earlier candidates keep name, archive key and build)."""
    full = {**defaults, **params}
    check_keys(full, domain)
    return {k: v for k, v in full.items() if k not in defaults or v != defaults[k]}


# Launch knobs every family has. `pdl`: programmatic dependent launch (pdl.cu.j2), an sm_90 feature.
LAUNCH_DOMAIN: dict[str, tuple] = {"pdl": (False, True)}
LAUNCH_DEFAULTS: dict[str, Any] = {"pdl": False}


def uneven_waves(units: int, cluster: int, sms: int) -> str:
    """Why grid=even would launch the same CTAs as grid=full for `units` work units of `cluster` CTAs ('' if not):
    one wave, or whole waves, leave nothing to even out."""
    slots = max(1, sms // cluster)
    per = ceil_div(units, slots)
    if ceil_div(units, per) == min(units, slots):
        return (f"grid=even launches the same {min(units, slots) * cluster} CTAs as grid=full here ({units} work "
                f"units on {slots * cluster} CTA slots)")
    return ""


def launch_knobs(arch: str, mode: str = "offline") -> dict[str, Any]:
    """The launch knobs the policy always uses on `arch` for a search timed in `mode` (not searched). PDL hides the
    launch behind the kernel before it in a plain stream, up to 2x on tiny shapes offline; replayed from a CUDA
    graph, where the launch gap is short already, the same kernels ran up to 8% faster without it (H200 sweep of
    output-bound small-K shapes, an mma.sync and a TMA/wgmma kernel), so a graph-mode search goes without."""
    return {"pdl": arch_limits(arch).sm >= 90 and mode != "graph"}


def validated(params: dict[str, Any], validate, arch: str, target: str, what: str) -> tuple[dict, ArchLimits, str]:
    """(canonical params, the arch's limits, "") or (_, _, why not): bad params, an unknown arch, an arch below the
    family's `target` ("sm_80": that or newer; "sm_90a": exactly, its wgmma/TMA are arch-specific) for `what` the
    kernel uses, or a launch knob the arch lacks. Every family's `feasible` starts here."""
    try:
        p, lim = validate(params), arch_limits(arch)
    except ValueError as e:
        return {}, ARCHS["sm_90a"], str(e)
    if target == "sm_90a" and arch != "sm_90a":
        return p, lim, f"{what} need sm_90a (arch-specific features), not {arch}"
    if lim.sm < arch_limits(target).sm:
        return p, lim, f"{arch}: {what} need {target}+"
    return p, lim, launch_problem(p, lim)


def smem_problem(smem: int, lim: ArchLimits) -> str:
    if smem <= lim.smem_per_block:
        return ""
    return f"shared memory {smem} B > {lim.smem_per_block} B per block on {lim.name}"


def first_on_both_archs(candidates, feasible, smem_bytes, shape) -> dict[str, Any] | None:
    """The first of `candidates` (params, deepest first) that `feasible` takes on sm_90a and whose shared memory an
    A100 holds too: a cold twin of a family that serves sm_80 builds for either arch."""
    for q in candidates:
        if feasible(q, shape, "sm_90a")[0] and not smem_problem(smem_bytes(q), arch_limits("sm_80")):
            return q
    return None


def launch_problem(p: dict[str, Any], lim: ArchLimits) -> str:
    if p.get("pdl") and lim.sm < 90:
        return f"pdl: programmatic dependent launch needs sm_90+, not {lim.name}"
    return ""


def cutlass_include_dirs() -> list[str]:
    """CUTLASS/CuTe headers of the nvidia-cutlass pip package (include/ and tools/util/include/)."""
    try:
        import cutlass_library  # type: ignore
    except ImportError as e:
        raise RuntimeError("CUTLASS headers need the nvidia-cutlass package (pip install --no-deps nvidia-cutlass)") from e
    src = os.path.join(os.path.dirname(cutlass_library.__file__), "source")
    return [os.path.join(src, "include"), os.path.join(src, "tools", "util", "include")]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def kernel_shape(p: dict[str, Any], shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """The M x N x K the kernel walks: N x M x K where it computes C^T (swap_ab)."""
    m, n, k = shape
    return (n, m, k) if p.get("swap_ab") else (m, n, k)


def in_16_byte_rows(*lengths: int) -> bool:
    """fp16 rows of these lengths end on 16-byte boundaries: what TMA's global strides, 16-byte cp.async copies and
    vector stores need of N and K (and of C's rows)."""
    return all(x % 8 == 0 for x in lengths)


# The static workspace of the in-launch split-K of the mma.sync families: fp32 partials (16 MiB) and one arrival
# counter per output tile; a config that needs more is refused here and, at run time, by the kernel itself.
WS_FLOATS = 4 * 1024 * 1024
MAX_TILES = 16384


def splitk_problem(kt: int, split_k: int, tiles: int, tile_elems: int) -> str:
    """Why an in-launch split-K of `split_k` over `kt` k-tiles cannot run ('' when it can)."""
    if split_k > kt:
        return f"split_k={split_k} > {kt} k-tiles"
    per = ceil_div(kt, split_k)
    if ceil_div(kt, per) < split_k:
        return f"split_k={split_k} leaves empty splits ({kt} k-tiles, {per} per split)"
    if tiles > MAX_TILES:
        return f"{tiles} output tiles > {MAX_TILES} arrival counters of the split-K workspace"
    if tiles * split_k * tile_elems > WS_FLOATS:
        return f"split-K partials need {tiles * split_k * tile_elems} floats > the workspace's {WS_FLOATS}"
    return ""


def render_feasible(family: str, template: str, p: dict[str, Any], feasible, defaults: dict[str, Any] | None = None,
                    **extra: Any) -> str:
    """Render a validated config after the most permissive feasibility check (sm_90a); feasible() with the real
    target and shape is the caller's gate before compiling. `defaults` fill knobs that the canonical params omit."""
    ok, why = feasible(p, None, "sm_90a")
    if not ok:
        raise ValueError(f"infeasible {family} config: {why}")
    return render_template(template, params_json=canonical(p), **extra, **{**(defaults or {}), **p})

