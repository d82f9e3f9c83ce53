"""Family `hopper_wgmma`: sm_90a wgmma + TMA warp-specialised kernels through the CUTLASS 3.x collective builders."""
from __future__ import annotations

import functools
import itertools
import sys
from typing import Any

from . import pricing
from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, arch_limits, ceil_div, in_16_byte_rows, launch_knobs,
                     render_feasible, uneven_waves, validate_with_defaults, validated)
from .pricing import LARGE_FLOP, POWER_LIMIT_FLOP, SINGLE_CTA_MAX_WAVES, WAVE_FILL, b_outgrows_l2, flop

# The batched split-K keeps its fp32 slices in a static workspace of this many floats (32 MiB).
SLICE_WS_FLOATS = 8 * 1024 * 1024

NAME = "hopper_wgmma"
TEMPLATE = "hopper_wgmma.cu.j2"
NEEDS_CUTLASS = True

# 64x80 and 64x112 ping-pong tiles, outside the search: 64x80 is a one-wave prior only (ONE_WAVE_WIDTHS), 64x112
# is for sweeps (timed once, data/raw_wgmma_one_wave_clusters_h200_2026-11-29_fdc7f30.json)
ONE_WAVE_ONLY_N = (80, 112)
DOMAIN: dict[str, tuple] = {
    "tile_m": (64, 128, 256),
    # multiples of 16 between the powers of two fit a tile grid to the SMs' waves (nvjet runs 96/160/176 too); CUTLASS's
    # wgmma selector builds tile_n=168 (and 152) from 8-wide atoms and its shared-memory layout then fails to compile
    "tile_n": tuple(sorted((32, 64, 96, 128, 144, 160, 176, 192, 256, *ONE_WAVE_ONLY_N))),
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
    # the kernel's operand (after swap_ab) whose TMA copies carry an L2 evict_first hint: the one its grid reads
    # once, for a cold call whose L2 is full of dirty lines (cold_twin); the stock mainloop issues no hint, so the
    # template then derives its own producer
    "l2_evict_first": ("none", "a", "b"),
    **LAUNCH_DOMAIN,
}
DEFAULTS: dict[str, Any] = {**LAUNCH_DEFAULTS, "epi_n": 0, "grid": "full", "l2_evict_first": "none"}
# What the policy's mutations and random draws move through: 32-wide tiles only where the wave-filling priors put
# them (mid shapes with few tiles, _wave_filling_tile); elsewhere they would spend search slots on a tile too small
# (the hint stays with cold twins, as in hopper_raw)
SEARCH_DOMAIN: dict[str, tuple] = {**{k: v for k, v in DOMAIN.items() if k != "l2_evict_first"},
                                   "tile_n": tuple(n for n in DOMAIN["tile_n"] if n != 32 and n not in ONE_WAVE_ONLY_N)}
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


def epilogue_reserve(p: dict[str, Any]) -> int:
    """Shared memory kept beside the operand ring for the epilogue (twice over for the batched split's fp32 slices)."""
    return max(EPILOGUE_SMEM_ESTIMATE, epilogue_smem(p)) * (2 if p["scheduler"] == "batched" else 1)


def cta_grid(p: dict[str, Any], shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """(CTAs along M, CTAs along N, swizzle in effect) as CUTLASS's sm90 tile schedulers lay out the grid
    (tile_scheduler_params.h): each side rounded up to the cluster, the swizzle capped by the grid's short side (8 needs
    6 CTAs, 4 needs 3, 2 needs 2), then each side rounded up to swizzle x cluster. A tile of the padding is a valid work
    unit there: it is loaded (zero-filled by TMA) and multiplied like any other, and only its stores are predicated
    off. Measured on the H200: 1024x12288x8192 with 128x256, cluster 2x1, swizzle 8 (16 CTA rows for 8) at 0.56 of
    cuBLASLt, the same kernel with swizzle 4 (8 rows) at 0.985 (a search, then a sweep)."""
    m, n, _ = shape
    pm, pn = (n, m) if p["swap_ab"] else (m, n)
    cm, cn = p["cluster_m"], p["cluster_n"]
    gm = ceil_div(ceil_div(pm, p["tile_m"]), cm) * cm
    gn = ceil_div(ceil_div(pn, p["tile_n"]), cn) * cn
    short = min(gm, gn)
    s = next((s for s, need in ((8, 6), (4, 3), (2, 2)) if p["swizzle"] >= s and short >= need), 1)
    return ceil_div(gm, s * cm) * s * cm, ceil_div(gn, s * cn) * s * cn, s


def _tiles(shape: tuple[int, int, int], tm: int, tn: int, swap: bool) -> int:
    """Output tiles of tm x tn over the shape, in the operand order swap_ab gives (C^T: N on wgmma's M)."""
    m, n, _ = shape
    pm, pn = (n, m) if swap else (m, n)
    return ceil_div(pm, tm) * ceil_div(pn, tn)


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
    why = why or _config_problem(p, lim) or (_shape_problem(p, shape, lim) if shape is not None else "")
    return not why, why


def _config_problem(p: dict[str, Any], lim) -> str:
    """Why a canonical config cannot build or run on any shape ('' if it can)."""
    coop = p["schedule"] == "cooperative"
    if coop and p["tile_m"] not in (128, 256):
        return "the cooperative schedule splits tile_m over 2 consumer warpgroups: tile_m must be 128 or 256"
    if not coop and p["tile_m"] not in (64, 128):
        return "the ping-pong schedule gives each consumer warpgroup a whole tile: tile_m must be 64 or 128"
    if p["scheduler"] == "streamk" and p.get("pdl"):
        return ("pdl: CUTLASS's stream-K scheduler does not build with CUTLASS_ENABLE_GDC_FOR_SM90 "
                "(sm90_tile_scheduler_stream_k.hpp, const reference)")
    if p["scheduler"] == "streamk" and not coop:
        return "CUTLASS's ping-pong kernel does not support the stream-K scheduler"
    if p["splits"] > 1 and p["scheduler"] == "persistent":
        return "splits > 1 needs the stream-K scheduler (split-K decomposition) or the batched split"
    batched = p["scheduler"] == "batched"
    if batched and p["splits"] < 2:
        return "the batched split-K needs splits >= 2"
    acc_per_thread = p["tile_m"] * p["tile_n"] // (256 if coop else 128)
    if p["acc"] == "fp16":
        acc_per_thread //= 2
    # A consumer warpgroup gets 240 registers (setmaxnreg); 192 fp32 accumulators leave room for addresses and the
    # epilogue: 256x192 cooperative builds with 0 spills (ptxas, nvcc 13.0), 256 accumulators cannot.
    if acc_per_thread > MAX_ACC_REGS:
        return f"{acc_per_thread} accumulator registers per consumer thread (limit {MAX_ACC_REGS} of 240)"
    if p["tile_n"] % 64 and p["b_operand"] == "row" and not p["swap_ab"]:
        return (f"tile_n={p['tile_n']} with an N-major B: the 128-byte shared-memory swizzle needs tile_n a "
                "multiple of 64 there")
    if p["cluster_m"] * p["cluster_n"] > 4:
        return "cluster of more than 4 CTAs"
    if p.get("epi_n") and p["tile_n"] % p["epi_n"]:
        return f"epi_n={p['epi_n']} does not divide tile_n={p['tile_n']}"
    sb = stage_bytes(p)
    need = (max(p["stages"], 2)) * sb + epilogue_reserve(p)
    if need > lim.smem_per_block:
        return f"{max(p['stages'], 2)} stages x {sb} B + epilogue > {lim.smem_per_block} B shared memory"
    return ""


def _shape_problem(p: dict[str, Any], shape: tuple[int, int, int], lim) -> str:
    """Why a config that builds cannot run `shape` ('' if it can)."""
    m, n, k = shape
    if not in_16_byte_rows(n, k):
        return f"TMA needs 16-byte strides: N={n} and K={k} must be multiples of 8"
    pm, pn = (n, m) if p["swap_ab"] else (m, n)
    if p["splits"] > 1 and p["splits"] > ceil_div(k, p["tile_k"]):
        return f"splits={p['splits']} > {ceil_div(k, p['tile_k'])} k-tiles"
    if p["scheduler"] == "batched":
        s = p["splits"]
        if k % (8 * s):
            return f"K={k} does not cut into {s} slices that start on 16-byte boundaries"
        if k // s < p["tile_k"]:
            return f"a K slice of {k // s} is shorter than tile_k={p['tile_k']}"
        if m * n * s > SLICE_WS_FLOATS:
            return f"{s} fp32 slices of {m}x{n} exceed the {SLICE_WS_FLOATS}-float workspace"
    if p["tile_m"] >= 4 * pm and p["tile_m"] > 64:
        return f"tile_m={p['tile_m']} is mostly padding for problem M={pm}"
    if p["tile_n"] >= 4 * pn and p["tile_n"] > 64:
        return f"tile_n={p['tile_n']} is mostly padding for problem N={pn}"
    if waste := _swizzle_waste(p, shape):
        return waste
    if p.get("grid") == "even":
        gm, gn, _ = cta_grid(p, shape)
        cl = p["cluster_m"] * p["cluster_n"]
        if cl > 2:
            # the scheduler fits 4-CTA clusters per GPC (116 CTAs of 132), below the sm_count the template sets
            return "grid=even takes clusters of one or two CTAs (CUTLASS packs 4-CTA clusters per GPC)"
        if why := uneven_waves(gm * gn // cl, cl, lim.num_sms):
            return why
    return ""


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
    """Feasible configs for a shape within SEARCH_DOMAIN (schedules x tiles x clusters x schedulers x raster/swizzle
    x stages)."""
    if arch != "sm_90a":
        return []
    lim = arch_limits(arch)
    return [dict(p) for p in _buildable(acc, arch) if not _shape_problem(p, shape, lim)]


@functools.lru_cache(maxsize=4)
def _buildable(acc: str, arch: str) -> tuple[dict[str, Any], ...]:
    """SEARCH_DOMAIN's canonical configs that build on `arch`, whatever the shape: a few hundred thousand checked
    once per process, so that a shape's space checks only what depends on the shape (seconds a shape before)."""
    out = []
    for tm, tn, tk, cm, cn, sched, swap, bop in itertools.product(
            SEARCH_DOMAIN["tile_m"], SEARCH_DOMAIN["tile_n"], SEARCH_DOMAIN["tile_k"], (1, 2), (1, 2),
            SEARCH_DOMAIN["schedule"], SEARCH_DOMAIN["swap_ab"], SEARCH_DOMAIN["b_operand"]):
        for scheduler, splits in (("persistent", 1), ("streamk", 1), ("streamk", 2), ("streamk", 4),
                                  ("batched", 2), ("batched", 4), ("batched", 8), ("batched", 16)):
            for raster, swz in (("heuristic", 1), ("along_m", 2), ("along_n", 2), ("along_m", 4), ("along_n", 4),
                                ("along_n", 8)):
                for stages in (0, 3, 4, 5, 6):
                    p = {"tile_m": tm, "tile_n": tn, "tile_k": tk, "cluster_m": cm, "cluster_n": cn,
                         "schedule": sched, "scheduler": scheduler, "splits": splits, "raster": raster,
                         "swizzle": swz, "stages": stages, "b_operand": bop, "swap_ab": swap, "acc": acc,
                         "pdl": launch_knobs(arch)["pdl"] and scheduler != "streamk"}
                    if feasible(p, None, arch)[0]:
                        out.append(validate(p))
    return tuple(out)


# ---------------------------------------------------------------- search: priors, shares, cost model, mutations

ORDER = 2
SHORT = "hw"
# Skinny outputs with a long K: wgmma GEMMs over K slices (batched split-K) measured 0.98-1.00 of cuBLASLt on the
# H200 where the mma.sync families reached 0.60-0.89. Giving the mma.sync families' two slots in twelve to this
# family found no better kernel in five such dev shapes
# (docs/benchmarks/data/tables/fp32_skinny_2026-11-24_186c0cf.md), yet from K = 2048 they never came within a third
# of it (ampere_cute's SHARES), so there (skinny_tma) they have none and the first batch is this family's and
# hopper_raw's.
# Output-bound small-K shapes (128x4096x128, 1024x2048x64, 128x16384x64): a persistent 128x128 tile with the TMA
# epilogue measured 0.83-0.90 of cuBLASLt there, the mma.sync families 0.73-0.79. On large shapes mma.sync reaches
# ~60% of wgmma's peak (ampere_cute measured 0.37-0.53 of cuBLASLt on all eight big dev shapes, H200), so the
# large class is this family's and the hand-written hopper_raw's.
SHARES = {"skinny_streamed": 0.6, "skinny_tma": 0.6, "skinny_long_k": 0.6, "output_bound": 0.4,
          "launch_bound": 0.0, "mid_low": 0.3, "mid_high": 0.5, "large": 0.5}
# Up to this K a wave-filling tile, 64-row tiles included, leads the batched split-K; beyond it the split leads
FILL_LEADS_MAX_K = 4096
# Up to this K a 64-row tile that fills at least HALF_FILL of the SMs once still beats the split (below)
HALF_FILL, HALF_FILL_MAX_K = 0.45, 2048
ARCH_FALLBACK = "ampere_cute"  # where wgmma does not exist, its share goes to the mma.sync kernels


def cold_twin(params: dict[str, Any], shape: tuple[int, int, int]) -> dict[str, Any] | None:
    """The same kernel for a cold single call: an L2 evict_first hint on the operand its grid reads once
    (`pricing.read_once_operand`, in the kernel's terms where swap_ab swaps A and B), or None where there is none.
    Beside the first prior it twins, in the same rounds, on four skinny long-K shapes (H200,
    docs/benchmarks/data/wgmma_cold_twin_h200_2026-11-28_2faf16c.json; every check passed): server mode 1.065-1.136x;
    back to back 1.033-1.057x for three batched splits (whose fp32 slices leave dirty lines of their own) and 0.98x
    for a persistent 128x64."""
    return pricing.read_once_twin(sys.modules[__name__], params, shape)


def runs_on(arch: str) -> bool:
    return arch == "sm_90a"


def repair(p: dict[str, Any]) -> dict[str, Any]:
    """Keep coupled knobs consistent after a mutation."""
    q = dict(p)
    if q["scheduler"] == "persistent":
        q["splits"] = 1
    if q["schedule"] == "pingpong" and q["tile_m"] == 256:
        q["tile_m"] = 128
    if q["schedule"] == "cooperative" and q["tile_m"] == 64:
        q["tile_m"] = 128
    if q["raster"] == "heuristic":
        q["swizzle"] = 1
    return q


def priors(shape: tuple[int, int, int], acc: str, arch: str = "sm_90a", mode: str = "offline") -> list[dict[str, Any]]:
    if arch != "sm_90a":
        return []
    # a swizzle that CUTLASS would cap or that pads the grid is refused: keep the prior, narrower
    family = sys.modules[__name__]
    listed = [pricing.even_grid(family, fit_swizzle(p, shape), shape) for p in _listed_priors(shape, acc)]
    # the twin where its hint pays in any mode (a batched split, whose slices it keeps in the L2); server mode's
    # searches take every prior's twin (agent.policy.priors)
    return [(cold_twin(p, shape) or p) if pricing.read_once_hint_pays(p, cold=False) else p for p in listed]


def prior(shape: tuple[int, int, int], acc: str) -> dict[str, Any]:
    m, n, k = shape
    swap = m < 128 <= n  # put the long side on wgmma's M
    pm, pn = (n, m) if swap else (m, n)
    if pm >= 128 and pn >= 256:
        tm, tn, sched = 128, 256, "cooperative"
    elif pm >= 256:
        tm, tn, sched = 256, 128, "cooperative"
    elif pm >= 128:
        tm, tn, sched = 128, 128, "cooperative"
    else:
        tm, tn, sched = 64, 128, "pingpong"
    if pn <= 64 and sched == "cooperative":
        tm, tn = 128, 64  # a skinny output: do not pad N to 128/256
    elif pn <= 128 and sched == "cooperative":
        tm, tn = 128, 128
    big = flop(shape) >= LARGE_FLOP
    return {"tile_m": tm, "tile_n": tn, "tile_k": 64, "cluster_m": 2 if big else 1, "cluster_n": 1,
            "schedule": sched, "scheduler": "persistent" if big or sched == "pingpong" else "streamk", "splits": 1,
            "raster": "heuristic", "swizzle": 1, "stages": 0,
            "b_operand": "col", "swap_ab": swap, "acc": acc}


def _listed_priors(shape: tuple[int, int, int], acc: str, sms: int = 132) -> list[dict[str, Any]]:
    """The prior plus its raster/cluster/B-layout variants that were within 3% of cuBLAS on large shapes."""
    m, n, k = shape
    base = prior(shape, acc)

    def plain(**kw: Any) -> dict[str, Any]:
        """The base with one CTA per cluster, the heuristic raster and no stream-K, then `kw`."""
        return {**base, "cluster_m": 1, "cluster_n": 1, "scheduler": "persistent", "splits": 1, "raster": "heuristic",
                "swizzle": 1, **kw}

    out = [base]
    tiles = _tiles(shape, base["tile_m"], base["tile_n"], base["swap_ab"])
    ragged = tiles > sms and pricing.wave_fill(tiles, sms) < WAVE_FILL
    if ragged:
        # The last wave of the big tile is mostly empty (12288x512x12288: 192 tiles of 128x256 = 1.45 waves); 128x128
        # tiles quantise better: ping-pong 0.994 and cooperative 0.981 there, against 0.93-0.94 for 128x256 (H200).
        out = [plain(tile_m=128, tile_n=128, schedule="pingpong"),
               plain(tile_m=128, tile_n=128, schedule="cooperative")] + out
    if k <= 512:
        # Few k-tiles: no stream-K, 128x128 tiles so that the output spreads over the SMs (measured best on
        # 1024x2048x64, 128x16384x64: cooperative; 1024x12288x256: ping-pong at 0.95 of cuBLASLt).
        coop = plain(tile_m=128, tile_n=128, schedule="cooperative", swap_ab=False)
        pp = plain(tile_m=128, tile_n=128, schedule="pingpong", swap_ab=False)
        # a large output favours ping-pong (its epilogue overlaps the other warpgroup's main loop): measured twice at
        # 0.947 on 1024x12288x256, where cooperative got 0.78; on 2M-element outputs cooperative led by 4-5%
        # Storing such an output is most of the call: CUTLASS's own epilogue tile (at most 32 columns) takes four or
        # more store rounds, each behind a barrier, per 64x128 half-tile, and 64 columns take two. A sweep (H200,
        # the same kernel with and without): 1024x12288x256 1.058 against 1.001-1.004, 2048x8192x256 0.997 against
        # 0.928, 512x16384x512 1.033 against 1.012; with the long side on wgmma's M (C^T = B^T A^T) 1.066, 1.007
        # and 1.053.
        wide_epilogue = dict(pp, swap_ab=n > m, epi_n=64)
        out = ([wide_epilogue, pp, coop] if m * n >= 2 ** 23 else [coop, pp]) + [
            plain(tile_m=64, tile_n=128, schedule="pingpong", swap_ab=False)] + out
        if (swap := _short_k_96_swap(shape, sms)) is not None:
            out.insert(0, plain(tile_m=128, tile_n=96, schedule="cooperative", swap_ab=swap))
    filling = []
    # a large shape whose base grid fits in one wave (a skinny side of 128-256) idles SMs just the same
    if k > 512 and (flop(shape) < LARGE_FLOP or tiles <= sms) and (fill := _wave_filling_tile(shape, base, sms)):
        # The base tile leaves SMs idle and stream-K's fixup does not pay for them: on 1024x2048x2048,
        # 2048x1024x4096 and 512x4096x2048 (64 tiles of 128x256, H200, back to back and server) the stream-K base
        # read 0.56-0.69 of best NVIDIA and persistent 128x128 tiles (128 of them) 0.96-0.98 cooperative, 0.94-0.97
        # ping-pong (docs/benchmarks/data/mid_shapes_h200_2026-11-26_9568339.json). From LARGE_FLOP on, with 32-64
        # tiles of 128x256 (H200, back to back): 512x4096x16384 0.58 against 0.99 for 128x128, and 0.32-0.34
        # against 0.71-0.95 for 128x64 on three shapes of 32 tiles
        # (docs/benchmarks/data/raw_half_wave_filler_h200_2026-11-26_e9fcdd6.json; with the operands swapped, which
        # the prior is not, raw_skinny_large_h200_2026-11-26_c5a56ce.json)
        tm, tn, swap = fill
        filling = [plain(tile_m=tm, tile_n=tn, schedule=s, swap_ab=swap)
                   for s in (("cooperative", "pingpong") if tm == 128 else ("pingpong",))]
    if flop(shape) >= LARGE_FLOP and base["schedule"] == "cooperative":
        out = _power_bound_priors(shape, base, ragged, waves=tiles / sms, sms=sms) + out
    if base["schedule"] == "cooperative":
        out.append(dict(base, raster="along_n", swizzle=4, scheduler="persistent", splits=1))
        if base["tile_m"] == 128 and base["tile_n"] == 256:
            out.append(dict(base, tile_m=256, tile_n=128))
        out.append(dict(base, b_operand="row"))
    # Too few output tiles to fill the machine and a long K: split K into slices, each a GEMM into fp32 partials,
    # summed by a second kernel (two sweeps, H200). 4 slices of 1024+ over 32 tiles measured 0.98-1.00 of cuBLASLt
    # on 64x2048x4096, 128x2048x4096, 256x2048x16384 and 8 slices 1.00 on 64x512x2048, where stream-K's split-K
    # fixup (2-4 us per doubling of splits) measured 0.55-0.82. Without a split the tile comes after them.
    sliced = []
    skinny = m <= 128 <= n
    # A short side of 65-255 off the 128 grid (inference batch sizes) pads every 128-row tile, and a split of up to
    # half a wave of tiles leads: on four such shapes a 2-slice split read 0.85-0.98 of best NVIDIA where the first
    # persistent proposal read 0.29-0.81 (docs/benchmarks/data/raw_skinny_odd_m_h200_2026-11-26_c5a56ce.json); on
    # four more the split listed first by this read 0.64-0.96 against 0.32-0.61 for the old first prior, and on
    # 2048x144x4096 the split listed second 0.90 against 0.28 (odd_short_side_splits_h200_2026-11-26_05cc3c2.json)
    odd_side = 64 < min(m, n) < 256 and min(m, n) % 128 != 0
    tiles_first = [("pingpong", 64, 64, skinny), ("cooperative", 128, 64, skinny), ("pingpong", 128, 128, m < n)]
    for sched, tm, tn, swap in tiles_first if skinny else tiles_first[::-1]:
        pm, pn = (n, m) if swap else (m, n)
        tiles = ceil_div(pm, tm) * ceil_div(pn, tn)
        # 64x8192x4096 (64 tiles of 128x64): 2 slices 0.83, no split 0.975; 128-wide tiles on a 64-wide output pad
        if tiles > (sms // 2 if odd_side else 40) or k < 1024 or tn > max(64, pn) or (tm == 64 and pn > 64):
            continue
        # as many slices as fill the SMs once, each at least 256 long (64x512x2048: 8 slices 1.00, 4 slices 0.99)
        slices = [s for s in (2, 4, 8) if _slices_fit(tiles, k, s, sms)]
        if slices:
            q = plain(tile_m=tm, tile_n=tn, schedule=sched, swap_ab=swap, scheduler="batched", splits=slices[-1])
            if b_outgrows_l2(shape):
                # Each slice reads its stretch of B once, from DRAM: read as stored (N-major), it took 4% less
                # time and energy per call than through B_col_major on 256x2048x16384 (one H100,
                # power-steady, 1.051 against 1.011 of cuBLASLt in all three rounds; in a campaign five of six
                # N-major twins 1.006-1.012 against 0.962-0.973). The K-major twin stays listed right after it.
                sliced.append(dict(q, b_operand="row"))
            sliced.append(q)
    # where the cap leaves no split and no tile fills the SMs (256x4096x8192 keeps its 128x64: 0.94), the 128-row
    # tile or split that fills the most, unless that is the base tile itself
    wave = None if sliced or filling or pricing.wave_fill(tiles, sms) >= WAVE_FILL else _wave_split(shape, sms)
    if wave and (wave[2] > 1 or (base["tile_m"], base["tile_n"], base["swap_ab"]) != (128, *wave[:2])):
        tn, swap, s = wave
        sliced = [plain(tile_m=128, tile_n=tn, schedule="cooperative", swap_ab=swap)] if s == 1 else [
            plain(tile_m=128, tile_n=tn, schedule="cooperative", swap_ab=swap, scheduler="batched", splits=s,
                  b_operand="row" if b_outgrows_l2(shape) and tn % 64 == 0 else "col")]
    # Where small tiles fill the SMs once, they beat the split on K up to 4096: on ten shapes of 128-512 x
    # 512-2048 x 1024-4096 (H200) the best of them read 1.03-1.26 of best NVIDIA back to back where the split read
    # 0.66-1.00, and 0.92-0.96 in server mode against 0.63-0.88, except 128x2048x4096, where the split kept server
    # mode (0.996 against 0.957). nvjet picks such tiles there too (Nsight Compute: 64x64 in 2x1 clusters with 13
    # stages on 512x1024x1024, 32x64 with 16 on 256x1024x1024)
    # (docs/benchmarks/data/small_tiles_h200_2026-11-26_c1976b1.json).
    # where no 128-row tile fills the SMs, the one-wave tiles below go first: the 64-row fillers and splits above read
    # 0.47-0.82 of best NVIDIA where they read 0.85-0.94, on four of the ten shapes timed
    one_wave = [] if any(q["tile_m"] == 128 for q in filling) else [plain(**q) for q in _one_wave_tiles(shape, sms)]
    out = one_wave + (filling + sliced if k <= FILL_LEADS_MAX_K else sliced + filling) + out
    for swap, tm, tn in ((base["swap_ab"], 128, 128), (m <= 128 <= n, 128, 64)):
        tiles = _tiles(shape, tm, tn, swap)
        if tiles >= 66 or ceil_div(k, 64) < 16:
            continue
        out.append(plain(tile_m=tm, tile_n=tn, schedule="cooperative", swap_ab=swap))
    if m <= 64 and b_outgrows_l2(shape):
        # A few rows against a B larger than the L2 (64x8192x4096: 64 MB each call): a DRAM stream, where a 64x64
        # tile puts a CTA on every SM that reads B in its row-major layout (cuBLASLt's pick there is that tile, NN,
        # Nsight Compute). Against the 128x64 prior above, in one process each: 0.980 / 0.952 in graph
        # replay, 1.025 / 0.990 offline with PDL; 1.026 of cuBLASLt in graphs on another machine.
        stream = {**base, "tile_m": 64, "tile_n": 64, "tile_k": 64, "cluster_m": 1, "cluster_n": 1,
                  "schedule": "pingpong", "scheduler": "persistent", "splits": 1, "raster": "along_n", "swizzle": 1,
                  "stages": 0, "b_operand": "row", "swap_ab": True}
        out = [stream] + [q for q in out if q != stream]
    # Stream-K last: CUTLASS allocates and clears its workspace inside every call, a few microseconds that a shape
    # below the power limit does not win back. Its priors read 0.31-0.69 of best NVIDIA on ten mid shapes outside
    # both samples (K 1024-4096, H200, back to back and server), below a persistent or batched prior of the same
    # list on every one (docs/benchmarks/data/mid_shapes_h200_2026-11-26_9568339.json).
    return sorted(out, key=lambda q: q["scheduler"] == "streamk")


# The 40-tile cap above leaves skinny outputs of more tiles with no split: from K = 8192, where no tile fills the SMs
# either, the 128-row tile or split that fills the most of one wave. On seven such shapes of K = 8192-16384 outside
# every sample (H200, every mode) the pick was the fastest of up to six splits on six and 1% behind on the seventh,
# 128x96 in two slices ahead of 128x192 in four on six
# (docs/benchmarks/data/wgmma_wave_split_h200_2026-11-27_a897fc4.json); in place of the family's first prior there
# (persistent 128x256, 0.28-0.39 of best NVIDIA) it read 0.87-1.03 back to back and raised the first batch's best by
# x1.067 back to back, x1.065 separated and x1.027 cold (geomeans, worse on none;
# wgmma_wave_split_first_batch_ab_h200_2026-11-27_a897fc4.json). Where no split fills 90%, the fullest one-wave split
# (0.74-0.85) still led every two-wave split and unsplit 128x96 and 128x128 on four more (0.89-0.94 back to back;
# wgmma_wave_gap_h200_2026-11-27_a897fc4.json), and where an unsplit tile fills as much as a split of a tile twice as
# wide, the unsplit one led on four of five (0.89-0.97 against 0.78-0.91; on 896x896x12288 0.890 against 0.936;
# wgmma_wave_tie_h200_2026-11-27_a897fc4.json).
WAVE_SPLIT_FILL = 0.7
WAVE_SPLIT_MIN_K = 8192


def _slices_fit(tiles: int, k: int, s: int, sms: int) -> bool:
    """`tiles` in `s` K slices run in one wave, each slice starting on a 16-byte boundary and at least 256 long."""
    return tiles * s <= sms and k % (8 * s) == 0 and k // s >= 256


def _wave_split(shape: tuple[int, int, int], sms: int = 132) -> tuple[int, bool, int] | None:
    """(tile_n, swap_ab, slices) of the cooperative 128-row tile, unsplit or batched over 2-8 K slices, whose tiles x
    slices fill the most of one wave, padding counted as idle, if that is at least WAVE_SPLIT_FILL; among equals the
    long side on wgmma's M, then fewer slices (an unsplit tile first), then the wider tile. None below
    WAVE_SPLIT_MIN_K or on a side under 128."""
    m, n, k = shape
    if k < WAVE_SPLIT_MIN_K or min(m, n) < 128:
        return None
    picks = []
    for swap in (n > m, n <= m):
        pn = m if swap else n
        for tn in (64, 96, 128, 192, 256):
            tiles = _tiles(shape, 128, tn, swap)
            for s in (1, 2, 4, 8):
                fill = m * n * s / (sms * 128 * tn)  # the same in either order: padding is idle
                if tn <= pn and _slices_fit(tiles, k, s, sms) and fill >= WAVE_SPLIT_FILL:
                    picks.append(((round(fill, 6), swap == (n > m), -s, tn), (tn, swap, s)))
    return max(picks)[1] if picks else None


# Mid shapes where the 64x64 grid takes more than a wave and no tile of the rules above fills (most of them off the
# 128 grid; hopper_raw._one_wave_tiles): this family's first priors there, 128x256 and 256x128, read 0.36-0.73 of
# best NVIDIA in 24 of 24 timings. A 64-row ping-pong tile whose grid fits one wave, in each operand order: on ten
# shapes (K = 2624-7296, H200, separated and server mode) the better order read 0.85-1.04 of best NVIDIA separated,
# against 0.61-0.82 for this family's first batch slots on the seven where hopper_raw's tiles did not lead
# (raw_wgmma_one_wave_h200_2026-11-29_afcb251.json); as two slots of the first batch on 13 fresh shapes the batch's
# best rose 15% separated, 10% in server mode and 14% back to back, none lower
# (wgmma_one_wave_first_batch_ab_h200_2026-11-29_830fcc1.json). 128x96 cooperative one-wave tiles read below on all
# ten; the 64-row tiles in 2x1, 1x2, 4x1 or 2x2 clusters below the tile alone on nine of ten
# (raw_wgmma_one_wave_clusters_h200_2026-11-29_fdc7f30.json).
# Which width: the one whose k-block costs least (pricing.one_wave_cost) times the share its last tile pads the
# side it spans. A padded tile costs a one-wave grid far more than its idle share: 64x96 over 232 rows (24%
# padding) ran 45% longer than 64x80 over them (3%) with the same 105 CTAs, tensor pipe 48% against 59%
# (one_wave_pad_ncu_h200_2026-11-29_d0b7209/). Chosen on 29 shape-order-modes of both probes and the 64x80 A/B
# (wgmma_80_first_batch_ab_h200_2026-11-29_d0b7209.json), then timed on 16 shape-orders of twelve fresh shapes: the
# pick read 0.982 of the order's best width separated, 0.987 in server mode and 0.985 back to back, where the
# narrowest width that fits read 0.917 / 0.919 / 0.932 and the cost without the padding 0.962 / 0.968 / 0.963
# (wgmma_one_wave_width_ab_h200_2026-11-29_baf8ddb.json).
ONE_WAVE_WIDTHS = (80, 96, 128, 144, 160, 176, 192)


def _one_wave_width(shape: tuple[int, int, int], swap: bool, sms: int) -> tuple[float, int] | None:
    """(cost, tile_n) of the ONE_WAVE_WIDTHS tile whose 64-row grid fits one wave in this operand order at the least
    one-wave cost times the share its tiles pad the side they span (the comment above says why)."""
    side = shape[0] if swap else shape[1]
    priced = [(pricing.one_wave_cost(64, tn, t) * ceil_div(side, tn) * tn / side, tn)
              for tn in ONE_WAVE_WIDTHS if (t := _tiles(shape, 64, tn, swap)) <= sms]
    return min(priced) if priced else None


def _one_wave_tiles(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """Both operand orders' cheapest 64-row ping-pong tile that fits one wave (_one_wave_width), cheaper first, where
    the 64x64 grid takes more than a wave (both sides from 128, K in pricing.ONE_WAVE_K, below LARGE_FLOP); as knobs
    over a plain persistent prior."""
    if min(shape[:2]) < 128 or flop(shape) >= LARGE_FLOP or not pricing.past_a_wave_at_one_wave_k(shape, sms):
        return []
    ranked = [(*w, swap) for swap in (False, True) if (w := _one_wave_width(shape, swap, sms))]
    return [{"tile_m": 64, "tile_n": tn, "schedule": "pingpong", "swap_ab": swap} for _, tn, swap in sorted(ranked)]


def _grid_fill(shape: tuple[int, int, int], tm: int, tn: int, swap: bool, sms: int, padding_idle: bool = True) -> float:
    """The share of its waves that a grid of tm x tn tiles keeps busy (pricing.wave_fill), times the share of the
    tiles' area inside the output where the padding counts as idle."""
    m, n, _ = shape
    pm, pn = (n, m) if swap else (m, n)
    gm, gn = ceil_div(pm, tm), ceil_div(pn, tn)
    useful = pm * pn / (gm * tm * gn * tn) if padding_idle else 1.0
    return pricing.wave_fill(gm * gn, sms) * useful


def _short_k_96_swap(shape: tuple[int, int, int], sms: int) -> bool | None:
    """K = 256-512, where 128x128 tiles leave more than a fifth of their waves idle and 128x96 tiles (padding idle)
    fill them within two waves: the swap_ab that puts the short side on the tile's 128 rows, else None. Against the
    listed 128x128, same rounds: one tile-row beside N = 12288 (128 tiles of 128x96 against 96) 1.237 against 1.180
    (K = 256) and 1.160 against 1.095 (K = 512) of best NVIDIA back to back, 0.930 against 0.887 and 0.956 against
    0.894 in server mode (H100, docs/benchmarks/data/short_k_96_fill_h100_2026-11-28_f3fcd89.json); two tile-rows
    (256x12288x256 / 512) 1.111 / 1.111 against 1.013 / 0.967 and 0.854 / 0.866 against 0.774 / 0.758; the operands
    the other way round (12288x128x256 / 512, 12288x256x512) 1.250 / 1.196 / 1.113 against 1.233 / 1.167 / 0.977 and
    0.936 / 0.956 / 0.861 against 0.879 / 0.882 / 0.746, where 128x96 across the short side read 0.62-0.71 in server
    mode (H200, docs/benchmarks/data/short_k_96_both_orders_h200_2026-11-28_d488305.json). Beyond two waves more
    epilogues a wave may cost what the fill gains."""
    swap = shape[0] > shape[1]
    if not (256 <= shape[2] <= 512 and _tiles(shape, 128, 96, swap) <= 2 * sms):
        return None
    return swap if _grid_fill(shape, 128, 128, swap, sms) < WAVE_FILL <= _grid_fill(shape, 128, 96, swap, sms) else None


def _wave_filling_tile(shape: tuple[int, int, int], base: dict[str, Any],
                       sms: int) -> tuple[int, int, bool] | None:
    """Where the base tile's grid fills less than WAVE_FILL of its waves, the largest smaller tile that fills at
    least that, with its swap_ab: 128x128 or 128x64 in the base's operand order (from 2^31 FLOP, below a base larger
    than 128x128, 128x192 and 128x96 in either order too, padding counted as idle), else (K up to FILL_LEADS_MAX_K)
    64x128, 64x64 or 64x32 with the longer side on wgmma's M. Where none does and K is at most HALF_FILL_MAX_K,
    the one that fills the most, if that is HALF_FILL or more: on 256x1024x1024, 512x512x1024, 128x2048x1024,
    256x1024x2048 and 128x1024x2048, 64 such tiles read 1.11-1.17 of best NVIDIA back to back where the batched
    split read 0.75-0.98 (H200); at K=4096 they were even with it (0.99-1.05 against 0.96-1.00). None where the
    base fills the SMs or no tile qualifies."""
    m, n, k = shape

    def fill(tm: int, tn: int, swap: bool) -> float:
        # the 192- and 96-wide tiles count their padding as idle, or 128x192 would "fill" a 256 side with two tiles
        return _grid_fill(shape, tm, tn, swap, sms, padding_idle=tn in (96, 192))

    if fill(base["tile_m"], base["tile_n"], base["swap_ab"]) >= WAVE_FILL:
        return None
    b = base["swap_ab"]
    tiles = [(128, 128, b), (128, 64, b)]
    if flop(shape) >= 2 ** 31 and base["tile_m"] * base["tile_n"] > 128 * 128:
        # Sides that no power of two cuts into one wave (96 tiles of 128x256 beside a 12288 side): 128x192 and
        # 128x96 too, in either operand order. On 12288x256x8192-16384 (H200, every mode) the swapped 128x192 (128
        # tiles) read 0.98-1.00 of best NVIDIA where the first four proposals read 0.62-0.89; on
        # 128x12288x12288/16384 128x96 read 0.91-0.93 against 0.61-0.65 for 128x256. From 2^31 FLOP (the mid
        # classes; no grid shape below has a 12288 side and K > 512): on ten shapes of 2^31.6-2^35 beside a 12288
        # side they led the old first priors back to back by 0.8-45% (128x12288x8192 0.93 against 0.64-0.70,
        # 256x12288x2048 1.02 against 0.85-0.88, 128x12288x1024 1.13 against 1.02). Not below a 128x128 base: its
        # 96 tiles on 12288x128x12288/16384 read 0.98, the swapped 128x96 0.96-0.98
        # (docs/benchmarks/data/one_wave_tiles_h200_2026-11-26_8f4336c.json).
        tiles = [(128, 192, b), (128, 192, not b), (128, 128, b), (128, 96, b), (128, 96, not b), (128, 64, b)]
    if k <= FILL_LEADS_MAX_K:  # longer K is the batched split's (skinny long-K winners); unmeasured there
        tiles += [(64, 128, n > m), (64, 64, n > m), (64, 32, n > m)]
    smaller = [t for t in tiles if t[0] * t[1] < base["tile_m"] * base["tile_n"]]
    full = next((t for t in smaller if fill(*t) >= WAVE_FILL), None)
    if full or k > HALF_FILL_MAX_K or not smaller:
        return full
    best = max(smaller, key=lambda t: fill(*t))  # the first of equals: the larger tile
    return best if fill(*best) >= HALF_FILL else None


def _power_bound_priors(shape: tuple[int, int, int], base: dict[str, Any], ragged: bool,
                        waves: float, sms: int = 132) -> list[dict[str, Any]]:
    """Large GEMMs run at the GPU's power limit, where DRAM traffic costs clock (docs/evaluator.md, power-steady
    timing). On 16384x12288x8192 (H200, power-steady) a 128x256 tile moved 10.5 GB of DRAM with swizzle 2, 7.5 GB
    with swizzle 8 (0.93 -> 0.98 of cuBLASLt), and 256x192, the largest tile whose 192 accumulators per thread fit,
    5.8 GB at 0.995. So: 256x192 wherever 192 divides a side, then the base tile with the widest swizzle unless its
    last wave is mostly empty (`ragged`)."""
    m, n, k = shape
    raster = "along_n" if n >= m else "along_m"
    widest = dict(base, raster=raster, swizzle=8, scheduler="persistent", splits=1)
    out = [] if ragged else [widest]
    if 1.0 < waves <= SINGLE_CTA_MAX_WAVES and not ragged:
        # Up to four waves the pair's multicast saves less than its coupling costs (power-steady, two
        # H100s, the same 128x256 swizzle-8 kernel with 1x1 and 2x1 clusters: +0.6% at 3.9 waves on 8192x2048x8192,
        # +0.8-0.9% at 2.9 on 1024x12288x8192; from 7.8 waves on the pair leads by 1-2%). The release's kernel for
        # 8192x2048x8192 is such a 1x1 and led our 2x1 winner there. Along N even where N < M: on 8192x2048x8192 the
        # 1x1 along M ran 0.8% behind it in every round, where the 2x1 showed no difference.
        out.insert(0, dict(widest, cluster_m=1, cluster_n=1, raster="along_n"))
    if waves <= 1.0:
        # One wave (1024x4096x8192, 4096x1024x12288: 128 tiles): no later wave reuses what a cluster multicasts, and
        # every epilogue runs at once, unhidden. Power-steady on the H200, 1024x4096x8192: one CTA per cluster
        # 0.1067 ms against 0.1078 for 2x1 (the SM clock +1%), epi_n=128 0.1075; cuBLASLt 0.1060.
        # (epi_n=128 only where it divides the tile: a 128x64 base beside a side of 64 took an infeasible prior)
        epi = {"epi_n": 128} if base["tile_n"] % 128 == 0 else {}
        out.insert(0, dict(base, cluster_m=1, cluster_n=1, b_operand="row", raster=raster, swizzle=4,
                           scheduler="persistent", splits=1, **epi))
    wide = dict(base, tile_m=256, tile_n=192, cluster_m=2, cluster_n=1, raster=raster, swizzle=8,
                scheduler="persistent", splits=1)
    if n % 192 == 0 and m >= 256:
        wide = dict(wide, swap_ab=False)
    elif m % 192 == 0 and n % 256 == 0:
        # C^T = B^T A^T puts M on the 192 side (12288x512x12288: 1.02 of cuBLASLt against 0.98 for 128x128)
        wide = dict(wide, swap_ab=True, cluster_m=1, raster="along_n" if m >= n else "along_m")
    else:
        return out
    tiles = _tiles(shape, 256, 192, wide["swap_ab"])
    # not where its grid fills at most half a wave (64 tiles on 256x12288, 384x8192, 768x4096, 3072x1024): 0.58-0.63
    # of best NVIDIA on seven such shapes where the one-wave tile (_wave_filling_tile) read 0.97-1.00. At 96 tiles
    # (12288x384x8192) it led 128x128 by 0.82 to 0.75 (one_wave_tiles_h200_2026-11-26_8f4336c.json).
    if tiles > sms // 2:
        out.insert(0, wide)
    return out


def ring_stages(p: dict[str, Any], arch: str) -> int:
    """The operand ring's depth: the config's stages, or as many as fit beside the epilogue (stages=0)."""
    if p["stages"]:
        return p["stages"]
    return (arch_limits(arch).smem_per_block - epilogue_reserve(p)) // stage_bytes(p)


def estimate_us(p: dict[str, Any], shape: tuple[int, int, int], arch: str) -> float:
    m, n, k = shape
    sms = pricing.arch_limits(arch).num_sms
    tm, tn, tk = p["tile_m"], p["tile_n"], p["tile_k"]
    gm, gn, _ = cta_grid(p, shape)  # CUTLASS computes the tiles that pad the grid to the cluster
    tiles = gm * gn
    coop = p["schedule"] == "cooperative"
    eff = pricing.WGMMA_TILE_EFF.get((tm, tn), 0.7)
    if p["scheduler"] == "batched" and tiles * p["splits"] <= sms and tm == 128 and tn >= 96:
        eff = max(eff, pricing.ONE_WAVE_SPLIT_EFF)
    if not coop and (tm, tn) in ((128, 128), (64, 256), (128, 192)):
        eff *= 1.02  # ping-pong overlaps one warpgroup's epilogue with the other's mainloop
    if p["b_operand"] == "row":
        # K slices that each stream their stretch of B from DRAM read it faster as stored: 4% less time and
        # energy per call on 256x2048x16384; elsewhere the N-major B measured ~1% behind
        eff *= 1.03 if p["scheduler"] == "batched" and b_outgrows_l2(shape) else 0.99
    if tk == 128:
        eff *= 0.9  # half the stages of tile_k=64 in the same shared memory: measured 10-40% slower on H200
    cl = p["cluster_m"] * p["cluster_n"]
    # a one-wave grid gains nothing from multicast (no later wave reuses the data) and pays its coupling: 1x1
    # measured 1% faster than 2x1 on 1024x4096x8192, and 4-CTA clusters do not all fit at once there (0.62)
    eff *= {1: pricing.single_cta_price(tiles / sms), 2: 1.0, 4: 0.99}[cl] if tiles > sms else \
        {1: 1.0, 2: 0.99, 4: 0.9}[cl]
    if p["scheduler"] == "batched":
        eff *= pricing.BATCHED_CLUSTER_PRICE.get((p["cluster_m"], p["cluster_n"]), 1.0)
    padded = 2.0 * gm * tm * gn * tn * k
    # priced against the persistent grid of the same tiles (pricing.STREAMK_POWER_CREDIT says what was measured)
    streamk_at_power_limit = p["scheduler"] == "streamk" and 2.0 * m * n * k >= POWER_LIMIT_FLOP
    if streamk_at_power_limit:
        units = tiles
        waves = tiles / sms
        tail = ceil_div(tiles, sms) / waves if tiles > sms else 1.0 / waves
        cut = pricing.STREAMK_FIXUP_WAVES / max(waves, 1.0) if tiles % sms else 0.0
        rel = (1.0 + pricing.STREAMK_POWER_CREDIT * (1.0 / tail - 1.0) + cut
               + pricing.STREAMK_SPLIT_POWER * (p["splits"] - 1))
        waves_factor = rel * (tail if tiles > sms else 1.0)
        fix = 0.0
    elif p["scheduler"] == "streamk":
        units = tiles * p["splits"] if p["splits"] > 1 else max(tiles, sms)
        waves_factor = 1.0 / pricing.STREAMK_SHARED_SPEED if p["splits"] == 1 else ceil_div(units, sms) * sms / units
        fix = ((2.0 if (p["splits"] > 1 or tiles % sms) else 0.0)
               + pricing.STREAMK_SPLIT_US * p["splits"] * (p["splits"] > 1))
        # the partial sums of a tile meet in turn, CTA after CTA, in every wave (pricing.STREAMK_PEER_PASSES)
        peers = p["splits"] - 1 if p["splits"] > 1 else (sms / tiles - 1.0 if tiles < sms else 0.0)
        fix += 1e6 * pricing.STREAMK_PEER_PASSES * 4.0 * tm * tn * peers * ceil_div(units, sms) / (pricing.L2_BW / sms)
    elif p["scheduler"] == "batched":
        units = tiles * p["splits"]
        waves_factor = ceil_div(units, sms) * sms / units
        fix = (pricing.SLICE_SUM_US + pricing.SLICE_PASS_US * (p["splits"] - 2)
               + 1e6 * (p["splits"] * 4.0 + 2.0) * m * n / pricing.L2_BW)
        # the slices' fp32 partials leave the SMs at the end of each CTA's run, in a one-wave grid all at once, and
        # go on to DRAM unless the operand read once is hinted evict_first: then they wait in the L2 for the summing
        # kernel (over 25 probe files with batched rows the summed Spearman went 14.08 -> 14.45, the first pick
        # 1.048 -> 1.043 of the fastest; no first batch of 400 grid shapes moved)
        if p.get("l2_evict_first", "none") == "none":
            fix += 1e6 * p["splits"] * 4.0 * m * n / pricing.DRAM_BW
    else:
        units = tiles
        waves_factor = ceil_div(tiles, sms) * sms / tiles if tiles > sms else 1.0
        fix = 0.0
    busy = min(1.0, units / sms)
    t_compute = padded / (pricing.WGMMA_PEAK * eff * busy) * waves_factor
    uniq = 2.0 * (m * k + n * k + m * n)
    t_mem = uniq / pricing.DRAM_BW
    sliced = p["scheduler"] != "persistent" and not streamk_at_power_limit
    ktiles = ceil_div(k, pricing.CHAIN_BLOCK_K) // (p["splits"] if sliced else 1)
    # each SM still walks a wave's share of every k-tile in turn: an even split shortens no SM's chain
    even = p["scheduler"] == "streamk" and not streamk_at_power_limit
    t_chain = ktiles * 0.06e-6 * (1 if even else ceil_div(units, sms))
    stages_pen = 1.0 if p["stages"] == 0 else (1.03 if p["stages"] < 4 else 1.0)
    if tk == 128:
        stages_pen *= pricing.TK128_RING_PRICE.get(ring_stages(p, arch), 1.0)
    # wider swizzles keep more of A and B in L2; at the power limit every DRAM byte costs clock (16384x12288x8192,
    # 128x256, power-steady: swizzle 2 / 4 / 8 at 0.93 / 0.97 / 0.98 of cuBLASLt)
    raster_gain = {1: 1.0, 2: 0.98, 4: 0.96, 8: 0.95}[p["swizzle"]] if 2.0 * m * n * k > POWER_LIMIT_FLOP \
        else 1.0
    raster_gain *= pricing.even_grid_gain(p, shape)
    t = (max(t_compute, t_mem) + t_chain) * stages_pen * raster_gain
    return t * 1e6 + pricing.LAUNCH_US + pricing.CUTLASS_HOST_US + fix
