"""Family `hopper_wgmma`: sm_90a wgmma + TMA warp-specialised kernels through the CUTLASS 3.x collective builders."""
from __future__ import annotations

import itertools
from typing import Any

from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, arch_limits, ceil_div, launch_knobs, render_feasible,
                     validate_with_defaults)

# The batched split-K keeps its fp32 slices in a static workspace of this many floats (32 MiB).
SLICE_WS_FLOATS = 8 * 1024 * 1024

NAME = "hopper_wgmma"
TEMPLATE = "hopper_wgmma.cu.j2"
NEEDS_CUTLASS = True

DOMAIN: dict[str, tuple] = {
    "tile_m": (64, 128, 256),
    "tile_n": (64, 128, 192, 256),
    "tile_k": (64, 128),
    "cluster_m": (1, 2, 4),
    "cluster_n": (1, 2, 4),
    "schedule": ("cooperative", "pingpong"),
    # batched: split-K as S GEMMs over K slices (the problem's L mode) into fp32 partials + one summing kernel
    "scheduler": ("persistent", "streamk", "batched"),
    "splits": (1, 2, 3, 4, 8, 16),
    "raster": ("heuristic", "along_m", "along_n"),
    "swizzle": (1, 2, 4, 8),
    "stages": (0, 2, 3, 4, 5, 6, 7, 8),  # 0: as many as fit after the epilogue (StageCountAutoCarveout)
    "b_operand": ("col", "row"),  # col: B_col_major (K-major), row: B (N-major)
    "swap_ab": (False, True),  # compute C^T = B^T A^T: puts N on the wgmma M side (small M, large N)
    "acc": ("fp32", "fp16"),
    **LAUNCH_DOMAIN,
}
DEFAULTS: dict[str, Any] = dict(LAUNCH_DEFAULTS)
EPILOGUE_SMEM_ESTIMATE = 32 * 1024
MAX_ACC_REGS = 192


def validate(params: dict[str, Any]) -> dict[str, Any]:
    return validate_with_defaults(params, DOMAIN, DEFAULTS)


def stage_bytes(p: dict[str, Any]) -> int:
    return (p["tile_m"] + p["tile_n"]) * p["tile_k"] * 2


def feasible(params: dict[str, Any], shape: tuple[int, int, int] | None, arch: str) -> tuple[bool, str]:
    try:
        p = validate(params)
    except ValueError as e:
        return False, str(e)
    lim = arch_limits(arch)
    if arch != "sm_90a":
        return False, f"wgmma/TMA kernels need sm_90a (arch-specific features), not {arch}"
    coop = p["schedule"] == "cooperative"
    if coop and p["tile_m"] not in (128, 256):
        return False, "the cooperative schedule splits tile_m over 2 consumer warpgroups: tile_m must be 128 or 256"
    if not coop and p["tile_m"] not in (64, 128):
        return False, "the ping-pong schedule gives each consumer warpgroup a whole tile: tile_m must be 64 or 128"
    if p["scheduler"] == "streamk" and p.get("pdl"):
        return False, ("pdl: CUTLASS's stream-K scheduler does not build with CUTLASS_ENABLE_GDC_FOR_SM90 "
                       "(sm90_tile_scheduler_stream_k.hpp, const reference)")
    if p["scheduler"] == "streamk" and not coop:
        return False, "CUTLASS's ping-pong kernel does not support the stream-K scheduler"
    if p["splits"] > 1 and p["scheduler"] == "persistent":
        return False, "splits > 1 needs the stream-K scheduler (split-K decomposition) or the batched split"
    batched = p["scheduler"] == "batched"
    if batched and p["splits"] < 2:
        return False, "the batched split-K needs splits >= 2"
    acc_per_thread = p["tile_m"] * p["tile_n"] // (256 if coop else 128)
    if p["acc"] == "fp16":
        acc_per_thread //= 2
    # A consumer warpgroup gets 240 registers (setmaxnreg); 192 fp32 accumulators leave room for addresses and the
    # epilogue: 256x192 cooperative builds with 0 spills (ptxas, nvcc 13.0), 256 accumulators cannot.
    if acc_per_thread > MAX_ACC_REGS:
        return False, f"{acc_per_thread} accumulator registers per consumer thread (limit {MAX_ACC_REGS} of 240)"
    if p["cluster_m"] * p["cluster_n"] > 4:
        return False, "cluster of more than 4 CTAs"
    sb = stage_bytes(p)
    need = (max(p["stages"], 2)) * sb + EPILOGUE_SMEM_ESTIMATE * (2 if batched else 1)  # fp32 D tiles
    if need > lim.smem_per_block:
        return False, f"{max(p['stages'], 2)} stages x {sb} B + epilogue > {lim.smem_per_block} B shared memory"
    if shape is not None:
        m, n, k = shape
        if n % 8 or k % 8:
            return False, f"TMA needs 16-byte strides: N={n} and K={k} must be multiples of 8"
        pm, pn = (n, m) if p["swap_ab"] else (m, n)
        if p["splits"] > 1 and p["splits"] > ceil_div(k, p["tile_k"]):
            return False, f"splits={p['splits']} > {ceil_div(k, p['tile_k'])} k-tiles"
        if batched:
            s = p["splits"]
            if k % (8 * s):
                return False, f"K={k} does not cut into {s} slices that start on 16-byte boundaries"
            if k // s < p["tile_k"]:
                return False, f"a K slice of {k // s} is shorter than tile_k={p['tile_k']}"
            if m * n * s > SLICE_WS_FLOATS:
                return False, f"{s} fp32 slices of {m}x{n} exceed the {SLICE_WS_FLOATS}-float workspace"
        if p["tile_m"] >= 4 * pm and p["tile_m"] > 64:
            return False, f"tile_m={p['tile_m']} is mostly padding for problem M={pm}"
        if p["tile_n"] >= 4 * pn and p["tile_n"] > 64:
            return False, f"tile_n={p['tile_n']} is mostly padding for problem N={pn}"
    return True, ""


def render(params: dict[str, Any]) -> str:
    return render_feasible("hopper_wgmma", TEMPLATE, validate(params), feasible, defaults=DEFAULTS,
                           ws_floats=SLICE_WS_FLOATS)


def space(shape: tuple[int, int, int], acc: str = "fp32", arch: str = "sm_90a") -> list[dict[str, Any]]:
    """Feasible configs for a shape (schedules x tiles x clusters x schedulers x raster/swizzle x stages)."""
    if arch != "sm_90a":
        return []
    out = []
    for tm, tn, tk, cm, cn, sched, swap, bop in itertools.product(
            DOMAIN["tile_m"], DOMAIN["tile_n"], DOMAIN["tile_k"], (1, 2), (1, 2), DOMAIN["schedule"],
            DOMAIN["swap_ab"], DOMAIN["b_operand"]):
        for scheduler, splits in (("persistent", 1), ("streamk", 1), ("streamk", 2), ("streamk", 4),
                                  ("batched", 2), ("batched", 4), ("batched", 8), ("batched", 16)):
            for raster, swz in (("heuristic", 1), ("along_m", 2), ("along_n", 2), ("along_m", 4), ("along_n", 4),
                                ("along_n", 8)):
                for stages in (0, 3, 4, 5, 6):
                    p = {"tile_m": tm, "tile_n": tn, "tile_k": tk, "cluster_m": cm, "cluster_n": cn,
                         "schedule": sched, "scheduler": scheduler, "splits": splits, "raster": raster,
                         "swizzle": swz, "stages": stages, "b_operand": bop, "swap_ab": swap, "acc": acc,
                         "pdl": launch_knobs(arch)["pdl"] and scheduler != "streamk"}
                    if feasible(p, shape, arch)[0]:
                        out.append(validate(p))
    return out
