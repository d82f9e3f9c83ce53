"""A rough analytic time model per family: the prior mean of the policy's surrogate.

It only has to rank configurations sensibly before any measurement (tiles that fill the machine, waves, split-K
reduction, memory traffic, launch cost); the surrogate corrects it with measured speedups. Numbers are for an
H100/H200-class part (132 SMs); other archs scale by their SM count.
"""
from __future__ import annotations

import math
from typing import Any

from agent.families import hopper_wgmma
from agent.families.common import arch_limits, ceil_div

MMA_SYNC_PEAK = 600e12  # dense fp16 mma.sync, whole chip, flop/s (measured kernels reach ~60-65% of wgmma peak)
WGMMA_PEAK = 800e12
DRAM_BW = 3.3e12
L2_BW = 9e12
LAUNCH_US = 2.5  # back-to-back GPU time of an almost empty launch (the evaluator's offline floor is ~2.9 us)
CUTLASS_HOST_US = 2.0  # argument building + initialize() on the host, per call
SPLITK_PASS_US = 1.5  # measured: split-K's partial write + last-CTA reduction on launch-bound shapes (H200)
CLUSTER_REDUCE_US = 0.4  # the cluster split's reduction stays in distributed shared memory: no second pass
STREAMK_SPLIT_US = 1.2  # CUTLASS stream-K split-K fixup, per split (H200: 2 splits +4.6 us, 4 splits +6.7 us)
SLICE_SUM_US = 0.8  # batched split-K: the summing kernel, launched early (PDL), beyond its own memory traffic
KTILE_LATENCY_US = 0.12  # serial cost of one main-loop iteration that the pipeline cannot hide
# Stream-K without a split on a grid at the power limit (>= 2^36 FLOP), against the best persistent CUTLASS config of
# the same shape (runs 25 and 26, H200): 0.89-0.92 on one wave, 0.95-0.98 at 2.9 waves, 0.98 at 3.9, 0.99-1.00 at
# 7.8, 0.98-1.02 at 11.6, 1.01-1.02 at 46.5. A tail wave costs clock, not time, at the power limit, so stream-K's
# even split recovers only part of it, and its fix-up of the tiles cut between SMs costs about a tenth of a wave.
STREAMK_POWER_CREDIT = 0.3  # the share of the persistent grid's tail that stream-K's even split wins back
STREAMK_FIXUP_WAVES = 0.09  # the fix-up, in waves of the persistent grid
# each further split of every tile, there: 2 splits measured 0.942 against 0.984 without (8192x4096x16384) and
# 0.89 against 0.93-0.97 (8192x2048x8192) in run 27, where the model had ranked them first
STREAMK_SPLIT_POWER = 0.05
# grid=even (the fewest persistent CTAs that take the same waves) beside one CTA per SM, power-steady on three H200s
# (sweeps r33-r35): hopper_raw +1.0/+1.4/+1.6% on 8192x2048x8192, +1.3/+1.4/+1.4% on 8192x4096x16384, +0.8% on
# 4096x12288x16384 and 16384x12288x8192, 0.0% on 1024x12288x8192; CUTLASS persistent +0.8% and 0.0% there
EVEN_GRID_GAIN = 0.99
# the problem size from which a big GEMM runs at the H200's power limit. Stream-K and even grids are priced (and even
# grids proposed, priors.even_grid) from it on (>=); the raster and band credits only above it (>), as they were
# fitted: 1024x4096x8192 is exactly 2^36 FLOP
POWER_LIMIT_FLOP = 2 ** 36
PDL_US = 0.9  # programmatic dependent launch: launch latency hidden behind the previous kernel (H200, measured)
# wgmma tiles (tile_m, tile_n) relative to 128x256: operand bytes per MMA, accumulator fit, wave fill
WGMMA_TILE_EFF = {(128, 256): 1.0, (256, 128): 1.0, (128, 192): 0.95, (128, 128): 0.88, (64, 256): 0.85,
                  (64, 128): 0.75, (64, 192): 0.8, (256, 64): 0.8, (128, 64): 0.7, (64, 64): 0.6, (256, 192): 1.02,
                  (256, 256): 0.9, (256, 176): 1.0, (256, 160): 1.0, (256, 144): 1.0, (128, 176): 0.94,
                  (128, 160): 0.92, (128, 144): 0.9, (256, 96): 0.85, (128, 96): 0.8}


def _occupancy(threads: int, smem: int, regs: int, arch: str) -> int:
    lim = arch_limits(arch)
    by_smem = max(1, (228 * 1024 if lim.sm >= 90 else 164 * 1024) // max(smem, 1))
    by_regs = max(1, lim.regs_per_sm // max(regs * threads, 1))
    by_threads = max(1, 2048 // threads)
    return max(1, min(by_smem, by_regs, by_threads, 32))


def _mma_sync_time(shape, bm, bn, bk, threads, smem, split, stages, arch, warp_tile, cluster=False) -> float:
    m, n, k = shape
    sms = arch_limits(arch).num_sms
    tiles = ceil_div(m, bm) * ceil_div(n, bn)
    ctas = tiles * split
    acc_regs = bm * bn // threads
    occ = _occupancy(threads, smem, acc_regs + 48, arch)
    slots = sms * occ
    waves = ceil_div(ctas, slots)
    wtm, wtn = warp_tile
    eff = min(1.0, math.sqrt(wtm * wtn / (64.0 * 64.0)))  # small warp tiles spend more on ldmatrix than mma
    eff *= min(1.0, (threads // 32) * min(occ, ceil_div(ctas, sms)) / 8.0) ** 0.5  # too few warps per SM
    padded = 2.0 * ceil_div(m, bm) * bm * ceil_div(n, bn) * bn * k
    busy = min(1.0, ctas / sms)
    t_compute = padded / (MMA_SYNC_PEAK * max(eff, 0.05) * busy) * (waves * slots / ctas if ctas > slots else 1.0)
    reads = 2.0 * (m * k * ceil_div(n, bn) + n * k * ceil_div(m, bm))
    uniq = 2.0 * (m * k + n * k)
    t_mem = uniq / DRAM_BW + max(0.0, reads - uniq) / L2_BW + 2.0 * m * n / DRAM_BW
    ksplit_tiles = ceil_div(ceil_div(k, bk), split)
    t_chain = waves * ksplit_tiles * KTILE_LATENCY_US * 1e-6 * (2.0 / min(stages, 4))
    if split > 1 and cluster:
        t_red = CLUSTER_REDUCE_US * 1e-6
    else:
        t_red = (split * m * n * 8.0 / L2_BW + SPLITK_PASS_US * 1e-6) if split > 1 else 0.0
    return max(t_compute, t_mem) + t_chain + t_red + LAUNCH_US * 1e-6


def estimate_us(family: str, p: dict[str, Any], shape: tuple[int, int, int], arch: str = "sm_90a") -> float:
    """Estimated time of one call in microseconds (used for ranking only)."""
    return _estimate_us(family, p, shape, arch) - (PDL_US if p.get("pdl") else 0.0)


def _estimate_us(family: str, p: dict[str, Any], shape: tuple[int, int, int], arch: str) -> float:
    m, n, k = shape
    if family == "small":
        threads = p["wm"] * p["wn"] * 32
        smem = p["stages"] * (p["bm"] * (p["bk"] + 8) + p["bk"] * (p["bn"] + 8)) * 2
        ck = p.get("cluster_k", 1)
        t = _mma_sync_time(shape, p["bm"], p["bn"], p["bk"], threads, smem, max(p["split_k"], ck), p["stages"],
                           arch, (p["bm"] // p["wm"], p["bn"] // p["wn"]), cluster=ck > 1)
        # 16-byte stores from a shared-memory tile: measured 5.2 against 7.3 us on 1024x2048x64
        smem_epi = p.get("epi", "direct") == "smem" or ck > 1
        return t * 1e6 - (0.3 * min(1.0, m * n / 2 ** 21) if smem_epi else 0.0)
    if family == "ampere_cute":
        threads = p["wm"] * p["wn"] * 32
        smem = (p["bm"] + p["bn"]) * p["bk"] * p["stages"] * 2
        t = _mma_sync_time(shape, p["bm"], p["bn"], p["bk"], threads, smem, p["split_k"], p["prefetch"] + 1, arch,
                           (p["bm"] // p["wm"], p["bn"] // p["wn"]))
        # bigger rasterisation groups keep B panels in L2 on large problems
        if 2.0 * m * n * k > 2 ** 30 and p["block_swizzle"] == 1:
            t *= 1.04
        if not p["reg_pipeline"]:
            t *= 1.03
        return t * 1e6 + (0.0 if p["epilogue"] == "smem" else 0.2)
    if family == "hopper_wgmma":
        sms = arch_limits(arch).num_sms
        tm, tn, tk = p["tile_m"], p["tile_n"], p["tile_k"]
        gm, gn, _ = hopper_wgmma.cta_grid(p, shape)  # CUTLASS computes the tiles that pad the grid to the cluster
        tiles = gm * gn
        coop = p["schedule"] == "cooperative"
        eff = WGMMA_TILE_EFF.get((tm, tn), 0.7)
        if not coop and (tm, tn) in ((128, 128), (64, 256), (128, 192)):
            eff *= 1.02  # ping-pong overlaps one warpgroup's epilogue with the other's mainloop
        if p["b_operand"] == "row":
            # K slices that each stream their stretch of B from DRAM read it faster as stored: 4% less time and
            # energy per call on 256x2048x16384 (sweep r60); elsewhere the N-major B measured ~1% behind
            eff *= 1.03 if p["scheduler"] == "batched" and b_streams(shape) else 0.99
        if tk == 128:
            eff *= 0.9  # half the stages of tile_k=64 in the same shared memory: measured 10-40% slower on H200
        cl = p["cluster_m"] * p["cluster_n"]
        # a one-wave grid gains nothing from multicast (no later wave reuses the data) and pays its coupling: 1x1
        # measured 1% faster than 2x1 on 1024x4096x8192, and 4-CTA clusters do not all fit at once there (0.62)
        eff *= {1: _single_cta_price(tiles / sms), 2: 1.0, 4: 0.99}[cl] if tiles > sms else \
            {1: 1.0, 2: 0.99, 4: 0.9}[cl]
        padded = 2.0 * gm * tm * gn * tn * k
        # priced against the persistent grid of the same tiles (STREAMK_POWER_CREDIT says what was measured)
        streamk_at_power_limit = p["scheduler"] == "streamk" and 2.0 * m * n * k >= POWER_LIMIT_FLOP
        if streamk_at_power_limit:
            units = tiles
            waves = tiles / sms
            tail = ceil_div(tiles, sms) / waves if tiles > sms else 1.0 / waves
            cut = STREAMK_FIXUP_WAVES / max(waves, 1.0) if tiles % sms else 0.0
            rel = 1.0 + STREAMK_POWER_CREDIT * (1.0 / tail - 1.0) + cut + STREAMK_SPLIT_POWER * (p["splits"] - 1)
            waves_factor = rel * (tail if tiles > sms else 1.0)
            fix = 0.0
        elif p["scheduler"] == "streamk":
            units = tiles * p["splits"] if p["splits"] > 1 else max(tiles, sms)
            waves_factor = 1.0 if p["splits"] == 1 else ceil_div(units, sms) * sms / units
            fix = (2.0 if (p["splits"] > 1 or tiles % sms) else 0.0) + STREAMK_SPLIT_US * p["splits"] * (p["splits"] > 1)
        elif p["scheduler"] == "batched":
            units = tiles * p["splits"]
            waves_factor = ceil_div(units, sms) * sms / units
            fix = SLICE_SUM_US + 1e6 * (p["splits"] * 4.0 + 2.0) * m * n / L2_BW
        else:
            units = tiles
            waves_factor = ceil_div(tiles, sms) * sms / tiles if tiles > sms else 1.0
            fix = 0.0
        busy = min(1.0, units / sms)
        t_compute = padded / (WGMMA_PEAK * eff * busy) * waves_factor
        uniq = 2.0 * (m * k + n * k + m * n)
        t_mem = uniq / DRAM_BW
        ktiles = ceil_div(k, tk) // (p["splits"] if p["scheduler"] != "persistent" and not streamk_at_power_limit
                                     else 1)
        # each SM still walks a wave's share of every k-tile in turn: an even split shortens no SM's chain
        even = p["scheduler"] == "streamk" and not streamk_at_power_limit
        t_chain = ktiles * 0.06e-6 * (1 if even else ceil_div(units, sms))
        stages_pen = 1.0 if p["stages"] == 0 else (1.03 if p["stages"] < 4 else 1.0)
        # wider swizzles keep more of A and B in L2; at the power limit every DRAM byte costs clock (16384x12288x8192,
        # 128x256, power-steady: swizzle 2 / 4 / 8 at 0.93 / 0.97 / 0.98 of cuBLASLt)
        raster_gain = {1: 1.0, 2: 0.98, 4: 0.96, 8: 0.95}[p["swizzle"]] if 2.0 * m * n * k > POWER_LIMIT_FLOP \
            else 1.0
        raster_gain *= _even_grid_gain(p, shape)
        t = (max(t_compute, t_mem) + t_chain) * stages_pen * raster_gain
        return t * 1e6 + LAUNCH_US + CUTLASS_HOST_US + fix
    if family == "hopper_raw":
        return _raw_us(p, shape, arch)
    raise ValueError(f"no cost model for family {family!r}")


L2_BYTES = 50 * 2 ** 20  # the H100's L2 (the H200 has 60 MiB): an operand this large mostly streams from DRAM


def b_streams(shape: tuple[int, int, int]) -> bool:
    """B (K x N halves) does not fit in the L2, so whoever reads it reads DRAM."""
    _, n, k = shape
    return 2 * n * k >= L2_BYTES


# up to this many waves a 1x1 cluster leads its 2x1 twin (_single_cta_price); the priors list it first there
SINGLE_CTA_MAX_WAVES = 4.0


def _single_cta_price(waves: float) -> float:
    """A 1x1 cluster's efficiency beside a 2x1 of the same CUTLASS tile on a multi-wave grid.

    128x256 cooperative persistent, swizzle 8, power-steady on H100s, 1x1 / 2x1: sweep r57 (two machines) +0.6-0.7%
    at 3.9 waves (8192x2048x8192), +0.8-0.9% at 2.9, -0.9-1.2% at 7.8, -0.8-0.9% at 11.6, -1.9% at 46.5; sweep r58
    (shapes no prior was set on) +0.4% at 1.9, -0.1% at 3.9 (4096x4096x8192), -0.25% at 5.8, -0.8% at 7.8.
    Multicast halves a pair's L2 reads, which pays once enough waves contend for L2; below that the pair's coupling
    costs more than it saves.
    """
    if waves <= SINGLE_CTA_MAX_WAVES:
        return 1.004
    return 0.997 if waves <= 6.0 else (0.99 if waves <= 16.0 else 0.98)


def _even_grid_gain(p: dict[str, Any], shape: tuple[int, int, int]) -> float:
    """Both persistent families, where the grid runs at the power limit (EVEN_GRID_GAIN says what was measured)."""
    m, n, k = shape
    return EVEN_GRID_GAIN if p.get("grid") == "even" and 2.0 * m * n * k >= POWER_LIMIT_FLOP else 1.0


def _raw_us(p: dict[str, Any], shape: tuple[int, int, int], arch: str) -> float:
    """hopper_raw: a persistent grid of one CTA per SM over unpadded tiles, in clusters of one or two CTAs."""
    m, n, k = shape
    sms = arch_limits(arch).num_sms
    tm, tn = p["tile_m"], p["tile_n"]
    tiles = ceil_div(m, tm) * ceil_div(n, tn)
    eff = WGMMA_TILE_EFF.get((tm, tn), 0.9)
    # stores from registers leave the tensor cores idle longer: 626k against 591k cycles a call for the TMA
    # epilogue on 8192x2048x8192 (H200, power-steady, docs/benchmarks/data/sweeps/raw_tma_2026-11-23_1c52652.json)
    eff *= 1.0 if p.get("epi") == "tma" else 0.94
    # beyond one wave one CTA and a pair are even with CUTLASS's 2x1 persistent 128x256 (runs 25 and 26: -0.6% to
    # +1.0% on 8192x2048x8192 and 8192x4096x16384, power-steady); on one wave a pair took 1.3% longer than one CTA
    # (docs/benchmarks/data/sweeps/cluster_arrive_2026-11-23_3767b20.txt)
    eff *= 0.987 if tiles <= sms and p.get("cluster_m", 1) == 2 else 1.0
    # two m64 atoms per warpgroup read each B slice twice from shared memory: 256x128 measured 0.5-3.3% behind
    # 128x256 on five big shapes in runs 25 and 26 (mean 1.8%); 256x192 reads 22% less from L2 and keeps its table value
    if (tm, tn) == (256, 128):
        eff *= 0.98
    waves_factor = ceil_div(tiles, sms) * sms / tiles if tiles > sms else 1.0
    busy = min(1.0, tiles / sms)
    t_compute = 2.0 * tiles * tm * tn * k / (WGMMA_PEAK * eff * busy) * waves_factor
    t_mem = 2.0 * (m * k + n * k + m * n) / DRAM_BW
    t_chain = ceil_div(k, 64) * 0.06e-6 * ceil_div(tiles, sms)
    # two stages of k64 leave the loads exposed: 256x192 with 2 measured 0.79-0.83 of cuBLASLt all eight times runs
    # 25-29 proposed it (three big shapes), where its 3-stage twin measured 0.96-1.05
    stages_pen = {2: 1.25, 3: 1.03}.get(p["stages"], 1.0)
    # bands of tile-rows keep A's panels in L2 while the band's columns pass (as CUTLASS's swizzle does)
    if tiles > sms and 2.0 * m * n * k > POWER_LIMIT_FLOP:
        band_gain = {1: 1.0, 2: 0.98, 4: 0.96, 8: 0.95, 16: 0.95}[p["group"]]
    elif tiles <= sms and 2.0 * m * n * k >= POWER_LIMIT_FLOP and p["group"] > 1:
        # one wave: neighbours sharing the wider operand tile cost less energy (priors._one_wave_band, sweep r48)
        band_gain = 0.97 if tn > tm else 1.01
    else:
        band_gain = 1.0
    band_gain *= _even_grid_gain(p, shape)
    return (max(t_compute, t_mem) + t_chain) * stages_pen * band_gain * 1e6 + LAUNCH_US + CUTLASS_HOST_US
