"""Family `hopper_raw`: a hand-written sm_90a TMA + wgmma warp-specialised persistent GEMM, without CUTLASS's
collectives (the template says why), fp32 accumulation, K-major A and B (B_col_major)."""
from __future__ import annotations

import itertools
import sys
from typing import Any

from . import pricing
from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, ceil_div, in_16_byte_rows, kernel_shape, launch_knobs,
                     render_feasible, smem_problem, uneven_waves, validate_with_defaults, validated)
from .grid_order import (GPC_BAND_WAVES, GPC_BAND_WIDTHS, GPC_PANEL_EXP, GROUPS, gpc_band, one_wave_band, orders,
                         run_panels, square_band, widest_band)
from .pricing import LARGE_FLOP, POWER_LIMIT_FLOP, WAVE_FILL, flop

NAME = "hopper_raw"
TEMPLATE = "hopper_raw.cu.j2"
# for cutlass/cuda_host_adapter.hpp: the driver's tensor-map encoder, looked up by CUTLASS (the screen refuses a
# candidate that names the lookup itself, and the build links no libcuda to call it directly)
NEEDS_CUTLASS = True

# tile widths between 64 and 128 for one-wave grids (_one_wave_tiles): priors and sweeps only, so that the search's
# one-knob moves from 64 and 128 stay what they were
ONE_WAVE_ONLY_N = (80, 96, 112)
DOMAIN: dict[str, tuple] = {
    # two consumer warpgroups of tile_m/2 rows, one or two m64 wgmma atoms each; at 64 rows both take every row and
    # half the columns each (sweeps and priors only: _wave_filling_priors from M = 512, _streaming_priors to M = 64,
    # _cluster_split_prior where N = 128); 192 rows only so (schedule=cooperative_n)
    "tile_m": (64, 128, 192, 256),
    # 32: a 64-row tile only (each consumer an m64n16 atom), for M <= 64, where NVIDIA streams B through one kernel of
    # 64 CTAs of 32 columns (docs/benchmarks/data/dev_ncu_h100_2026-11-26_a1259ae/summary.md); sweeps and priors only
    "tile_n": (32, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256),
    # deeper than 7 for sweeps and _streaming_priors only: a 64-row tile's stage is 12-24 KB, and a skinny M streams B
    # through the ring
    "stages": tuple(range(2, 17)),
    "group": GROUPS,  # work-unit rows per band of the tile order (grid_order)
    # CTAs along M per cluster: 2 share each B tile, each CTA loading half and multicasting it (TMA) to both
    "cluster_m": (1, 2),
    # CTAs along K per cluster: each multiplies a K-slice of the same tile, and the fp32 partials are summed through
    # distributed shared memory (one work unit per cluster): split-K without a workspace or a second kernel. Not
    # searched: sweeps, the 64-row tiles of M <= 64 (_streaming_priors) and skinny long-K outputs
    # (_cluster_split_prior) start from it. On seven skinny long-K shapes with 128-row
    # tiles (H200, back to back) its best read 0.85-0.98 of best NVIDIA (ahead of
    # the wgmma family's first prior on 128x4096x8192 and 256x4096x8192, behind it on 256x2048x16384 and
    # 512x1024x8192). Sizes that fill more SMs than a power of two helped: 128x2048x12288 0.981 with
    # 3-CTA clusters of 128x64 (96 CTAs) against 0.963 with 4-CTA clusters of 128x128, 256x2048x16384 0.888 with 3
    # against 0.791, 1024x256x8192 0.902 with 5 against 0.871 with 4
    # (docs/benchmarks/data/cluster_k_sizes_h200_2026-11-26_77d6225.json). `feasible` refuses a split whose clusters
    # do not all run at once: 4-CTA clusters over 128 CTAs read 0.61 where 88 read 0.80 (256x2048x16384,
    # cluster_k_split_h200_2026-11-26_31ba481.json)
    "cluster_k": (1, 2, 3, 4, 5, 6, 7, 8),
    "acc": ("fp32",),
    # direct: half2 stores from the accumulator registers; tma: 64x64 sub-tiles (the last 16-48 columns wide where
    # tile_n is not a multiple of 64) through shared memory, TMA stores
    "epi": ("direct", "tma"),
    # alternate: a CTA walks K backward on every other work unit, so a wave starts on what the last one left in L2
    "k_order": ("forward", "alternate"),
    # operands (and C) whose TMA copies carry an L2 evict_first hint: the streamed one, so that what the next wave
    # reads again stays in L2 (DRAM bytes cost clock at the power limit)
    "l2_evict_first": ("none", "a", "b", "ac", "bc", "c"),
    # full: one CTA per SM (the last wave may be partial); even: the fewest CTAs that take the same number of waves,
    # so every CTA runs the same number of work units and each wave starts on a band boundary (512 units on 132
    # SMs: 128 CTAs of 4 instead of 116 of 4 and 16 of 3); streamk: one CTA per SM, the last one to two waves' tiles
    # shared out by k-blocks (a tile split between two CTAs, the partial through a workspace allocated in the call),
    # so no SM idles through a partial wave: 192 of the 226 grid shapes from 2^36 FLOP on give the first prior's
    # tiles 97% of their last wave. For sweeps only: on six shapes it read 5-35% below the first prior (even) in
    # every mode, its stream-K phase as if at two-thirds speed; power-limited shapes gain nothing from idle SMs put
    # to work (docs/benchmarks/data/raw_streamk_h200_2026-11-26_a1259ae.json)
    "grid": ("full", "even", "streamk"),
    # C^T = B^T A^T: B_col_major is the 64-row operand and A the streamed one, the output stored transposed; for the
    # 64-row tiles of N <= 64 (streams_swapped), the mirror of M <= 64
    "swap_ab": (False, True),
    # cooperative: both consumer warpgroups share each tile; pingpong: each takes a whole tile of its own, every other
    # one of the CTA's, and their mainloops take turns, so one's epilogue overlaps the other's wgmmas. On eight mid
    # and big shapes of K = 512-2048 in both tile orders (H100, sixteen pairs in the same rounds,
    # docs/benchmarks/data/raw_pingpong_bands_h100_2026-11-27_13a0c15.json) the 128x128 ping-pong read 0.986-1.082 of
    # the same tile cooperative back to back and 0.985-1.068 cold, below it only at K = 2048. One CTA a cluster
    # cooperative_n: both share each tile by columns, each taking all its rows (tile_m/64 m64 atoms) and half its
    # columns, as the 64-row tile always does; so 192 rows, which cannot be split in two (96 is no atom). On seven
    # fresh mid shapes where our first batch read 0.74-0.96, NVIDIA sized its tiles to divide a side: 192x144 (144
    # rows: 432 and 1296 in 3 and 9), 192x112, 176x192, 64x104, 56x128, the columns split on three (nvjet's coopB;
    # data/edge_settle_misses_ncu_h200_2026-11-29_5969936/). Stored from registers; the fitting tile's split where
    # no row split holds the tile (_fit_split)
    # cooperative3: three consumer warpgroups share a 192-row tile by rows, 64 each, where cooperative_n gives each
    # consumer all the rows (its L1/shared 87-91% busy on small M against NVIDIA's 62-75% on the same grid,
    # data/small_m_ncu_h200_2026-11-29_1904a1c/); tile_n up to 192 (128 registers a consumer). For sweeps and the
    # fitting tile (_fit_split)
    "schedule": ("cooperative", "pingpong", "cooperative_n", "cooperative3"),
    # shift: the tiles that would hang over the output's edge start early, inside it, recomputing and storing again
    # the rows (columns) of the tile before; pad: TMA fills what lies outside with zeros. Not searched: the policy
    # settles it by the tile and the shape (`settle`)
    "edge": ("pad", "shift"),
    **LAUNCH_DOMAIN,
}
# What the policy's mutations move through, narrower than what a sweep may render: in one campaign 29 of 48
# hopper_raw candidates carried a hint; A's (a, ac) measured 0.946-0.971 on multi-wave shapes there and 0.6-4%
# slower than no hint in a power-steady sweep, and B alone (b) never differed from B with C (bc). cluster_k,
# grid=streamk, tile_n=32, 64-row tiles and rings deeper than 7 stages stay with sweeps (DOMAIN says why) and with the
# priors of M <= 64 (_streaming_priors); swap_ab is left out (a search never moves it), so that the knob distances of
# the shapes it does not serve are those they were measured with.
SEARCH_DOMAIN: dict[str, tuple] = {**{k: v for k, v in DOMAIN.items() if k not in ("cluster_k", "swap_ab", "edge")},
                                   "tile_m": (128, 256), "schedule": ("cooperative", "pingpong"),
                                   "tile_n": tuple(t for t in DOMAIN["tile_n"] if t > 32 and t not in ONE_WAVE_ONLY_N),
                                   "stages": tuple(range(2, 8)),
                                   "l2_evict_first": ("none", "c", "bc"), "grid": ("full", "even")}
# ping-pong (schedule) is a search knob where a 128-row tile is: the priors of K = 256-2048 start from it
# (_pingpong_prior), and a mutation takes a cooperative tile there and back
# Where the streaming priors start (`streams`: M <= 64 from K = 1024, small outputs), the search moves through their
# own knobs. Through SEARCH_DOMAIN, in the campaign of
# docs/benchmarks/data/tables/fp32_m64_streaming_h200_2026-11-26_ccf1019.md, 5 of 42
# hopper_raw candidates had 128-row tiles (0.60-0.84 of cuBLASLt-AutoTuning), mutations and seeds cut rings to 7
# stages or fewer (estimate_us says what that cost), and none changed the split; the TMA epilogue with C's hint read
# -0.7% to +1.4% (left out), the alternate K order +0.1% to +0.9% (kept)
STREAMING_DOMAIN: dict[str, tuple] = {**SEARCH_DOMAIN, "tile_m": (64,), "tile_n": (32, 64, 128),
                                      "stages": DOMAIN["stages"], "cluster_k": DOMAIN["cluster_k"], "group": (1,),
                                      "cluster_m": (1,), "epi": ("direct",), "l2_evict_first": ("none",),
                                      "grid": ("full",), "schedule": ("cooperative",)}
DEFAULTS: dict[str, Any] = {"epi": "direct", "cluster_m": 1, "cluster_k": 1, "k_order": "forward",
                            "l2_evict_first": "none", "grid": "full", "swap_ab": False, "schedule": "cooperative",
                            "edge": "pad", **LAUNCH_DEFAULTS}
EPI_BYTES = 4 * 64 * 64 * 2  # two 64x64 fp16 sub-tiles per consumer warpgroup
MAX_ACC_REGS = 192  # fp32 accumulators per consumer thread; the consumers get 232 registers (setmaxnreg)
# Not with grid=streamk: ping-pong's consumers own whole tiles, and stream-K's partial tiles pass through a workspace
# and a barrier laid out for two consumer warpgroups (SLOT_QUADS, bar.sync 4, 256), not cooperative3's three
WHOLE_TILE_SCHEDULES = ("pingpong", "cooperative3")
COOP3_MAX_ACC = 96  # tile_n 192: ptxas holds three consumers to 128 registers (208 fails to compile, 192 no spills)
STREAM_INFLIGHT_BYTES = 150 * 1024  # a streaming CTA's ring below this streams slower (estimate_us)


# Clusters of 2-8 CTAs of one SM each that an H200 runs at once (cudaOccupancyMaxActiveClusters, 100-227 KB of
# shared memory): a cluster stays within one GPC, so 7 fit no more often than 8
CLUSTER_FIT_132 = {2: 66, 3: 39, 4: 30, 5: 22, 6: 17, 7: 15, 8: 15}


def cluster_k_fit(ck: int, sms: int) -> int:
    return CLUSTER_FIT_132[ck] * sms // 132


def _split_runs_at_once(tiles: int, kblocks: int, ck: int, sms: int) -> bool:
    """Each of `tiles` split over a cluster of `ck` CTAs: every cluster runs at once, each CTA walks four k-blocks or
    more (the priors' bound; `feasible` asks for two)."""
    return kblocks >= 4 * ck and tiles <= cluster_k_fit(ck, sms)


def validate(params: dict[str, Any]) -> dict[str, Any]:
    return validate_with_defaults(params, DOMAIN, DEFAULTS)


def smem_bytes(p: dict[str, Any]) -> int:
    """The stage ring (128-byte rows of 64 K-elements; a K-split's fp32 partial tile reuses it, rows padded by 8),
    1024 bytes of alignment slack and the barriers."""
    epi = EPI_BYTES if p.get("epi") == "tma" else 0
    ring = p["stages"] * (p["tile_m"] + p["tile_n"]) * 128
    if p.get("cluster_k", 1) > 1:
        ring = max(ring, p["tile_m"] * (p["tile_n"] + 8) * 4)
    return ring + epi + 1024 + 16 * p["stages"]


def accumulators(p: dict[str, Any]) -> int:
    """fp32 accumulators per consumer thread: a warpgroup's m64 atoms times tile_n/2 (half of it where two share a
    64-row tile's columns, twice the atoms where a ping-pong warpgroup owns a whole tile)."""
    if p.get("schedule") == "pingpong":
        return p["tile_m"] // 64 * p["tile_n"] // 2
    if p.get("schedule") == "cooperative_n":
        return p["tile_m"] // 64 * p["tile_n"] // 4
    if p.get("schedule") == "cooperative3":
        return p["tile_n"] // 2
    return p["tile_n"] // 4 if p["tile_m"] == 64 else (p["tile_m"] // 128) * p["tile_n"] // 2


def oversized(tm: int, tn: int, m: int, n: int) -> bool:
    """A tile past 128 on a side that covers more than twice the output's: mostly padding, refused."""
    return tn > max(128, 2 * n) or tm > max(128, 2 * m)


def feasible(params: dict[str, Any], shape: tuple[int, int, int] | None, arch: str) -> tuple[bool, str]:
    p, lim, why = validated(params, validate, arch, "sm_90a", "wgmma, TMA and setmaxnreg")
    if why:
        return False, why
    acc = accumulators(p)
    if acc > MAX_ACC_REGS:
        return False, f"{acc} fp32 accumulators per consumer thread (limit {MAX_ACC_REGS}: 232 registers in all)"
    if p.get("epi") == "tma" and p["tile_n"] % 64 and (p["tile_n"] % 16 or p.get("grid") == "streamk"
                                                        or (p["tile_m"] == 64 and p.get("schedule") != "pingpong")):
        return False, (f"the TMA epilogue stores 64-column sub-tiles and a last one of 16, 32 or 48 columns, a "
                       f"warpgroup's own rows (not a 64-row cooperative tile's shared ones, not stream-K's): "
                       f"tile_n={p['tile_n']} with tile_m={p['tile_m']}")
    if p["tile_n"] == 32 and p["tile_m"] != 64:
        return False, f"tile_n=32 is for 64-row tiles (each consumer an m64n16 atom), not tile_m={p['tile_m']}"
    if p.get("schedule") == "pingpong":
        if bad := _clashing(p, {"cluster_m": 1, "cluster_k": 1, "swap_ab": False}):
            return False, (f"schedule=pingpong gives each consumer warpgroup whole tiles of its own CTA: it needs "
                           f"cluster_m=1, cluster_k=1 and swap_ab=False, not {', '.join(bad)}")
        if p["tile_m"] > 128:
            return False, "schedule=pingpong takes 64- and 128-row tiles (a warpgroup's own taller tile is untried)"
    elif p.get("schedule") == "cooperative_n":
        if bad := _clashing(p, {"epi": "direct", "cluster_m": 1, "cluster_k": 1, "grid": "full"}):
            return False, (f"schedule=cooperative_n (each consumer warpgroup all rows, half the columns) is stored "
                           f"from registers, one CTA a cluster, the tile whole: it needs epi=direct, cluster_m=1, "
                           f"cluster_k=1 and grid=full, not {', '.join(bad)}")
        if p["tile_m"] == 64 or p["tile_n"] % 16:
            return False, (f"schedule=cooperative_n takes 128-256 rows and an even number of 8-column groups a "
                           f"warpgroup (the 64-row tile splits its columns anyway): not {p['tile_m']}x{p['tile_n']}")
    elif p.get("schedule") == "cooperative3":
        if bad := _clashing(p, {"tile_m": 192, "epi": "direct", "cluster_m": 1, "cluster_k": 1}):
            return False, (f"schedule=cooperative3 (three consumer warpgroups of 64 rows) takes a 192-row tile "
                           f"stored from registers, one CTA a cluster: it needs tile_m=192, epi=direct, cluster_m=1 "
                           f"and cluster_k=1, not {', '.join(bad)}")
        if acc > COOP3_MAX_ACC:
            return False, (f"schedule=cooperative3 holds a consumer to 128 registers: tile_n={p['tile_n']} needs "
                           f"{acc} accumulators, above {COOP3_MAX_ACC}")
    elif p["tile_m"] == 192:
        return False, ("a 192-row tile takes schedule=cooperative_n or cooperative3: 96 rows a warpgroup is no whole "
                       "m64 atom")
    elif p["tile_m"] == 64:
        # each consumer warpgroup owns tile_n/2 columns: whole 64-column sub-tiles, or half of one shared by both
        if p.get("epi") == "tma" and p["tile_n"] not in (64, 128, 256):
            return False, f"a 64-row tile with the TMA epilogue takes tile_n 64, 128 or 256, not {p['tile_n']}"
    if p.get("grid") == "streamk":
        if p.get("schedule") in WHOLE_TILE_SCHEDULES:
            return False, f"schedule={p['schedule']} takes whole tiles: grid=streamk splits them by k-blocks"
        if bad := _clashing(p, {"cluster_m": 1, "cluster_k": 1, "k_order": "forward"}):
            return False, (f"grid=streamk shares tiles between neighbouring CTAs by k-blocks: it needs cluster_m=1, "
                           f"cluster_k=1 and k_order=forward, not {', '.join(bad)}")
    if p.get("edge") == "shift" and (bad := _shift_clashes(p)):
        return False, (f"edge=shift stores the rows two tiles share from both, which must agree to the bit: every tile "
                       f"walks K forward and whole, not {', '.join(bad)}")
    if "c" in p.get("l2_evict_first", "none") and p.get("epi") != "tma":
        return False, "an L2 hint on C needs the TMA epilogue (stores from registers carry none)"
    ck = p.get("cluster_k", 1)
    if ck > 1:
        if bad := _clashing(p, {"cluster_m": 1, "epi": "direct", "k_order": "forward", "grid": "full"}):
            return False, (f"cluster_k={ck} takes one tile per cluster and stores from its reduction: it needs "
                           f"cluster_m=1, epi=direct, k_order=forward and grid=full, not {', '.join(bad)}")
    if p.get("swap_ab"):
        if bad := _clashing(p, {"epi": "direct", "cluster_m": 1, "grid": "full"}):
            return False, (f"swap_ab stores C^T from registers, one CTA a cluster, every tile whole: it needs "
                           f"epi=direct, cluster_m=1 and grid=full, not {', '.join(bad)}")
    if why := smem_problem(smem_bytes(p), lim):
        return False, why
    if shape is not None:
        if not in_16_byte_rows(shape[2]) or shape[1] % 2:
            return False, f"K={shape[2]} must be a multiple of 8 (TMA row stride) and N={shape[1]} even (paired stores)"
        m, n, k = kernel_shape(p, shape)
        if ck > 1 and ceil_div(k, 64) < 2 * ck:
            return False, f"cluster_k={ck} leaves fewer than two k-blocks of 64 per CTA (K={k})"
        if ck > 1:
            units = ceil_div(m, p["tile_m"]) * ceil_div(n, p["tile_n"])
            if units > (fit := cluster_k_fit(ck, lim.num_sms)):
                return False, (f"cluster_k={ck} takes one cluster per tile: {units} tiles exceed the {fit} clusters "
                               f"of {ck} CTAs that run at once, and those that do not fit would run as a second wave")
        if p.get("edge") == "shift" and not _hangs(p, m, n):
            return False, f"edge=shift: no {p['tile_m']}x{p['tile_n']} tile hangs over the {m}x{n} output's edge"
        if p.get("epi") == "tma" and not in_16_byte_rows(n):
            return False, f"the TMA epilogue needs N={n} to be a multiple of 8 (16-byte rows of C)"
        if oversized(p["tile_m"], p["tile_n"], m, n):
            return False, f"a {p['tile_m']}x{p['tile_n']} tile is more than twice the {m}x{n} output"
        rows, cl = ceil_div(m, p["tile_m"]), p.get("cluster_m", 1)
        if rows % cl:
            return False, (f"cluster_m={cl} takes {cl} tile-rows at a time: {rows} tile-rows of {p['tile_m']} do not "
                           "divide")
        if p["group"] not in orders(rows // cl):
            return False, (f"group {p['group']} walks {rows // cl} tile-rows of work units ({cl} tile-rows each) in "
                           f"the order {p['group'] // 2} does")
        if p.get("grid") == "even" and (why := uneven_waves(rows // cl * ceil_div(n, p["tile_n"]), cl, lim.num_sms)):
            return False, why
    return True, ""


# A box over the output's edge slows the k-loop of a narrow tile: this family's 64-row one-wave tiles hanging 88-104
# columns over read 0.58-0.72 of best NVIDIA where the next narrower width, on as many CTAs, read 0.91-0.98
# (raw_one_wave_tiles_h200_2026-11-29_b6189d8.json). Shifted against padded, the same config in the same rounds (H200,
# three modes; 49 configs on 40 shapes, 30 of them drawn after the first ten had set the rule:
# raw_edge_shift_h200_2026-11-29_02fb846.json, raw_edge_settle_fresh_h200_2026-11-29_14fa8a9.json), per mode:
# tiles of fewer elements than 128x128 hanging 45% or more over, geomean 1.155-1.164 (0.996-1.99, 27 configs); 20-45%,
# 1.018-1.022 (0.985-1.121, 9); under 20%, 1.001-1.011 (0.972-1.058, 4). 128x128 hanging 45% or more over,
# 1.010-1.018 (0.970-1.144, 9, below 1 on 5), and in the first batches of twelve more fresh shapes it read
# 0.971-0.994 on the two where it was the batch's best; the 4-5-stage tiles of 128x176 and larger 0.984-1.002
# however far they hang (a k-step's wgmmas hide the boxes' latency), on multi-wave big shapes too
# (overhang_multiwave_h200_2026-11-29_02fb846.json). Those first batches, the narrower tiles settled and 128x128 left
# padded, against the batches before: best of batch geomean x1.034 separated, x1.025 in server mode, x1.033 back to
# back, lower on none of the twelve (raw_edge_settle_first_batch_ab_h200_2026-11-29_5969936.json)
SHIFT_BELOW_TILE = 128 * 128
SHIFT_MIN_OVERHANG = 0.2


def overhang(side: int, tile: int) -> float:
    """The share of the last tile along a side that lies past the output's edge."""
    return -side % tile / tile


def _hangs(p: dict[str, Any], m: int, n: int) -> float:
    """How far the kernel's m x n output's last tiles hang over the edges a shifted tile can start inside of (longer
    than the tile), the larger share; 0 where none does."""
    return max((overhang(side, t) for side, t in ((m, p["tile_m"]), (n, p["tile_n"])) if side > t), default=0.0)


def _shift_clashes(p: dict[str, Any]) -> list[str]:
    """The knobs that would keep a shifted tile's shared rows from agreeing to the bit (K not walked forward and
    whole), as knob=value."""
    return _clashing(p, {"k_order": "forward"}) + (["grid=streamk"] if p.get("grid") == "streamk" else [])


def settle(params: dict[str, Any], shape: tuple[int, int, int]) -> dict[str, Any]:
    """`params` with the edge the shape asks of its tile: shifted where a tile of fewer elements than SHIFT_BELOW_TILE
    hangs SHIFT_MIN_OVERHANG or more over an edge it can start inside of, and the tiles walk K forward and whole. Not
    the streaming tiles of M or N <= 64 (32 columns, swapped, split over a cluster): on 27 of them hanging 25-88% over
    (fresh skinny shapes, K = 1280-15936), shifted read 0.976-1.034 of padded, geomean 0.992-1.005 per mode
    (raw_edge_streaming_h200_2026-11-29_0328d1f.json): shift moves them neither way."""
    if not {"tile_m", "tile_n"} <= params.keys():
        return params  # too partial to say; `feasible` refuses it later
    p = {**DEFAULTS, **params}
    m, n, _ = kernel_shape(p, shape)
    shift = (p["tile_m"] * p["tile_n"] < SHIFT_BELOW_TILE and _hangs(p, m, n) >= SHIFT_MIN_OVERHANG
             and p["tile_n"] >= 64 and not _shift_clashes(p) and p["cluster_k"] == 1 and not p["swap_ab"])
    q = {k: v for k, v in params.items() if k != "edge"}  # pad, the default, left out as canonical params do
    return dict(q, edge="shift") if shift else q


def _clashing(p: dict[str, Any], needs: dict[str, Any]) -> list[str]:
    """The knobs of `p` (its defaults where left out) that differ from what an option `needs`, as knob=value."""
    return [f"{x}={p.get(x, DEFAULTS.get(x))}" for x, want in needs.items() if p.get(x, DEFAULTS.get(x)) != want]


def a_box_rows(m: int, tile_m: int) -> int:
    """Rows of A that one TMA box loads, as the template's a_box_rows: below the tile, M in whole 8-row swizzle
    atoms."""
    return min(tile_m, ceil_div(m, 8) * 8)


# The largest tile (rows x columns) whose cluster split pushes its partial rows to the CTAs that sum them (st.async,
# counted on their barriers) instead of publishing them with a release/acquire cluster barrier (a MEMBAR.ALL.GPU)
# for the peers to read. Each split's first prior, push against publish in the same rounds (H200, 2026-11-29,
# docs/benchmarks/data/publish_push_h200_2026-11-29_1985b9c.json): 64x32 tiles 0.00-0.19 us a call faster on ten
# shapes (ck 2-8, server and back to back), 64x64 0.16-0.22 us slower (ck 2), 128x64 0.7-0.8 and 128x128 1.8-2.2 us
# slower: a push is 8 bytes, and a large tile's pushes outlast the membar they save.
PUSH_MAX_TILE = 64 * 32


def pushes(p: dict[str, Any]) -> bool:
    return p.get("cluster_k", 1) > 1 and p["tile_m"] * p["tile_n"] <= PUSH_MAX_TILE


def render(params: dict[str, Any]) -> str:
    p = validate(params)
    pingpong = p.get("schedule") == "pingpong"
    # two consumer warpgroups share the tile's columns: a 64-row tile's always, a taller one's by its schedule
    cols_split = (p["tile_m"] == 64 and not pingpong) or p.get("schedule") == "cooperative_n"
    wn = p["tile_n"] // 2 if cols_split else p["tile_n"]  # one consumer warpgroup's wgmma N
    n = wn // 2  # accumulator registers of one m64 wgmma atom, spelled out for its inline assembly
    evict = p.get("l2_evict_first", "none").replace("none", "")
    # the epilogue's offsets of a consumer warpgroup's part of the tile: its columns where two share a 64-row tile, its
    # rows where two share a taller one, none where it owns the tile (ping-pong)
    three = p.get("schedule") == "cooperative3"
    shares = dict(cols="CN" if cols_split else "BN", col_off="cw * CN + " if cols_split else "",
                  row_off="" if cols_split or pingpong else "cw * 64 + " if three else "cw * (BM / 2) + ")
    shift = p.get("edge") == "shift"
    shares.update(row0="row0(tm, M)" if shift else "tm * BM", col0="col0(tn, N)" if shift else "tn * BN")
    return render_feasible(NAME, TEMPLATE, p, feasible, defaults=DEFAULTS, wgmma_n=wn, acc_regs=n, evict_first=evict,
                           pingpong=pingpong, cols_split=cols_split, consumers=3 if three else 2, push=pushes(p),
                           **shares,
                           tail=p["tile_n"] % 64 if p.get("epi") == "tma" else 0,
                           acc_list=", ".join(f"%{i}" for i in range(n)),
                           acc_operands=", ".join(f'"+f"(d[{i}])' for i in range(n)))


def _deepest_stages(base: dict[str, Any], arch: str, stages: tuple[int, ...] = SEARCH_DOMAIN["stages"]) -> int | None:
    """The most stages (of the search's, unless told) that a tile's shared memory takes (None: not even the fewest)."""
    return max((s for s in stages if feasible(dict(base, stages=s), None, arch)[0]), default=None)


def _k_deep(base: dict[str, Any], kblocks: int, stages: tuple[int, ...] = SEARCH_DOMAIN["stages"]) -> dict[str, Any]:
    """`base` with the deepest ring that fits, but no deeper than the k-blocks a CTA walks (two at least): a ring
    slot no k-block fills buys nothing."""
    return dict(base, stages=min(_deepest_stages(base, "sm_90a", stages), max(2, kblocks)))


def space(shape: tuple[int, int, int], acc: str = "fp32", arch: str = "sm_90a") -> list[dict[str, Any]]:
    """Feasible configs: each tile with the deepest ring that fits and one stage less, in every tile order, and the TMA
    epilogue where the tile allows it (stores from registers measured 6% more cycles,
    docs/benchmarks/data/sweeps/raw_tma_2026-11-23_1c52652.json), with or without a 2-CTA cluster. The 128x64 tile
    stays out: in the domain for sweeps and one-knob mutations, it won none of the output-bound small-K shapes it was
    written for (0.81-0.87 in graph mode), and the space's exploration samples of the big shapes stay as they were
    measured. Where the streaming priors start (`streams`, or `streams_swapped` with the operands swapped), their
    ranked tiles and splits instead."""
    if acc != "fp32":
        return []
    if view := _streaming_view(shape):
        swap, kshape = view
        return [validate(dict(p, **launch_knobs(arch), **swap))
                for _, p in _streaming_ranked(kshape, pricing.arch_limits(arch).num_sms)]
    out = []
    for tm, tn in itertools.product(SEARCH_DOMAIN["tile_m"], (t for t in DOMAIN["tile_n"] if t >= 128)):
        epi = "tma" if tn % 64 == 0 and in_16_byte_rows(shape[1]) else "direct"
        base = {"tile_m": tm, "tile_n": tn, "group": 1, "acc": "fp32", "epi": epi}
        deepest = _deepest_stages(base, arch)
        if deepest is None:
            continue
        for stages, group, cl in itertools.product((deepest, deepest - 1), DOMAIN["group"], DOMAIN["cluster_m"]):
            p = validate(dict(base, stages=stages, group=group, cluster_m=cl, **launch_knobs(arch)))
            if feasible(p, shape, arch)[0]:
                out.append(p)
    return out


# ---------------------------------------------------------------- search: priors, shares, cost model, mutations

ORDER = 3
SHORT = "hr"
# Half the large class: on the four big dev shapes where CUTLASS lost, this kernel with its TMA epilogue needs 1-2%
# fewer cycles a call than CUTLASS and cuBLASLt (H200, power-steady). Below it about a slot of a batch, where a
# 128-row tile fills the SMs (_wave_filling_priors; elsewhere it lists no prior, and so gets no share,
# priors.family_shares).
# M <= 64 or N <= 64 streamed (pricing.size_class): 0.4 against wgmma's 0.6, the mma.sync families none. On 27 M <= 64
# shapes of four budget-16 campaigns (ccf1019 and 97f3796, H200s and H100s: the nine streaming shapes twice, three dev
# shapes, six outside every sample) the mma.sync kernels, 2-4 candidates a shape, read 0.32-0.96 of
# cuBLASLt-AutoTuning where each shape's best read 0.99-1.23 (at best 5.7% below it), while this family's four
# candidates a shape held the best on 16 of the 27 (docs/benchmarks/big_shapes_and_server.md, "M <= 64"); on nine
# N <= 64 shapes (H100) the mma.sync first proposals read 0.42-0.96 of best NVIDIA, the swapped streaming tiles
# 0.88-1.09 back to back ("N <= 64"); on twelve outputs of 96-256 rows and columns the mma.sync ones 0.28-1.03
# back to back ("Small outputs"). In the launch-bound classes a slot of four from K = 512 (_launch_tile), the same
# tile where no other prior runs below SMALL_FLOP.
SHARES = {"large": 0.5, "output_bound": 0.25, "skinny_streamed": 0.4, "skinny_tma": 0.2, "skinny_long_k": 0.2,
          "mid_low": 0.25, "mid_high": 0.3, "launch_wave": 0.25, "launch_bound": 0.25}
ARCH_FALLBACK = "ampere_cute"


def runs_on(arch: str) -> bool:
    return arch == "sm_90a"


def repair(p: dict[str, Any]) -> dict[str, Any]:
    """A 64-row tile's ring shrinks to what shared memory takes: the streaming priors fill it, so a mutation to a
    wider tile or a split (whose partial tile reuses the ring) would not fit otherwise. Every other knob is checked
    by `feasible`."""
    q = dict(p)
    if q.get("tile_m") == 64 and not feasible(q, None, "sm_90a")[0]:
        deepest = _deepest_stages(q, "sm_90a", tuple(s for s in DOMAIN["stages"] if s <= q.get("stages", 2)))
        if deepest is not None:
            q["stages"] = deepest
    return q


def cold_twin(params: dict[str, Any], shape: tuple[int, int, int]) -> dict[str, Any] | None:
    """The same kernel for a cold single call: an L2 evict_first hint on the operand its grid reads once
    (`pricing.read_once_operand`, in the kernel's own terms where it swaps A and B), or None where there is none to
    add. Back to back the hint is worth -5% to +2%, so only server mode's tournament and searches play it."""
    return pricing.read_once_twin(sys.modules[__name__], params, shape)


def priors(shape: tuple[int, int, int], acc: str, arch: str = "sm_90a", mode: str = "offline") -> list[dict[str, Any]]:
    if arch != "sm_90a" or acc != "fp32":
        return []
    launch = pricing.size_class(shape, arch) in ("launch_wave", "launch_bound")
    # streaming before size: from 2^35 FLOP a side of 64 still leaves a 128-row tile half empty (64x16384x16384:
    # 128x256 read 0.80 of best NVIDIA, the streaming 64x128 tile 0.97; 0.81 against 1.00 swapped, H200,
    # docs/benchmarks/data/listed_priors_feasible_h200_2026-11-26_920be5b.json). And before the launch prior: on six
    # launch_bound shapes of N = 32-64, K = 1024-1536 the swapped cluster split read 3-31% above the 64x64 tile in
    # every mode (0.98-1.10 of best NVIDIA in server mode against 0.93-0.97); with M <= 64 the split's slot moved the
    # batch's best by less than 1% on six (raw_output_bound_knobs_h200_2026-11-29_51198b5.json,
    # launch_streaming_first_batch_ab_h200_2026-11-29_f20e66a.json)
    if view := _streaming_view(shape):
        swap, kshape = view
        out = [dict(p, **swap) for p in _streaming_priors(kshape)]
        if swap:
            out[1:1] = _a_streaming_tile(shape)
        return out + (_launch_tile(shape) if launch else [])
    if launch:
        return _launch_split(shape) + _launch_tile(shape)
    if flop(shape) >= LARGE_FLOP:
        listed = _listed_priors(shape)
        return listed[:1] + _fitting_tile(shape, listed) + listed[1:]
    # the split after a tile that fills the SMs unsplit: at K = 4096 (256x4096, 4096x256) the listed 128x64 read 0.980
    # and 1.052 of best NVIDIA back to back where the split read 0.844 and 0.889
    # (docs/benchmarks/data/skinny_cluster_split_first_batch_ab_h200_2026-11-27_056c001.json)
    out = _wave_filling_priors(shape) + _cluster_split_prior(shape)
    out[1:1] = _fitting_tile(shape, out)  # second: the first was measured where it leads
    return out or _launch_split(shape) + (_one_wave_tiles(shape) or _launch_tile_beyond(shape))


# The launch-bound classes (below 2^31 FLOP and 2^19 outputs), from K = 512: a 64x64 tile with the deepest ring, a
# quarter of the CTAs of ampere_cute's 32x32 for TMA to feed. At the top (launch_wave, 2^17-2^19 outputs), separated,
# against best NVIDIA, on six shapes of K = 512-1024 (H200, same rounds; this tile cooperative, stored from
# registers): 1.041-1.106 where the 32x32 tile read 0.945-1.105, ahead on 2048x64x512 (1.041 against 0.945) and
# 512x256x1024, level (1%) on two, 2-4% behind on two; at K = 64-256 9-20% behind on five, so it starts from 512
# (docs/benchmarks/data/launch_bound_top_h200_2026-11-29_fa1c0db.json, launch_wave_ab_h200_2026-11-29_a1132f0.json).
# Against the policy's earlier first batches (small's and ampere_cute's) on three more, its slot lifted the batch's
# best 9-39% separated and 6-11% in server mode (launch_wave_first_batch_ab_h200_2026-11-29_5ec892e.json). The
# campaign on them kept this tile and moved it to the TMA epilogue, ping-pong and the alternating k order: on five
# shapes those three read 7-10% above the cooperative, register-stored tile separated, 8-12% back to back, 5-8% in
# server mode (0.98-1.005 of best NVIDIA against 0.93; raw_launch_wave_knobs_h200_2026-11-29_5ec892e.json), so the
# prior starts there. A 2-CTA cluster read 12-22% below; L2 evict hints on B and C 0-10% above separated, 0-2% below
# in server mode. Below 2^17 outputs (launch_bound) the same tile led the policy's first batch (small's and
# ampere_cute's) separated on six of seven shapes of 2^14-2^16 outputs (1.136-1.227 against a best of 0.81-1.163;
# small's cluster split kept 128x128x1024, 1.345) and in server mode on four (0.95-0.98 against 0.78-0.90), 8-11%
# behind on three (launch_bound_raw_prior_h200_2026-11-29_0e48400.json): a slot there too, beside small's first.
LAUNCH_MIN_K = 512
LAUNCH_TILE_KNOBS = {"schedule": "pingpong", "k_order": "alternate"}  # the campaign winners' (7-10% separated)
# Beyond the launch classes, below SMALL_FLOP where hopper_raw lists no other prior (skinny outputs of K = 1024-3072,
# M = 64 of K = 512-768) and up to two waves of it (a tile for each consumer warpgroup), the same tile: on 20 fresh
# shapes and a sample shape (a quarter of a wave to 1.5 waves of it) its slot lifted the first batch's best 1-36%
# separated and 1-26% in server mode (0.95-1.01 of best NVIDIA against 0.77-0.96), back to back level or up to 40%
# above (the slots it took were never a batch's best); at K = 4096 it read 6-21% below the batch's best on both
# shapes timed (raw_launch_tile_beyond_h200_2026-11-29_e3f949f.json,
# launch_tile_skinny_first_batch_ab_h200_2026-11-29_e6800c3.json)
LAUNCH_TILE_MAX_K = 3072
# M = 64 from 2^16 outputs (one tile-row of 16 CTAs up): on 64x1024x512 and 64x1536x768 the tile read 1.171 and 1.253
# of best NVIDIA separated, 1.257 and 1.337 back to back, where the first batch (small's and ampere_cute's) read at
# best 0.982 and 0.906 and 1.053 and 0.955; in server mode 0.944 and 0.979 against 1.000 and 0.899
# (raw_launch_tile_edges_h200_2026-11-29_bdc1102.json). Below that not measured.
LAUNCH_TILE_MIN_M64_OUTPUTS = 2 ** 16


def _launch_tile_beyond(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """The launch tile where no other prior runs below SMALL_FLOP, up to LAUNCH_TILE_MAX_K and two waves of it."""
    m, n, k = shape
    if flop(shape) >= pricing.SMALL_FLOP or k > LAUNCH_TILE_MAX_K or ceil_div(m, 64) * ceil_div(n, 64) > 2 * sms:
        return []
    return _launch_tile(shape)


# Mid shapes where the launch tile's grid takes more than one wave and no 128-row tile fills (most of them off the 128
# grid, 2^31-2^34 FLOP): NVIDIA's kernels there run one wave of odd tiles (96x64, 104x64, 64x136 and 128x64 with
# the sides swapped; Nsight Compute, data/wave_quantized_mid_ncu_h200_2026-11-29_270c6fd/), where ours ran the
# 64x64 tile over 1.1-2 waves at 0.50-0.85 of best NVIDIA. pricing.one_wave_cost (a 64x96 grid of 96 CTAs read
# operands from L2 at about 9 TB/s) ranks the 128-row tile and the 64-row tiles of ONE_WAVE_WIDTHS that fit one
# wave. On ten such shapes (K = 1472-6272) the best of them read 0.63-1.06 of best NVIDIA separated where the 64x64
# tile read 0.50-0.85; the first pick was the best hopper_raw tile timed on seven of the eight where it was timed,
# 0.6% below it on the eighth
# (raw_one_wave_tiles_h200_2026-11-29_b6189d8.json). As the first batch's slot on ten fresh shapes the batch's best
# rose 10% separated, 12% in server mode and 11% back to back, none lower
# (one_wave_first_batch_ab_h200_2026-11-29_c583f8f.json). 64-row widths that are multiples of 64 read far below
# their neighbours on the same grid (64x128 0.72 where 64x112 read 0.98, 64x192 0.58 where 64x176 read 0.91), so
# they are not listed: both hung far over the output's edge there (104 of 128 columns, 88 of 192; the edge knob).
ONE_WAVE_WIDTHS = (*ONE_WAVE_ONLY_N, 144, 160, 176)
# pricing.ONE_WAVE_MMA_WEIGHT was fitted on those ten shapes; with the later probes, the pick read within 1% of the
# best one-wave tile timed in 12 of 15 comparisons, 4-7% below it in three (64x112 and 64x96 where a narrower tile led
# on 320x2032 and 672x944). pricing.ONE_WAVE_K starts at 1472: on 168x9984x1344 the 128x160 tile read 0.75 where the
# wgmma family's 128x192 read 0.81 and the batch lost that slot to it
# (one_wave_untimed_picks_h200_2026-11-29_0a1f44a.json); from 1472 they led


def _one_wave_tiles(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """Where the 64x64 grid takes more than a wave (M >= 128, K in pricing.ONE_WAVE_K): the two one-wave tiles of the
    shortest k-block by the measure above, the shorter first."""
    m, n, k = shape

    def ctas(tm: int, tn: int) -> int:
        return ceil_div(m, tm) * ceil_div(n, tn)

    if m < 128 or not pricing.past_a_wave_at_one_wave_k(shape, sms):
        return []
    fits = [(128, tn) for tn in (64, *ONE_WAVE_WIDTHS) if ctas(128, tn) <= sms][:1]
    fits += [(64, tn) for tn in ONE_WAVE_WIDTHS if ctas(64, tn) <= sms]
    ranked = []
    for tm, tn in fits:
        base = {"tile_m": tm, "tile_n": tn, "group": 1, "acc": "fp32", "schedule": "cooperative"}
        for epi in (("tma", "direct") if tm == 128 else ("direct",)):
            p = _k_deep(dict(base, epi=epi), ceil_div(k, 64), DOMAIN["stages"])
            if feasible(p, shape, "sm_90a")[0]:
                ranked.append((pricing.one_wave_cost(tm, tn, ctas(tm, tn)), tm, tn, p))
                break
    return [p for *_, p in sorted(ranked, key=lambda t: t[:3])[:2]]


# Where the launch tile's grid holds at most a third of a wave (up to 39 tiles, the 3-CTA clusters that run at once)
# from K = 2048 (up to the skinny split's CLUSTER_SPLIT_MIN_K, below SMALL_FLOP), the same tile with K split over
# the largest cluster whose CTAs all run at once (3-6 CTAs, 96 of them on the shapes timed) goes first: each CTA
# walks a third to a sixth of K, so three to six times the SMs stream the operands. Without PDL on both, in the same
# rounds, it read 3-40% above the unsplit tile on all eleven shapes of 16-32 tiles and K = 2048-4096, separated
# (0.99-1.09 of best NVIDIA against 0.74-0.97) and in server mode (0.99-1.12 against 0.74-0.96); at K = 1024 (32
# tiles) 5-8% below, and over 2-CTA clusters (48 tiles) level or 3% below
# (raw_launch_tile_cold_split_h200_2026-11-29_af0cbb9.json). Over 64 tiles in 2-CTA clusters it read 2-12% below the
# tile (with PDL) in server mode (raw_mid_cluster_split_h200_2026-11-29_af0cbb9.json). As the first batch's slot
# (PDL on, as the policy launches it) it lifted the batch's best 8% separated, 11% in server mode and 12% back to back
# on eleven shapes (launch_split_first_batch_ab_h200_2026-11-29_97aa4f4.json).
LAUNCH_SPLIT_MIN_K = 2048
LAUNCH_SPLIT_CK = (3, 6)  # cluster sizes, as timed (7 and 8 were not; in the skinny split 6-8 read 7-10% below 5)


def _launch_split(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """The launch tile split over a cluster where its grid holds few tiles from LAUNCH_SPLIT_MIN_K (see above)."""
    _, n, k = shape
    if not (LAUNCH_SPLIT_MIN_K <= k < CLUSTER_SPLIT_MIN_K and flop(shape) < pricing.SMALL_FLOP
            and in_16_byte_rows(n, k)):
        return []
    return _tile_split(shape, 64, 64, range(LAUNCH_SPLIT_CK[0], LAUNCH_SPLIT_CK[1] + 1), sms)


def _launch_tile(shape: tuple[int, int, int]) -> list[dict[str, Any]]:
    m, n, k = shape
    if k < LAUNCH_MIN_K or (m <= 64 and m * n < LAUNCH_TILE_MIN_M64_OUTPUTS):
        return []
    base = {"tile_m": 64, "tile_n": 64, "group": 1, "acc": "fp32", "epi": "tma", **LAUNCH_TILE_KNOBS}
    kblocks = ceil_div(k, 64)
    for p in (_k_deep(base, kblocks, DOMAIN["stages"]), _k_deep(dict(base, epi="direct"), kblocks)):
        if feasible(p, shape, "sm_90a")[0]:  # N off the TMA store's 64-column sub-tiles: stored from registers
            return [p]
    return []


# Skinny outputs with a long K (at most 2^20 elements, K from CLUSTER_SPLIT_MIN_K, M >= 128): K split over clusters
# of at most CLUSTER_SPLIT_MAX_CK CTAs, one launch, no workspace. 6-8 CTAs a cluster read 7-10% below 5 on the three
# shapes where both were timed (clusters that large fit 15-17 times, a cluster staying within one GPC)
CLUSTER_SPLIT_MIN_K = 8192
CLUSTER_SPLIT_MAX_CK = 5
# the share of the SMs the split's CTAs must fill: every probed pick held 80-128 CTAs of 132, and a few-tile output
# split five ways (256x128: 10 CTAs) is the wgmma family's batched split's, of up to 16 slices
CLUSTER_SPLIT_MIN_FILL = 0.6


def cluster_splits(shape: tuple[int, int, int]) -> bool:
    """Where `_cluster_split_prior` lists a K split over a cluster (below LARGE_FLOP, outside the streaming view)."""
    m, n, k = shape
    return (m >= 128 and m * n <= 2 ** 20 and k >= CLUSTER_SPLIT_MIN_K and in_16_byte_rows(n, k)
            and flop(shape) < LARGE_FLOP and _streaming_view(shape) is None)


def _cluster_split_prior(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """Where `cluster_splits`: 128x64 tiles on one tile-row (M <= 128), 128x128 on more, each split over the largest
    cluster (2 to CLUSTER_SPLIT_MAX_CK CTAs) whose CTAs all run at once on one wave, filling CLUSTER_SPLIT_MIN_FILL
    of the SMs or more, with the deepest ring that fits.

    The wgmma family's batched split (a GEMM into fp32 slices, then a summing kernel) leads back to back where its
    tiles and slices fill the SMs, but the policy lists none where the output has more than 40 of its tiles, and its
    second launch costs in server mode. Against the policy's first batch in the same rounds (H200, seven shapes of
    M = 128-1024, K = 8192-16384; docs/benchmarks/data/raw_skinny_cluster_split_h200_2026-11-27_056c001.json) the
    split this picks read 0.968 of best NVIDIA back to back on 256x3072x8192 against 0.635 for the batch's best,
    0.991 against 0.898 on 128x4096x12288, 1-4% below it on 128x1536x16384 and 128x2048x12288, and 10-13% below on
    three shapes of M >= 256 whose batched split fills the SMs; in server mode it led on three of seven. On eight
    fresh shapes the batch with it read 1.000-1.504 of the batch before it, better on five, worse on none, in every
    mode (skinny_cluster_split_first_batch_ab_h200_2026-11-27_056c001.json). Tile width by tile-rows, each at its
    best cluster: on one tile-row 128x64 led 128x128 on all eight M = 128 shapes of K >= 8192 of four probes (here,
    raw_m128_skinny_h200_2026-11-26_e94d93b.json, cluster_k_sizes_h200_2026-11-26_77d6225.json,
    cluster_k_split_h200_2026-11-26_31ba481.json) but in one of two on 128x2048x12288 (by 0.7%); on two or more
    128x128 led on all four shapes timed in every cluster that fits (here and cluster_k_sizes)."""
    if not cluster_splits(shape):
        return []
    tn = 64 if shape[0] <= 128 else 128
    return [p for tm in ((64, 128) if _spans_n(shape) else (128,))
            for p in _tile_split(shape, tm, tn, range(2, CLUSTER_SPLIT_MAX_CK + 1), sms)]


def _tile_split(shape: tuple[int, int, int], tm: int, tn: int, sizes: range, sms: int) -> list[dict[str, Any]]:
    """tm x tn tiles with K split over the largest cluster of `sizes` whose CTAs all run at once (clusters that all
    run at once hold at most `sms` CTAs, CLUSTER_FIT_132), filling CLUSTER_SPLIT_MIN_FILL of the SMs or more, stored
    from registers with the deepest ring that fits: [that config], or [] where none fills or it does not run."""
    m, n, k = shape
    tiles, kb = ceil_div(m, tm) * ceil_div(n, tn), ceil_div(k, 64)
    ck = max((c for c in sizes if _split_runs_at_once(tiles, kb, c, sms)), default=0)
    if tiles * ck < CLUSTER_SPLIT_MIN_FILL * sms:
        return []
    base = {"tile_m": tm, "tile_n": tn, "group": 1, "acc": "fp32", "epi": "direct", "cluster_k": ck}
    p = _k_deep(base, ceil_div(kb, ck), DOMAIN["stages"])
    return [p] if feasible(p, shape, "sm_90a")[0] else []


def _spans_n(shape: tuple[int, int, int]) -> bool:
    """N = 128 on more than one tile-row: one 128-wide tile column holds all of N unpadded, so A is read once
    whatever the tile's rows, and 64-row tiles reach the SMs with half the cluster 128-row ones need. Against the
    128x128 split in the same rounds (H200, back to back / server): 4096x128x8192 64x128 over 2 CTAs 0.987 / 0.985 of
    best NVIDIA where 128x128 over 3 read 0.886 / 0.937; 3072x128x12288 1.091 / 0.985 against 1.024 / 1.001 (over
    4); 2048x128x8192 1.044 / 0.889 against 0.940 / 0.835 (over 5); 1536x128x16384, where 128x128 lists no split,
    0.989 over 4 (1.075 over 3). Where the 64-row tiles are too many to split (5120 and 6144 x 128) the 128x128 split
    stays alone; at N = 96 (padded to 128) 64x128 over 3 read 0.830 against 0.928
    (docs/benchmarks/data/thin_long_k_64row_tiles_h200_2026-11-28_b3be6bd.json for the first two,
    raw_a_spanning_tiles_h200_2026-11-28_b3be6bd.json for the rest). On five fresh shapes (2048-4096 x 128 x
    12288-16384) it led the 128x128 split in 14 of 15 shape-modes, by up to 13%
    (a_spanning_split_first_batch_h200_2026-11-28_b3be6bd.json). NVIDIA's pick on 4096x128x8192 is 64x64 tiles, 13
    stages, one per SM (thin_long_k_ncu_h200_2026-11-28_b3be6bd/)."""
    return shape[1] == 128 and shape[0] > 128


# The share of a wave the 128x64 tile's grid must fill to follow the swapped streaming prior where N <= 64. Against the
# best swapped tile (H100, docs/benchmarks/data/raw_swapped_streaming_h100_2026-11-26_7832d4b.json; 16384x64x2048 from
# the campaigns of docs/benchmarks/unseen_shapes.md), with 96-128 tiles (73-97% of a wave, five shapes) it read 1.1%
# below to 2.5% above back to back and 0.2-2.8% above cold; with 64 tiles (half a wave, two shapes) 0.6-1.6% below
# back to back and 4-8% below cold
A_TILE_FILL = 0.7


def _a_streaming_tile(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """N <= 64: the unswapped 128x64 tile (A streamed down its rows, the TMA epilogue, the deepest ring up to K's
    blocks) where its grid fills A_TILE_FILL of its waves, else nothing."""
    m, n, _ = shape
    if not in_16_byte_rows(n) or pricing.wave_fill(ceil_div(m, 128), sms) < A_TILE_FILL:
        return []
    return _k_ring(128, 64, shape, sms=sms)


def _streaming_priors(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """Where the shape `streams` (M <= 64 from K = 1024): all of M in one 64-row tile (A's box no taller than M), or
    two for the small outputs of `pricing.streams_ab`, B streamed through a ring as deep as shared memory takes (up
    to 16 stages, no more than a CTA's k-blocks), and the work units (tiles, times the CTAs of a cluster that splits
    K) filling the waves best: a partial last wave idles SMs that could stream. Ties go to no split, then to the
    wider tile (A read less often). The first prior is the best; the second the best of the other kind (split or
    not), or for two tile-rows the runner-up.
    One CTA's loads in flight bound what it streams: 64x32 with 7 stages read 0.78-0.86 of best NVIDIA on
    64x2048x4096 (H200, every mode), with 16 stages 0.85-1.07 (H100); the split lets the CTAs fill the SMs where the
    tiles are too few. On six shapes of M = 8-64 at K = 4096 (H200, back to back and server) the 64-row tiles read
    0.96-1.07 where the best of the wgmma family's first proposals read 0.85-1.06; 8x14336x4096 0.96-0.97 with 112
    tiles of 128 columns against 0.85-0.90 with 448 of 32 (3.4 waves); 64x8192x4096 1.00 and 0.98 with 64x64 tiles
    (docs/benchmarks/data/raw_small_m_box_h200_2026-11-26_ccf1019.json;
    raw_m64_streaming_h100_2026-11-26_931faae.json for the splits; raw_m64_one_launch_h200_2026-11-26_931faae.json
    for the unsplit 7-stage tiles and the half-empty 128-row tiles split over clusters)."""
    ranked = _streaming_ranked(shape, sms)
    if not ranked:
        return []
    first = ranked[0][1]
    if shape[0] > 64:
        # two tile-rows (`pricing.streams_ab`): unsplit, eight tiles would stream through eight SMs; the runner-up
        return [p for _, p in ranked[:2]]
    other = next((p for _, p in ranked if (p["cluster_k"] > 1) != (first["cluster_k"] > 1)), None)
    return [first] + ([other] if other is not None else [])


def streams(shape: tuple[int, int, int]) -> bool:
    """Where the streaming priors start: where B is streamed (`pricing.streams_b`) or both operands are
    (`pricing.streams_ab`), and N is even (paired stores)."""
    return (pricing.streams_b(shape) or pricing.streams_ab(shape)) and shape[1] % 2 == 0


def streams_swapped(shape: tuple[int, int, int]) -> bool:
    """The mirror of `streams`: N <= 64, where A is the streamed operand; the kernel computes C^T (swap_ab). M <= 64
    goes unswapped where both hold."""
    return not streams(shape) and pricing.streams_a(shape) and shape[1] % 2 == 0


def _streaming_view(shape: tuple[int, int, int]) -> tuple[dict[str, Any], tuple[int, int, int]] | None:
    """The swap knob and the shape the streaming kernel walks where the shape `streams` or `streams_swapped`; None
    elsewhere."""
    m, n, k = shape
    if streams(shape):
        return {}, shape
    return ({"swap_ab": True}, (n, m, k)) if streams_swapped(shape) else None


def search_domain(shape: tuple[int, int, int]) -> dict[str, tuple]:
    """The knob values worth a search slot for `shape` (agent.policy.builtin)."""
    if (view := _streaming_view(shape)) is None:
        return SEARCH_DOMAIN
    swap, _ = view
    return {**STREAMING_DOMAIN, "swap_ab": (True,)} if swap else STREAMING_DOMAIN


def _streaming_ranked(shape: tuple[int, int, int], sms: int) -> list[tuple[tuple[float, int, int], dict[str, Any]]]:
    """Every feasible 64-row streaming tile and split where the shape `streams`, best first (`_streaming_priors`
    says by what)."""
    kb = ceil_div(shape[2], 64)
    ranked: list[tuple[tuple[float, int, int], dict[str, Any]]] = []
    for tn in (32, 64, 128):
        tiles = ceil_div(shape[0], 64) * ceil_div(shape[1], tn)
        for ck in range(1, 9):
            if ck > 1 and not _split_runs_at_once(tiles, kb, ck, sms):
                continue
            base = {"tile_m": 64, "tile_n": tn, "group": 1, "acc": "fp32", "epi": "direct", "cluster_k": ck}
            p = _k_deep(base, ceil_div(kb, ck), DOMAIN["stages"])
            if feasible(p, shape, "sm_90a")[0]:
                ranked.append(((round(pricing.wave_fill(tiles * ck, sms), 6), -ck, tn), p))
    ranked.sort(key=lambda t: t[0], reverse=True)
    return ranked


def _wave_filling_priors(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """Mid shapes (below LARGE_FLOP): two 128-row tiles whose grids fill WAVE_FILL of the SMs, 128x128 first where
    its grid takes at most two waves, then 128x256, then 128x64; each with the TMA epilogue and the deepest ring
    that fits, but no deeper than K's blocks (two at least).

    Cold, this kernel is faster than CUTLASS's. On 20 mid shapes of K=64-4096 (H200, server mode) the first of them
    read 0.92-1.01 of best NVIDIA where the best of the wgmma family's first two priors, CUTLASS at the same tile and
    (K <= 256) the mma.sync families' first priors read 0.78-0.99: ahead on every shape, by 1.1-19%; back to back
    0.97-1.29 against 0.93-1.39 (ahead on three, up to 11% behind: CUTLASS's PDL-overlapped prologue counts there).
    Where both filled, 128x128 led 128x64 on all eight shapes and 128x256 on three of four (the fourth by 1.5%), in
    every mode timed. Stores from registers read 9-13% lower, a 4-stage ring 5-22% lower than a 7-stage one
    (docs/benchmarks/data/raw_mid_tiles_h200_2026-11-26_b7ced70.json, raw_short_k_h200_2026-11-26_bb7eca8.json).
    From K = 256 to 2048 the ping-pong prior (`_pingpong_prior`) comes first and the cooperative tile of its width
    drops out. Where no 128-row tile fills, M >= 512 (256 below 2^31 FLOP) and K <= 2048, a 64x64 tile: cooperative
    (its two consumers splitting the columns), on three such shapes it read 0.96-1.01 of best NVIDIA cold against
    0.91-0.94 for the wgmma family's first prior (the clusters of two and 64x128 lower still), but 0.98-1.14 against
    1.07-1.23 back to back; with M <= 256 or K = 4096 it trailed cold too, by 3-15%
    (docs/benchmarks/data/raw_64row_tiles_h200_2026-11-26_bb7b004.json). It takes the launch tile's ping-pong and
    alternating k order (`_launch_tile`): on four output_bound shapes (K = 512) they read 2-6% above the cooperative
    tile separated, 3-4% back to back, 1-3% in server mode (an eighth stage level); and from M = 256 below 2^31 FLOP,
    where the tile lifted the first batch's best 7-18% separated and 6-14% in server mode on 256x2048x512 and
    320x3072x256 (raw_output_bound_knobs_h200_2026-11-29_51198b5.json,
    launch_streaming_first_batch_ab_h200_2026-11-29_f20e66a.json).
    None where N is not a multiple of 8 (the TMA epilogue's rows), M is below 128 (the probes' shortest), or no tile
    fills the SMs: the kernel has no swapped operand order, so a small output leaves its grid empty."""
    m, n, k = shape
    if n % 8 or k % 8 or m < 128:  # a shorter M would leave half of every tile's rows empty; not timed
        return []
    tiles = {tn: ceil_div(m, 128) * ceil_div(n, tn) for tn in (128, 256, 64)}
    order = (128, 256, 64) if tiles[128] <= 2 * sms else (256, 128, 64)
    out = _pingpong_prior(shape, sms)  # first where it is listed, then the cooperative tiles of other widths
    for tn in order:
        if pricing.wave_fill(tiles[tn], sms) < WAVE_FILL or any(q["tile_n"] == tn for q in out):
            continue
        out += _k_ring(128, tn, shape, sms=sms)
    out[:0] = _coop_176_first(shape, out, sms)
    rows64 = SIXTY_FOUR_MIN_M_LAUNCH if flop(shape) < pricing.LAUNCH_FLOP else SIXTY_FOUR_MIN_M
    if not out and m >= rows64 and k <= 2048 and pricing.wave_fill(ceil_div(m, 64) * ceil_div(n, 64), sms) >= WAVE_FILL:
        out += _k_ring(64, 64, shape, **LAUNCH_TILE_KNOBS)
    return out[:2]


# the shortest M of the 64x64 fallback tile (`_wave_filling_priors`): below LAUNCH_FLOP measured from 256; above it
# the cooperative tile trailed cold at 256 (256x2048x2048, where `_launch_tile_beyond` now lists it for a slot)
SIXTY_FOUR_MIN_M, SIXTY_FOUR_MIN_M_LAUNCH = 512, 256


# K where the ping-pong prior is listed: at K = 64 (one k-block) it read 3% below the cooperative 128x128 (4096x1024x64,
# H100); from 256 to 2048 0.986-1.082 of it; at 4096 even with the best cooperative tile, from 8192 below it
PINGPONG_K = (256, 2048)
PINGPONG_WIDE_WAVES = 8  # 128x128 tiles beyond this many waves: 128x192 instead
PINGPONG_DIRECT_SPEED = 0.55  # a ping-pong tile's stores from registers against the TMA epilogue (estimate_us)
ROWS_B_BYTES = 8 << 20  # a tall grid walks rows of tiles where all of B takes at most this much of L2
# ... and so does any grid of at least ROWS_MIN_TILE_ROWS tile-rows at K <= ROWS_K. Rows against the prior's square
# bands on 32 fresh shapes of K = 256-320 with B <= 8 MB (H200, same rounds): at K = 256 and >= 32 tile-rows rows read
# faster on 14 of 14 in every mode, by 0.4-5.2% back to back (geomean 3.0%) and 0.8-10.7% in server mode (5.1%); at
# K = 320 on 2 of 5; with 16-31 tile-rows on 6 of 13 back to back (geomean -1.0%)
# (raw_pingpong_rows_k256_*_h200_2026-11-27_ab223ee.json)
ROWS_K = 256
ROWS_MIN_TILE_ROWS = 32
# 128x176 (five stages fit) instead of the width the rule above picks where its busiest CTA's columns (`_makespan`)
# are at most this share of that width's. Against 192, set on 28 wide shapes of K 256-2048 (H200, both tiles in the
# same rounds): at shares 0.917-0.978 176 read faster on 15 of 15 in server mode (0.7-7.5%, geomean 3.6%), at
# 0.982-1.069 192 on 12 of 13 (geomean 2.1%); on 16 shapes not used to set it the pick was faster in server mode on
# 15, one 1.3% slower (docs/benchmarks/data/raw_pingpong_176_*_2026-11-27_36f42ba.json). Against 128, set on 16
# shapes: at shares 0.825-0.982 176 read faster on 11 of 11 in every mode (server 1.8-14%), at 1.031 from -1.5% to
# +3.6%, at 1.058-1.146 128 by 3-9%; on 16 fresh shapes at 0.825-1.013, 176 faster back to back on 15 (one
# tie), in server mode on 13 (three 0.5-4% slower). As listed, on the 22 of 2,997 random off-grid shapes it changes
# (none used to set it) the new prior read faster in every mode on all 22, server 0.3-56% (geomean 7.4%)
# (raw_pingpong_176_vs_128_*_2026-11-27_0ec68c5.json)
NARROW_SHARE = {192: 0.98, 128: 1.02}


def _pingpong_prior(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """K within PINGPONG_K: the ping-pong schedule, whose warpgroups store one tile while the other multiplies the
    next (a short K leaves the epilogue a large share of a tile's time). 128x192 where 128x128 tiles would take more
    than PINGPONG_WIDE_WAVES waves and 192 columns tile N with at most 5% padding (fewer bytes a FLOP from L2), else
    128x128; 128x176 instead of either where it leaves the busiest CTA few enough columns (NARROW_SHARE); a grid
    taller than wide, or of many tile-rows at K = 256 (ROWS_K), whose B takes at most ROWS_B_BYTES in rows of tiles
    (every tile-row reads all of B again, from L2 while it fits; 4096x16384x2048 in rows read 0.72 of best NVIDIA
    against 1.00 in bands), any other in square bands (`square_band`); but a grid of at most GPC_BAND_WAVES waves
    (other than rows at K = 256) in `gpc_band`'s band: on eight such grids fresh to the question, tall ones that
    walked rows and one in square bands of 8, it read -0.6% to +0.9% of the old order back to back (geomean +0.3%),
    -2.5% to +0.6% separated and -0.1% to +3.0% in server mode (+0.9%) (H200,
    docs/benchmarks/data/raw_gpc_band_beyond_two_waves_h200_2026-11-27_7e54cfc.json). [] where the tile's grid fills
    less than WAVE_FILL of the SMs. The even grid, where it pays, is `_listed_priors`'
    (`pricing.even_grid`; below POWER_LIMIT_FLOP it changes nothing).

    Against the best of each shape's first batch at 13a0c15 (the policy's first four proposals, the same rounds, best
    NVIDIA; two H100s, two H200s), on the 24 probed shapes the rule was set on the prior it picks read 0.986-1.132 back
    to back (geomean 1.031, four below 1), 0.980-1.130 separated (1.036) and 1.002-1.143 in server mode (1.044);
    rows against bands for the picked tile, the pick was the faster or within 1% back to back on 17 of 18 shapes
    (4096x12288x256 read 3% faster in rows). On eleven fresh shapes, the whole first batch with it against
    13a0c15's: its best 1.000-1.127 of the old batch's back to back (geomean 1.040), 1.000-1.120 separated (1.044),
    1.000-1.152 in server mode (1.051) (docs/benchmarks/data/pingpong_first_batch_ab_h200_2026-11-27_13a0c15.json;
    the probes: docs/benchmarks/data/raw_pingpong_*_2026-11-27_13a0c15.json). On three more, the first batch with it
    held or beat the best of a whole 16-candidate campaign of the policy before it (server 1.023, 1.022, 0.944
    against 0.976, 0.969, 0.944; pingpong_campaign_ab_h200_2026-11-27_843ac95.json). In 2-CTA clusters sharing B the
    same tiles read 0.2-3.8% lower on eleven of twelve shapes (raw_pingpong_cluster_h200_2026-11-27_843ac95.json)."""
    m, n, k = shape
    # a side under 128 would leave a 128-wide tile partly empty (16384x64x256 keeps its cooperative 128x64); not timed
    if not PINGPONG_K[0] <= k <= PINGPONG_K[1] or not in_16_byte_rows(n, k) or min(m, n) < 128:
        return []
    wide = (ceil_div(m, 128) * ceil_div(n, 128) > PINGPONG_WIDE_WAVES * sms
            and n / (192 * ceil_div(n, 192)) >= 0.95)
    tn, rows = (192 if wide else 128), ceil_div(m, 128)
    if pricing.wave_fill(rows * ceil_div(n, tn), sms) < WAVE_FILL:
        return []  # and 176 too: no grid that 128 or 192 leaves this empty was timed with it
    if _makespan(m, n, 176, sms) <= NARROW_SHARE[tn] * _makespan(m, n, tn, sms):
        tn = 176
    cols = ceil_div(n, tn)
    tall = rows > cols and 2 * n * k <= ROWS_B_BYTES
    if _rows_at_short_k(rows, n, k):
        group = 1
    elif rows * cols <= GPC_BAND_WAVES * sms:
        group = gpc_band(rows, cols, 128, tn, 2 * n * k, sms)
    else:
        group = 1 if tall else widest_band(rows, square_band(128, tn, sms))
    # 176's fifth stage past K = 256's four blocks: on 4096x12288x256 five read 3.8% faster than four back to back
    return _k_ring(128, tn, shape, past_k=tn == 176, group=group, schedule="pingpong")


# K where a cooperative 128x176 goes first (`_coop_176_first`): measured at 256-6144; within PINGPONG_K only where the
# ping-pong prior is not listed (its 128- and 192-wide grids too empty)
COOP_176_K = (256, 6144)
COOP_176_SHARE = 0.98
COOP_176_MIN_M = 3 * 128  # three full tile-rows: below, the wide wgmma tiles led on 4 of 7 (M = 192-304)


def _coop_176_first(shape: tuple[int, int, int], listed: list[dict[str, Any]], sms: int) -> list[dict[str, Any]]:
    """K within COOP_176_K: the cooperative 128x176 with five stages ahead of a listed cooperative 128x64 or 128x128
    where its busiest CTA computes at most COOP_176_SHARE of that tile's columns (`_makespan`; a wave of 176 where
    64 takes three, two where 128 takes three). Against each shape's whole first batch, in the same rounds (H200,
    best NVIDIA): at K = 256-896 (ten fresh shapes, 128x64 listed, share 0.917; 33b7fb2) 176 read faster on 7 of 10
    back to back (geomean 3.9%, the three 0.2-1.4% slower) and on all ten separated (7.6%) and in server mode
    (0.3-14%, geomean 8.2%) (raw_coop_176_k256_h200_2026-11-27_33b7fb2.json); at K = 1024-2048 (twelve more;
    aaef546) on 11 of 12 back to back (geomean 2.2%, one 2.5% slower) and on all twelve separated (5.5%) and in server
    mode (2.7-12%, geomean 7.0%), and 0.3-2.1% faster than the ping-pong 128x176 on every shape and mode
    (raw_coop_176_k1024_h200_2026-11-27_aaef546.json). At K = 2560-6144 (ab223ee) on nine fresh shapes at a share of
    0.917 176 read faster on all nine in every mode, by
    1.6-8.7% back to back (geomean 4.0%), 2.1-9.0% separated (4.9%) and 3.1-9.9% in server mode (5.8%); at a share
    of 1.1 (six shapes, 128x64 listed) from 10.5% slower to 16% faster, three of six. On 14 more at 0.917 it read
    8-44% faster than the listed tile alone, every mode (raw_coop_176_mid_*_h200_2026-11-27_ab223ee.json). As
    listed, on the 13 of 2,997 random off-grid shapes it changed without the COOP_176_MIN_M guard, faster than the
    old first batch on all six of M >= 384 (1.9-44% back to back, 5.8-29% in server mode) and on three of seven below
    it, where the wgmma family's 128x192 and 128x256 led by 1-16% on M = 256-304
    (raw_coop_176_listed_h200_2026-11-27_ab223ee.json). From LARGE_FLOP, against 128x256 or 256x192, it read 3-11%
    slower on eleven big shapes, in 2-CTA clusters 2-12% (raw_coop_176_big_h200_2026-11-27_ab223ee.json), so the rule
    stays with the mid shapes."""
    m, n, k = shape
    first = listed[0] if listed else None
    if (not COOP_176_K[0] <= k <= COOP_176_K[1] or m < COOP_176_MIN_M or first is None
            or first.get("schedule") == "pingpong"
            or first["tile_m"] != 128 or first["tile_n"] not in (64, 128)
            or _makespan(m, n, 176, sms) > COOP_176_SHARE * _makespan(m, n, first["tile_n"], sms)):
        return []
    return _k_ring(128, 176, shape, past_k=True)


def _rows_at_short_k(rows: int, n: int, k: int) -> bool:
    """Where a ping-pong grid of `rows` tile-rows walks rows of tiles at short K (ROWS_K, ROWS_MIN_TILE_ROWS), all of
    B within ROWS_B_BYTES: the prior's order there and the cost model's credit for it."""
    return k <= ROWS_K and rows >= ROWS_MIN_TILE_ROWS and 2 * n * k <= ROWS_B_BYTES


def _makespan(m: int, n: int, tile_n: int, sms: int) -> int:
    """Columns of output a CTA computes in the busiest slot of a persistent grid of 128-row tiles: its tiles times
    `tile_n` (a narrower tile that adds no tile to that CTA finishes sooner)."""
    return _busiest_area(m, n, 128, tile_n, sms) // 128


# The fitting tile (`_fitting_tile`) goes second where its busiest CTA computes this share fewer outputs than the
# first listed prior's. NVIDIA's kernels on seven mid shapes where the first batch read 0.74-0.96 ran tiles sized so
# (data/edge_settle_misses_ncu_h200_2026-11-29_5969936/). Swapped, with M between 256 and 576, the short side is cut in
# 16-column steps rather than 64-row ones: second on 13 fresh such shapes it lifted the first batch's best 1.085 back
# to back, 1.086 separated, 1.120 server (geomean), lower on none (data/raw_fitting_tile_small_m_ab_h200_2026-11-29_
# 53cb345.json). Taken on any mid shape in either order it moved 27 fresh first batches 1.000-1.013 and lost 8% where
# it displaced a better tile (raw_fitting_tile_first_batch_ab_h200_2026-11-29_0c8bfdb.json, raw_fitting_tile_fresh_ab_
# h200_2026-11-29_ece2b41.json); unswapped it read 0.77-1.09 of the batch's other tiles, geomean 0.93. Its grid must be
# FIT_MIN_FILL output: that 8% loss was a grid 12% padding.
FIT_MIN_SAVING = 0.05
FIT_MIN_FILL = 0.90
# The short side up to 1024 since the consumers split the tile's rows (_fit_split): on eleven off-grid shapes with a
# short side of 704-960, either orientation, the slot it displaced read x1.078-1.093 (geomean, three modes; 832x2816x704
# 0.792 -> 0.988, 3776x704x7104 0.761 -> 0.935 separated), and where it repeats a listed tile's size, stored from
# registers, -2.6% to +0.5% of it (raw_fitting_tile_wider_ab_h200_2026-11-29_ae7577a.json; measured from 304 at 53cb345)
FIT_MAX_SHORT = 1024
# Its mirror, N the short side, unswapped: against the first-batch slot it displaced on nine off-grid shapes it read
# 0.2-19% faster at K = 4800-14272 (a 0.34 slot lifted to 0.99 on 10496x272x12032), and 7-21% slower at K = 1024 and
# 2560, where the TMA-epilogue 256x128 tile it displaced stores faster than its registers (K = 1152: -0.1% to +2%);
# its 256-row tiles split by rows read 0.3-10% faster than by columns on all four (data/raw_fitting_mirror_ab_h200_
# 2026-11-29_2b3376c.json). Its row splits (128 and 256 rows) store through the TMA epilogue: against the same tiles
# stored from registers (K = 4800-16128) or the slot they displaced (K below this) faster on all sixteen off-grid
# shapes in every mode, 0-12% but 9216x312x7744 (0.39 -> 0.97); 7808x288x1152 0.80-0.84 -> 1.00-1.08, 11008x320x2560
# 0.91-0.93 -> 0.97-1.01 (data/raw_fitting_mirror_tma_ab_h200_2026-11-30_94a4b6a.json). So this K bounds only the
# 192-row mirror, stored from registers.
FIT_MIRROR_MIN_K = 4096
# Down to 64 columns and 128x96 outputs: where the narrower tile keeps one wave and is ranked first, on sixteen off-grid
# shapes the slot read x1.16 (back to back and separated) and x1.19 (server) of the wider tile it displaced, geomean,
# lower by 1.6% at most (296x4032x14976 0.65 -> 0.93 with a swapped 192x64 split in three, 4736x264x4608 0.63 -> 0.97
# with 128x96); the first batch's best x1.13-1.15. Swapped 256x64 and 256x80 tiles, split by columns into m64n32-40
# atoms, read 13-20% below the slot they displaced on four shapes, so a swapped 256-row tile is FIT_MIN_SPLIT_N wide at
# least (data/raw_fitting_narrow_ab_h200_2026-11-30_94a4b6a.json). On twenty fresh shapes drawn after both rules were
# set (data/shapes/fitting_fresh_2026-11-30.txt, raw_fitting_fresh_ab_h200_2026-11-30_94a4b6a.json) the first batch's
# best read x1.15 in every mode (geomean): the twelve narrower tiles x1.18-1.20, the eight mirrors x1.09-1.11; lower on
# two by 0.6-1.5% (192x80 split in three, where the tile it displaced read 1.0 of best NVIDIA).
FIT_MIN_TILE = 128 * 96
FIT_MIN_SPLIT_N = 96
# With scalar stores ptxas spilled the swapped tiles beyond these (168 registers: 192x224 740 bytes, 256x192 1,240), and
# they read 0.70-0.77 of best NVIDIA where the tiles they displaced read 0.86-0.98 (data/raw_fitting_tile_big_small_m_ab
# _h200_2026-11-29_c964822.json). Paired stores spill nothing up to 192x224 and 256x176 (0.685 -> 0.900 on
# 880x5448x4992, data/raw_swapped_paired_stores_h200_2026-11-29_e0115a0.json) but 256x192 still does; 224 columns would
# change the priors of 2 of 2,997 off-grid shapes, so the bounds stay.
FIT_MAX_TILE_N = 208
FIT_MAX_TILE = 256 * 176


def _fitting_tile(shape: tuple[int, int, int], listed: list[dict[str, Any]], sms: int = 132) -> list[dict[str, Any]]:
    """The tile split between the consumers (`_fit_split`; 128-256 rows, 64-FIT_MAX_TILE_N columns,
    FIT_MIN_TILE-FIT_MAX_TILE, at least FIT_MIN_FILL of its padded grid output) of one wave whose CTAs compute the
    fewest outputs, where that is FIT_MIN_SAVING fewer than the busiest CTA of the first listed prior (unsplit): a tile
    that divides a side lets a smaller one keep the grid in one wave. Its columns run along the short side, of 257 to
    FIT_MAX_SHORT: swapped where that is M, as it is where that is N (192-row tiles there from K =
    FIT_MIRROR_MIN_K; the others store through the TMA epilogue)."""
    m, n = shape[0], shape[1]
    swap = 256 < m <= FIT_MAX_SHORT < n
    mirror = 256 < n <= FIT_MAX_SHORT < m
    # 128-row tiles pad no short side that 128 divides: 384x7480x7808 read 0.951 of best NVIDIA, swapped 0.949
    if not listed or not (swap or mirror) or (m if swap else n) % 128 == 0:
        return []
    p0 = {**DEFAULTS, **listed[0]}
    if p0["cluster_k"] > 1:
        return []  # a K split: the outputs a CTA computes do not measure its time
    km, kn, k = kernel_shape(p0, shape)
    bar = _busiest_area(km, kn, p0["tile_m"], p0["tile_n"], sms) * (1.0 - FIT_MIN_SAVING)
    rows, cols = (n, m) if swap else (m, n)
    ranked = []
    for tm, tn in itertools.product((128, 192, 256), range(64, FIT_MAX_TILE_N + 1, 16)):
        tiles, area = ceil_div(rows, tm) * ceil_div(cols, tn), _busiest_area(rows, cols, tm, tn, sms)
        padded = tiles * tm * tn
        fits = tiles <= sms and FIT_MIN_TILE <= tm * tn <= FIT_MAX_TILE and rows * cols >= FIT_MIN_FILL * padded
        fits = fits and not (swap and tm == 256 and tn < FIT_MIN_SPLIT_N)
        if fits and area <= bar:
            ranked.append((area, padded, tm, tn))
    for area, _, tm, tn in sorted(ranked):
        split = _fit_split(tm, tn, swap)
        if mirror and split != "cooperative" and shape[2] < FIT_MIRROR_MIN_K:
            continue
        base = {"tile_m": tm, "tile_n": tn, "group": 1, "acc": "fp32", "schedule": split, "swap_ab": swap,
                "epi": "tma" if mirror and split == "cooperative" else "direct"}
        if _deepest_stages(base, "sm_90a", DOMAIN["stages"][:6]) is None:
            continue  # more accumulators than a consumer holds
        p = _k_deep(base, ceil_div(k, 64), DOMAIN["stages"][:6])
        if feasible(p, shape, "sm_90a")[0]:
            return [p]
    return []


# How the fitting tile's consumers share it. Split by columns (cooperative_n) a 192-row tile gives each consumer
# m64n48-56 atoms, and L1/shared ran 91% busy on 408x6024x8192 (tensor pipe 84%); three consumers of 64 rows
# (cooperative3) brought that to 72% (tensor pipe 90%, nvjet's 92%; data/cooperative3_ncu_h200_2026-11-29_4f8353d/). The
# same tile and ring, three modes (raw_cooperative3_h200_2026-11-29_4f8353d.json, raw_fitting_split_ab_h200_
# 2026-11-29_8bf9f8d.json, raw_fitting_split_slot_ab_h200_2026-11-29_0fdcbbb.json): 192x96 and 192x112 1.5-14% faster on
# seven shapes (K = 1344-16320), 192x128 the same, 192x144-160 -0.6% to +1.2% at K >= 4288 and at K = 1344-1408 up to 4%
# slower. A 128-row tile split by rows (cooperative, one m64 atom over all the columns) read 0-2.8% faster than by
# columns on seventeen shapes in every mode, lower on none. As the fitting tile's split on fifteen shapes' first
# batches: that slot x1.021 back to back and separated, x1.026 server (geomean), lower on none.
FIT_THREE_MAX_N = 112


def _fit_split(tile_m: int, tile_n: int, swap: bool) -> str:
    if tile_m == 192:
        return "cooperative3" if tile_n <= FIT_THREE_MAX_N else "cooperative_n"
    # 256 rows split in two swapped spills (364 bytes at 256x176, paired stores)
    return "cooperative" if tile_m == 128 or not swap else "cooperative_n"


def _busiest_area(m: int, n: int, tile_m: int, tile_n: int, sms: int) -> int:
    """Output elements the busiest CTA of a persistent grid of tile_m x tile_n tiles computes."""
    return ceil_div(ceil_div(m, tile_m) * ceil_div(n, tile_n), sms) * tile_m * tile_n


def _k_ring(tile_m: int, tile_n: int, shape: tuple[int, int, int], past_k: bool = False, sms: int = 132,
            **knobs: Any) -> list[dict[str, Any]]:
    """A tile with the TMA epilogue (and `knobs`: a band, the schedule) and the deepest ring that fits but no deeper
    than K's blocks (two at least) unless `past_k` (the producer fills the rest with the next tile's blocks); [] where
    the shape refuses it. Unless `knobs` name a band, a grid `_gpc_banded` names takes `gpc_band`'s."""
    rows, cols = ceil_div(shape[0], tile_m), ceil_div(shape[1], tile_n)
    banded = "group" not in knobs and _gpc_banded(tile_m, tile_n, shape, sms)
    group = gpc_band(rows, cols, tile_m, tile_n, 2 * shape[1] * shape[2], sms) if banded else 1
    base = {"tile_m": tile_m, "tile_n": tile_n, "group": group, "acc": "fp32", "epi": "tma", **knobs}
    p = _k_deep(base, max(DOMAIN["stages"]) if past_k else ceil_div(shape[2], 64))
    return [p] if feasible(p, shape, "sm_90a")[0] else []


# Tile-rows below which a grid is short: the cost model prices a ping-pong grid's band beyond two waves by its panels
# only there (`estimate_us`; rows and square bands measured -3% to +4% either way on taller ones)
SHORT_GRID_ROWS = 9


def _gpc_banded(tile_m: int, tile_n: int, shape: tuple[int, int, int], sms: int) -> bool:
    """Where a cooperative grid of 128-row tiles of a measured width takes `gpc_band`'s order: up to GPC_BAND_WAVES
    waves, and beyond them below LARGE_FLOP from K past ROWS_K (where each tile's operands outweigh its output). Beyond
    two waves, on fourteen mid grids fresh to the question (2.5-11.7 waves, H200, same rounds, best NVIDIA), the band
    picked read faster than rows on all nine of K = 512-3392 in every mode, by 0.5-8.3% back to back (128x64 in bands
    of 2, 128x128 and 128x256 of 4; geomean 3.7%) and 0.7-8.2% in server mode (4.5%); at K = 64-192 1.1% and 4.2%
    slower back to back on two of the three 128x128 grids and 2.9% in server mode on the third
    (docs/benchmarks/data/raw_gpc_band_beyond_two_waves_h200_2026-11-27_7e54cfc.json)."""
    m, n, k = shape
    if tile_m != 128 or tile_n not in GPC_BAND_WIDTHS:
        return False
    return ceil_div(m, 128) * ceil_div(n, tile_n) <= GPC_BAND_WAVES * sms or (k > ROWS_K and flop(shape) < LARGE_FLOP)


def _listed_priors(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """The hand-written kernel's tiles that matched cuBLASLt's cycles (128x256, then 256x128) with the TMA epilogue and
    the deepest ring; beyond one wave, bands that keep a wave's footprint square (`square_band`), and on one wave
    the order `one_wave_band` measured at the power limit, `gpc_band`'s below it. 256x192 where 192 divides N, as
    for CUTLASS, and first where 128x256 would take more than four waves. No 2-CTA cluster: it has not been timed
    beyond one wave since its barrier fix (docs/benchmarks/data/sweeps/cluster_arrive_2026-11-23_3767b20.txt), and on
    one wave it measured 0.987-0.994 in bands.
    A one-wave grid whose B is at least twice A streams B (and C) with an L2 evict_first hint, so A stays for the next
    call: 1.2% and 1.1% faster power-steady on 1024x4096x8192 in two sweeps on two machines (clock +15-22 MHz, cycles
    unchanged); the hint on A measured nothing on 4096x1024x12288, and on multi-wave shapes it cost
    0.6-4% (A's panels are shared by CTAs that drift apart), so it goes nowhere else. Where 128x256 fills at most
    half a wave, `_half_wave_filler`'s tile comes first."""
    m, n, _ = shape
    out = []
    for tm, tn in ((128, 256), (256, 128)):
        if oversized(tm, tn, m, n):
            continue  # a side of 65-127 beside a 256-row tile
        rows, tiles = ceil_div(m, tm), ceil_div(m, tm) * ceil_div(n, tn)
        if tiles > sms:
            group = widest_band(rows, square_band(tm, tn, sms))
        else:  # `one_wave_band` measured only where the power limit holds the clock
            group = (one_wave_band(rows, tm, tn, tiles) if flop(shape) >= POWER_LIMIT_FLOP
                     else gpc_band(rows, ceil_div(n, tn), tm, tn) if tm == 128 else 1)
        p = {"tile_m": tm, "tile_n": tn, "stages": 4, "group": group, "acc": "fp32", "epi": "tma"}
        if tiles <= sms and n >= 2 * m:  # B's bytes (N*K) at least twice A's (M*K)
            p["l2_evict_first"] = "bc"
        out.append(p)
    out[:0] = _half_wave_filler(shape, sms)
    if n % 192 == 0 and m >= 256:
        wide = {"tile_m": 256, "tile_n": 192, "stages": 3, "acc": "fp32", "epi": "tma",
                "group": widest_band(ceil_div(m, 256), square_band(256, 192, sms))}
        # Many waves: 256x192 first. It led 128x256 on 4096x12288x16384 (11.6 waves of 128x256) in four campaigns
        # by 1.0-3.2% and on 16384x12288x8192 by 1.6%; listed third, a campaign never measured it there (one prior
        # is reserved a step). At 2.9 waves (1024x12288x8192) the two were within 1.3% either way.
        if ceil_div(m, 128) * ceil_div(n, 256) > 4 * sms:
            out.insert(0, wide)
        else:
            out.append(wide)
    # K = 256-2048: ping-pong first (a half-wave grid needs K >= 8192 from LARGE_FLOP, so the two never meet)
    out[:0] = _pingpong_prior(shape, sms)
    out[:0] = _large_176_first(shape, out, sms)
    return [pricing.even_grid(sys.modules[__name__], p, shape) for p in out]


# Large shapes where a cooperative 128x176 goes first (`_large_176_first`), below POWER_LIMIT_FLOP
LARGE_176_MAX_K = 2560
LARGE_176_SHARE = 0.9
LARGE_176_MIN_M = 2048


def _large_176_first(shape: tuple[int, int, int], listed: list[dict[str, Any]], sms: int) -> list[dict[str, Any]]:
    """From LARGE_FLOP to POWER_LIMIT_FLOP, M from LARGE_176_MIN_M and K up to LARGE_176_MAX_K (past the ping-pong
    prior's): the cooperative 128x176 with five stages ahead of the listed tiles where its busiest CTA computes at most
    LARGE_176_SHARE of what the least busy of theirs does (`_busiest_area`: a third wave of 128x256 or 256x128 that
    176 does without). Against each shape's whole first batch at 4ee965f (H200, same rounds, best NVIDIA), on 35
    off-grid shapes of 2^35-2^36 FLOP in four probes: with M >= 2048 and K <= 2560 176 read faster on the seven the
    rule was set on, in every mode (back to back by 2.1-13%), and on eight fresh shapes on 5 of 8 back to back
    (geomean 3.3%; 2048x6656x2432 9% slower, two within 2%), 7 of 8 separated (4.5%) and in server mode (4.0%); at
    K = 3136-4032 on 4 of 7 (slower on all three from K = 3904); with M < 2048 slower on 9 of 10 (up to 21%), and
    where a listed tile's grid was as short (share > 1) on all three
    (raw_coop_176_large_*_h200_2026-11-27_4ee965f.json)."""
    m, n, k = shape
    if (not LARGE_FLOP <= flop(shape) < POWER_LIMIT_FLOP or not COOP_176_K[0] <= k <= LARGE_176_MAX_K
            or m < LARGE_176_MIN_M or not in_16_byte_rows(n, k) or not listed
            or listed[0].get("schedule") == "pingpong"):
        return []
    least = min(_busiest_area(m, n, p["tile_m"], p["tile_n"], sms) for p in listed)
    if _busiest_area(m, n, 128, 176, sms) > LARGE_176_SHARE * least:
        return []
    return _k_ring(128, 176, shape, past_k=True)


def _half_wave_filler(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """Where 128x256 tiles fill at most half a wave (a side of 128-256 beside a long one and K), the larger of 128x128
    and 128x64 whose grid fills WAVE_FILL of the SMs: the mid-shape rule's first prior (`_wave_filling_priors`; from
    LARGE_FLOP such a grid needs K >= 8192, so its 64x64 fallback never applies); [] elsewhere. On four such shapes from
    LARGE_FLOP (H200, back to back, 32-64 tiles of 128x256 at 0.36-0.80 of best NVIDIA) the filling tile read
    0.92-0.98: 128x128 on 256x8192x8192 and 128x16384x16384, 128x64 (stores from registers) on 4096x256x16384 and
    8192x128x16384 (docs/benchmarks/data/raw_skinny_large_h200_2026-11-26_c5a56ce.json); as listed here, 128x64
    read 0.79-0.96 on three more where 128x256 read 0.33-0.34 (raw_half_wave_filler_h200_2026-11-26_e9fcdd6.json)."""
    m, n, _ = shape
    if ceil_div(m, 128) * ceil_div(n, 256) > sms // 2:
        return []
    return _wave_filling_priors(shape, sms)[:1]


# A tile split by columns into atoms up to 40 wide (tile_n up to 80) reads more shared memory per MMA than the tensor
# pipe can use: swapped 256x64 and 256x80 split so read 13-20% below the fitting tiles the model had ranked under them
# (data/raw_fitting_narrow_ab_h200_2026-11-30_94a4b6a.json). Priced at 0.85 (0.70-0.85 rank the same), the model's
# first pick there went from 1.038 to 1.002 of the fastest's time; over every committed probe file (3,938 shape rows,
# three modes) only those four shapes' rankings moved
NARROW_SPLIT_N, NARROW_SPLIT_EFF = 80, 0.85


def _narrow_split_eff(p: dict[str, Any]) -> float:
    narrow = p.get("schedule") == "cooperative_n" and p["tile_n"] <= NARROW_SPLIT_N
    return NARROW_SPLIT_EFF if narrow else 1.0


def estimate_us(p: dict[str, Any], shape: tuple[int, int, int], arch: str) -> float:
    """hopper_raw: a persistent grid of one CTA per SM over unpadded tiles, in clusters of one or two CTAs."""
    shape = kernel_shape(p, shape)
    m, n, k = shape
    sms = pricing.arch_limits(arch).num_sms
    tm, tn = p["tile_m"], p["tile_n"]
    rows, cols = ceil_div(m, tm), ceil_div(n, tn)
    tiles = rows * cols
    eff = pricing.WGMMA_TILE_EFF.get((tm, tn), 0.9)
    pingpong, kblocks = p.get("schedule") == "pingpong", ceil_div(k, 64)
    if pingpong:
        # a ping-pong warpgroup's unit is a whole tm x tn tile, the cooperative (2 tm) x tn tile's share of one: priced
        # so, the model's rank correlation with the measured time rose on five of the six probe files of 13a0c15
        # (-0.30 -> +0.02 on the first-batch A/B's eleven fresh shapes, +0.56 -> +0.80 on ten big shapes; the sixth
        # +0.13 -> +0.11) and from -0.51 to +0.51 on the campaign of ab942c8 (`scripts/costmodel_check.py`)
        eff = pricing.WGMMA_TILE_EFF.get((2 * tm, tn), eff)
    # stores from registers leave the tensor cores idle longer: 626k against 591k cycles a call for the TMA
    # epilogue on 8192x2048x8192 (H200, power-steady, docs/benchmarks/data/sweeps/raw_tma_2026-11-23_1c52652.json)
    eff *= 1.0 if p.get("epi") == "tma" else 0.94
    eff *= _narrow_split_eff(p)
    # beyond one wave one CTA and a pair are even with CUTLASS's 2x1 persistent 128x256 (two campaigns: -0.6% to
    # +1.0% on 8192x2048x8192 and 8192x4096x16384, power-steady); on one wave a pair took 1.3% longer than one CTA
    # (docs/benchmarks/data/sweeps/cluster_arrive_2026-11-23_3767b20.txt)
    eff *= 0.987 if tiles <= sms and p.get("cluster_m", 1) == 2 else 1.0
    # two m64 atoms per warpgroup read each B slice twice from shared memory: 256x128 measured 0.5-3.3% behind
    # 128x256 on five big shapes in two campaigns (mean 1.8%); 256x192 reads 22% less from L2 and keeps its table value
    if (tm, tn) == (256, 128):
        eff *= 0.98
    ck = p.get("cluster_k", 1)  # a split multiplies the CTAs and divides each one's chain of k-blocks
    ctas = tiles * ck
    waves_factor = ceil_div(ctas, sms) * sms / ctas if ctas > sms else 1.0
    busy = min(1.0, ctas / sms)
    t_compute = 2.0 * tiles * tm * tn * k / (pricing.WGMMA_PEAK * eff * busy) * waves_factor
    t_mem = 2.0 * (m * k + n * k + m * n) / pricing.DRAM_BW
    t_chain = ceil_div(kblocks, ck) * 0.06e-6 * ceil_div(ctas, sms)
    if ck > 1 and pricing.CLUSTER_HANDOFF_GBS and not streams(shape):
        t_chain += (ck - 1) * tm * tn * 4 / (pricing.CLUSTER_HANDOFF_GBS * 1e9) * ceil_div(ctas, sms)
    # two stages of k64 leave the loads exposed: 256x192 with 2 measured 0.79-0.83 of cuBLASLt all eight times five
    # campaigns proposed it (three big shapes), where its 3-stage twin measured 0.96-1.05
    stages_pen = {2: 1.25, 3: 1.03}.get(p["stages"], 1.0)
    if tm == 64 and streams(shape):
        # A streaming CTA has only its ring's bytes in flight: below about 150 KB it streams B slower. In the campaign
        # named at STREAMING_DOMAIN, rings cut to 84-112 KB read 2-15% below the same tile's 168-224 KB ring on five
        # shapes of M = 32-64 (64x32 on 64x2048x4096: 1.005 against 1.099 of cuBLASLt-AutoTuning); at M = 8-16 cuts to
        # 60-119 KB read -4% to +2%
        inflight = p["stages"] * (a_box_rows(m, tm) + tn) * 128
        t_mem *= 1.0 + 0.25 * max(0.0, 1.0 - inflight / STREAM_INFLIGHT_BYTES)
    # bands of tile-rows keep A's panels in L2 while the band's columns pass (as CUTLASS's swizzle does)
    power_limited_waves = tiles > sms and 2.0 * m * n * k > POWER_LIMIT_FLOP
    if pingpong and p["group"] == 1 and _rows_at_short_k(rows, n, k):
        # rows at K = 256 from 32 tile-rows read 3% faster than the square bands back to back (ROWS_K)
        band_gain = 0.97 * (0.95 if power_limited_waves else 1.0)
    elif power_limited_waves:
        band_gain = {1: 1.0, 2: 0.98, 4: 0.96, 8: 0.95, 16: 0.95}[p["group"]]
    elif tiles <= sms and 2.0 * m * n * k >= POWER_LIMIT_FLOP and p["group"] > 1:
        # one wave: neighbours sharing the wider operand tile cost less energy (one_wave_band)
        band_gain = 0.97 if tn > tm else 1.01
    elif (p.get("cluster_m", 1) == 1 and _gpc_banded(tm, tn, shape, sms)
          and (not pingpong or tiles <= GPC_BAND_WAVES * sms or rows < SHORT_GRID_ROWS)):
        # below the power limit: the fewer operand panels runs of neighbouring CTAs touch, the fewer sectors the L2
        # serves (gpc_band); the time as that count's ratio to rows' to the GPC_PANEL_EXP. Not ping-pong beyond two
        # waves but on short grids, where rows and square bands measured -3% to +4% either way (_pingpong_prior)
        band_gain = (run_panels(rows, cols, p["group"], tm, tn) / run_panels(rows, cols, 1, tm, tn)) ** GPC_PANEL_EXP
    else:
        band_gain = 1.0
    band_gain *= pricing.even_grid_gain(p, shape)
    # A cooperative tile's epilogue stops both warpgroups; ping-pong hides it behind the other's mainloop, priced as
    # 0.9 k-blocks a tile (at most 8%) from four k-blocks on: the 128x128 ping-pong read 7-8% above the cooperative
    # kernel at K = 256-512, 2-6% at 1024, 1.4% below at 2048 and 3% below at K = 64
    # (docs/benchmarks/data/raw_pingpong_*_2026-11-27_13a0c15.json). 0.9 rather than 0.6: over the thirteen probe
    # files in docs/benchmarks/data, back to back and cold (scripts/costmodel_check.py), the mean Spearman rose 0.37 ->
    # 0.42, on six file-modes by 0.06-0.18 (the first-batch A/B's 0.02 -> 0.20), none fell by more than 0.04 (ten
    # run archives: no change beyond 0.05); 1.2 fell 0.11 on the big shapes of K = 1024-8192
    if pingpong and kblocks >= 4:
        band_gain /= 1.0 + min(0.08, 0.9 / kblocks)
    if pingpong and p.get("epi") != "tma":
        # a ping-pong warpgroup storing from registers outlasts the other's mainloop and the two serialise: 0.38-0.58
        # of the same tile with the TMA epilogue, memory-bound K = 64 too (128x128 on five shapes of K = 64-512,
        # H100, docs/benchmarks/data/raw_pingpong_h100_2026-11-27_13a0c15.json), where the model had ranked it first
        band_gain /= PINGPONG_DIRECT_SPEED
    return ((max(t_compute, t_mem) + t_chain) * stages_pen * band_gain * 1e6 + pricing.LAUNCH_US
            + pricing.CUTLASS_HOST_US)
