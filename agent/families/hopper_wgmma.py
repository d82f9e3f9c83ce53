"""Family `hopper_wgmma`: sm_90a wgmma + TMA warp-specialised kernels through the CUTLASS 3.x collective builders."""
from __future__ import annotations

import itertools
from typing import Any

from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, ceil_div, launch_knobs, render_feasible, uneven_waves,
                     validate_with_defaults, validated)

# The batched split-K keeps its fp32 slices in a static workspace of this many floats (32 MiB).
SLICE_WS_FLOATS = 8 * 1024 * 1024

NAME = "hopper_wgmma"
TEMPLATE = "hopper_wgmma.cu.j2"
NEEDS_CUTLASS = True

DOMAIN: dict[str, tuple] = {
    "tile_m": (64, 128, 256),
    # multiples of 16 between the powers of two fit a tile grid to the SMs' waves (nvjet runs 96/160/176 too); CUTLASS's
    # wgmma selector builds tile_n=168 from 8-wide atoms and its shared-memory layout then fails to compile
    "tile_n": (64, 96, 128, 144, 160, 176, 192, 256),
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
    # columns of the epilogue's sub-tile (0: CUTLASS's choice, 32 or fewer); each sub-tile is one register -> shared
    # memory -> TMA store round with a barrier, and a one-wave grid runs every CTA's epilogue at once, unhidden
    "epi_n": (0, 64, 128),
    # the persistent scheduler's CTAs: full (CUTLASS's count, about one per SM) or even (the fewest that take the
    # same waves, as in hopper_raw: every CTA as many tiles)
    "grid": ("full", "even"),
    **LAUNCH_DOMAIN,
}
DEFAULTS: dict[str, Any] = {**LAUNCH_DEFAULTS, "epi_n": 0, "grid": "full"}
EPILOGUE_SMEM_ESTIMATE = 32 * 1024
MAX_ACC_REGS = 192


def validate(params: dict[str, Any]) -> dict[str, Any]:
    p = validate_with_defaults(params, DOMAIN, DEFAULTS)
    if p.get("scheduler") != "persistent":
        p.pop("grid", None)  # stream-K and the batched split size their own grids: one kernel, one identity
    return p


def stage_bytes(p: dict[str, Any]) -> int:
    return (p["tile_m"] + p["tile_n"]) * p["tile_k"] * 2


def epilogue_smem(p: dict[str, Any]) -> int:
    """Shared memory of an explicit epilogue sub-tile: two stages of (128 or 64) x epi_n elements of D."""
    rows = 128 if p["schedule"] == "cooperative" else 64
    return 2 * rows * p.get("epi_n", 0) * (4 if p["scheduler"] == "batched" else 2)


def cta_grid(p: dict[str, Any], shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """(CTAs along M, CTAs along N, swizzle in effect) as CUTLASS's sm90 tile schedulers lay out the grid
    (tile_scheduler_params.h): each side rounded up to the cluster, the swizzle capped by the grid's short side (8 needs
    6 CTAs, 4 needs 3, 2 needs 2), then each side rounded up to swizzle x cluster. A tile of the padding is a valid work
    unit there: it is loaded (zero-filled by TMA) and multiplied like any other, and only its stores are predicated
    off. Measured on the H200: 1024x12288x8192 with 128x256, cluster 2x1, swizzle 8 (16 CTA rows for 8) at 0.56 of
    cuBLASLt, the same kernel with swizzle 4 (8 rows) at 0.985 (run 4's search; sweep r9)."""
    m, n, _ = shape
    pm, pn = (n, m) if p["swap_ab"] else (m, n)
    cm, cn = p["cluster_m"], p["cluster_n"]
    gm = ceil_div(ceil_div(pm, p["tile_m"]), cm) * cm
    gn = ceil_div(ceil_div(pn, p["tile_n"]), cn) * cn
    short = min(gm, gn)
    s = next((s for s, need in ((8, 6), (4, 3), (2, 2)) if p["swizzle"] >= s and short >= need), 1)
    return ceil_div(gm, s * cm) * s * cm, ceil_div(gn, s * cn) * s * cn, s


def fit_swizzle(p: dict[str, Any], shape: tuple[int, int, int]) -> dict[str, Any]:
    """`p` with the widest swizzle up to its own that CUTLASS applies as asked and that adds no tiles to the grid."""
    for s in sorted((s for s in DOMAIN["swizzle"] if s <= p["swizzle"]), reverse=True):
        q = dict(p, swizzle=s)
        if _swizzle_waste(q, shape) is None:
            return q
    return dict(p, swizzle=1)


def _swizzle_waste(p: dict[str, Any], shape: tuple[int, int, int]) -> str | None:
    gm, gn, s = cta_grid(p, shape)
    if s < p["swizzle"]:
        return (f"CUTLASS caps swizzle {p['swizzle']} at {s} on this grid (its short side is too short): the same "
                f"kernel as swizzle {s}")
    base_m, base_n, _ = cta_grid(dict(p, swizzle=1), shape)
    if gm * gn > base_m * base_n:
        return (f"swizzle {s} pads the CTA grid from {base_m}x{base_n} to {gm}x{gn}; CUTLASS computes the padding's "
                f"tiles like real ones")
    return None


def feasible(params: dict[str, Any], shape: tuple[int, int, int] | None, arch: str) -> tuple[bool, str]:
    p, lim, why = validated(params, validate, arch, "sm_90a", "wgmma/TMA kernels")
    if why:
        return False, why
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
    if p["tile_n"] % 64 and p["b_operand"] == "row" and not p["swap_ab"]:
        return False, (f"tile_n={p['tile_n']} with an N-major B: the 128-byte shared-memory swizzle needs tile_n a "
                       "multiple of 64 there")
    if p["cluster_m"] * p["cluster_n"] > 4:
        return False, "cluster of more than 4 CTAs"
    if p.get("epi_n") and p["tile_n"] % p["epi_n"]:
        return False, f"epi_n={p['epi_n']} does not divide tile_n={p['tile_n']}"
    sb = stage_bytes(p)
    need = (max(p["stages"], 2)) * sb + max(EPILOGUE_SMEM_ESTIMATE, epilogue_smem(p)) * (2 if batched else 1)
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
        if waste := _swizzle_waste(p, shape):
            return False, waste
        if p.get("grid") == "even":
            gm, gn, _ = cta_grid(p, shape)
            cl = p["cluster_m"] * p["cluster_n"]
            if cl > 2:
                # the scheduler fits 4-CTA clusters per GPC (116 CTAs of 132), below the sm_count the template sets
                return False, "grid=even takes clusters of one or two CTAs (CUTLASS packs 4-CTA clusters per GPC)"
            if why := uneven_waves(gm * gn // cl, cl, lim.num_sms):
                return False, why
    return True, ""


# CuTe's wgmma selector takes the widest atom whose N divides tile_n: from these without
# CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED, from every multiple of 8 up to 256 with it.
_STANDARD_WGMMA_N = (256, 192, 128, 96, 64, 32, 16, 8)


def needs_extended_wgmma(tile_n: int) -> bool:
    """Whether tile_n gets a narrower atom without the extended wgmma shapes (144 would run as nine n16 atoms).
    The template then defines the macro itself: the shapes cost ~25 s of nvcc front end in every file that
    includes CuTe, so the harness does not pass it, and an archived kernel must build the same in any harness."""
    standard = next(n for n in _STANDARD_WGMMA_N if tile_n % n == 0)
    extended = next(n for n in range(256, 0, -8) if tile_n % n == 0)
    return extended != standard


def render(params: dict[str, Any]) -> str:
    p = validate(params)
    return render_feasible("hopper_wgmma", TEMPLATE, p, feasible, defaults=DEFAULTS, ws_floats=SLICE_WS_FLOATS,
                           extended_wgmma=needs_extended_wgmma(p["tile_n"]))


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
