"""What the families' cost models and priors share: an H100/H200-class part's rates, the mma.sync time model, the
problem sizes where launches, wgmma throughput and the power limit take over, and the even persistent grid.

A family's `estimate_us` only has to rank its configurations sensibly before any measurement (tiles that fill the
machine, waves, split-K reduction, memory traffic, launch cost); the policy's surrogate corrects it with measured
speedups. Numbers are for a 132-SM part; other archs scale by their SM count.
"""
from __future__ import annotations

import math
from typing import Any

from .common import arch_limits, ceil_div, in_16_byte_rows, kernel_shape

SMALL_FLOP = 2 ** 33  # below: the launch and the k-loop latency dominate
LARGE_FLOP = 2 ** 35  # above: wgmma tensor-core throughput dominates
LAUNCH_FLOP = 2 ** 31  # below: one-launch kernels (the launch_bound, launch_wave and output_bound size classes)
OUTPUT_BOUND_OUTPUTS = 2 ** 19  # below LAUNCH_FLOP, outputs from which writing C outweighs the launch (output_bound)
# Outputs from which a launch-bound shape's 32x32 tiles (one CTA per 1,024 outputs) make about a wave: the top of
# that class (ampere_cute's first prior, size_class's launch_wave)
LAUNCH_WAVE_OUTPUTS = 2 ** 17
MMA_SYNC_PEAK = 600e12  # dense fp16 mma.sync, whole chip, flop/s (measured kernels reach ~60-65% of wgmma peak)
WGMMA_PEAK = 800e12
DRAM_BW = 3.3e12
L2_BW = 9e12
LAUNCH_US = 2.5  # back-to-back GPU time of an almost empty launch (the evaluator's offline floor is ~2.9 us)
CUTLASS_HOST_US = 2.0  # argument building + initialize() on the host, per call
# measured: split-K's partial write + last-CTA reduction on launch-bound shapes (H200): 1.5 us with a __threadfence
# in every thread; one thread's acq_rel add took 0.35 us (median) off each of 34 split kernels in every mode
# (docs/benchmarks/data/raw_lean_splitk_arrive_h200_2026-11-30_35a8b97.json)
SPLITK_PASS_US = 1.15
CLUSTER_REDUCE_US = 0.4  # the cluster split's reduction stays in distributed shared memory: no second pass
STREAMK_SPLIT_US = 1.2  # CUTLASS stream-K split-K fixup, per split (H200: 2 splits +4.6 us, 4 splits +6.7 us)
SLICE_SUM_US = 0.8  # batched split-K: the summing kernel, launched early (PDL), beyond its own memory traffic
# and per slice beyond two: over 920 probe rows of the batched split (H200 and H100, every mode; docs/benchmarks/data,
# scripts/costmodel_check.py) the model had their time against the fastest player 1.08x too short at 4 slices and
# 1.15x at 8 (2 slices 0.98x); with this 1.05x and 1.04x (0.98x). Over the 18 probe files with such rows the summed
# Spearman rose 10.47 -> 11.44 and the first pick went 1.054 -> 1.047 of the fastest (wgmma_wave_gap 1.115 -> 1.036,
# where a 2-slice 128x160 tk128 split had ranked first and read 0.50; one file worse, raw_a_spanning_tiles 1.066 ->
# 1.102)
SLICE_PASS_US = 1.0
# The wgmma family's batched split in a 2-CTA cluster against the same kernel alone, same rounds (H100, six skinny
# long-K shapes, two tiles each, docs/benchmarks/data/wgmma_split_clusters_h100_2026-11-28_2fba83f.json): 2x1 read
# 0.93 back to back and 0.92 in server mode (geomeans, 0.81-1.00), 1x2 0.98 and 0.97 (0.90-1.11, ahead on one of
# twelve); an H200 probe (skinny_wgmma_clusters_h200_2026-11-26_e94d93b.json) had the best cluster at -4.2% to +0.7%.
BATCHED_CLUSTER_PRICE = {(2, 1): 0.93, (1, 2): 0.975}
# A one-wave batched split of 128-row tiles from 96 wide: every CTA runs one long K slice, and the narrow tile's lower
# efficiency on big grids does not show. 128x96 in two slices read 7.5-9.5% faster than 128x192 in four at the same
# CTA count (H100, four shapes, the file above; the first on six of seven in wgmma_wave_split_h200_2026-11-27_a897fc4
# .json). Priced at this tile efficiency, with the partials' write at DRAM speed (hopper_wgmma.estimate_us), the
# model's Spearman over the 14 probe files with batched splits rose from 6.57 to 8.00 (summed) and its first picks
# from 1.116 to 1.065 of the fastest's time (mean); worse on one file, by 0.01 of Spearman.
ONE_WAVE_SPLIT_EFF = 0.95
KTILE_LATENCY_US = 0.12  # serial cost of one main-loop iteration that the pipeline cannot hide
# The wgmma family's main-loop chain counted in k-blocks of this depth whatever its tile_k, and a 128-deep k-tile priced
# by its ring's depth (2 or 3 stages fit): counted per k-tile, a 128-deep tile halved the chain and led the search's
# mutations (9 of 16 second-step proposals on four thin long-K grid shapes, each 4-18% slower than its 64-deep twin:
# docs/benchmarks/data/tables/fp32_thin_long_k_grid_h200_2026-11-28_96e21fd.md). Over the probe files' 84 rows of
# tile_k = 128 the model had their time against the fastest player 1.57x too short in rings of two stages and 1.25x in
# rings of three (geomeans over 51 and 30 rows), 1.07x and 1.15x with these; the 64-deep rows are unchanged.
CHAIN_BLOCK_K = 64
TK128_RING_PRICE = {2: 1.6, 3: 1.25}
# Stream-K without a split on a grid at the power limit (>= 2^36 FLOP), against the best persistent CUTLASS config of
# the same shape (two campaigns, H200): 0.89-0.92 on one wave, 0.95-0.98 at 2.9 waves, 0.98 at 3.9, 0.99-1.00 at
# 7.8, 0.98-1.02 at 11.6, 1.01-1.02 at 46.5. A tail wave costs clock, not time, at the power limit, so stream-K's
# even split recovers only part of it, and its fix-up of the tiles cut between SMs costs about a tenth of a wave.
STREAMK_POWER_CREDIT = 0.3  # the share of the persistent grid's tail that stream-K's even split wins back
STREAMK_FIXUP_WAVES = 0.09  # the fix-up, in waves of the persistent grid
# each further split of every tile, there: 2 splits measured 0.942 against 0.984 without (8192x4096x16384) and
# 0.89 against 0.93-0.97 (8192x2048x8192) in a campaign where the model had ranked them first
STREAMK_SPLIT_POWER = 0.05
# Stream-K without a split below the power limit spreads the tiles' k-blocks evenly over every SM, yet the CUTLASS
# kernel reads well below that ideal: on 43 mid shapes of 2^33-2^35 FLOP (H200 and H100 probes, back to back, each
# beside the best other player in the same rounds; docs/benchmarks/data, scripts/costmodel_check.py) the cost model
# priced it 1.33x too fast (geomean; 41 of 43 by 1.14-1.59x) and it read 0.58-0.85 of best NVIDIA. Its compute
# time is divided by this speed there.
STREAMK_SHARED_SPEED = 0.75
# On fewer tiles than SMs, CUTLASS stream-K cuts every tile among about sms / tiles CTAs (with a split, among
# `splits`), and their partial sums meet in turn: each further CTA reads the tile's running fp32 sum from the workspace
# and writes it back, at one SM's share of L2 bandwidth, once per wave. Set on 222 probe rows of the wgmma family's
# stream-K below 2^36 FLOP on 12-131 tiles or split (H200 and H100, every mode; docs/benchmarks/data): the model had
# their time against the fastest player of the same rounds 1.30x too short on the unsplit rows and 1.49x on the split
# ones (geomeans), 1.05x and 1.00x with these two passes. Where d488305's model had ranked stream-K second and third
# in a first batch (five skinny and mid long-K shapes outside every sample), it read 0.29-0.61 of best NVIDIA and the
# model's error was 1.98x, 1.25x with them (streamk_peer_first_batch_ab_h200_2026-11-28_d488305.json).
STREAMK_PEER_PASSES = 2.0
# hopper_raw's K split over a cluster: after its mainloop each further CTA of the cluster hands its fp32 tile to the
# first, priced at this rate (GB/s, once per wave). A fitted rate, not distributed shared memory's bandwidth: it
# carries the cluster's barriers and the serial sum. Set on 384 probe rows outside the 64-row streaming tiles (H200
# and H100, every mode; docs/benchmarks/data, scripts/costmodel_check.py): the model had their time against the
# fastest player 1.125x too short (geomean), 1.02x with it, and ranked 128x128 over 3-5 CTAs ahead of 64x128 over
# 2-3 where it read 4-13% slower back to back (hopper_raw._spans_n). Over the 17 probe files with such rows the
# summed Spearman rose 6.27 -> 6.63 and the first pick went 1.097 -> 1.088 of the fastest (one file worse, 1.089 ->
# 1.118: on 256x4096x12288 a wgmma tile priced next read 1.45). Not on the streaming tiles (87 rows, 1.11x without
# it, 0.98x with): there it moved the search of M <= 64 onto rings of 84-112 KB, which measured 2-15% slower
# (hopper_raw.STREAMING_DOMAIN); their ring and split are priced by STREAM_INFLIGHT_BYTES, fitted without it
CLUSTER_HANDOFF_GBS = 20.0  # 30 before the slice pass: the batched split, often the fastest player, now priced slower
# grid=even (the fewest persistent CTAs that take the same waves) beside one CTA per SM, power-steady on three H200s
# (three sweeps): hopper_raw +1.0/+1.4/+1.6% on 8192x2048x8192, +1.3/+1.4/+1.4% on 8192x4096x16384, +0.8% on
# 4096x12288x16384 and 16384x12288x8192, 0.0% on 1024x12288x8192; CUTLASS persistent +0.8% and 0.0% there
EVEN_GRID_GAIN = 0.99
# the problem size from which a big GEMM runs at the H200's power limit. Stream-K and even grids are priced (and even
# grids proposed, even_grid) from it on (>=); the raster and band credits only above it (>), as they were
# fitted: 1024x4096x8192 is exactly 2^36 FLOP
POWER_LIMIT_FLOP = 2 ** 36
# Wave-quantized mid shapes (the 64x64 grid takes more than a wave, no 128-row tile fills): a one-wave grid's k-block
# takes the longer of one CTA's MMAs (rows x columns) and the whole grid's operand reads from L2 (CTAs x (rows +
# columns)); weighing the first by ONE_WAVE_MMA_WEIGHT ranks the tiles that fit one wave (fitted on hopper_raw's
# tiles, hopper_raw._one_wave_tiles). ONE_WAVE_K: the K where the one-wave tiles are listed.
ONE_WAVE_MMA_WEIGHT = 2.2
ONE_WAVE_K = (1472, 8192)


def past_a_wave_at_one_wave_k(shape: tuple[int, int, int], sms: int = 132) -> bool:
    """The one-wave tiles' common scope: K in ONE_WAVE_K and a 64x64 grid of more than `sms` tiles (each family adds
    its own bounds on M and N)."""
    m, n, k = shape
    return ONE_WAVE_K[0] <= k < ONE_WAVE_K[1] and ceil_div(m, 64) * ceil_div(n, 64) > sms


def one_wave_cost(tm: int, tn: int, ctas: int) -> float:
    """A one-wave grid's k-block in relative units (see ONE_WAVE_MMA_WEIGHT): the smaller, the faster."""
    return max(ONE_WAVE_MMA_WEIGHT * tm * tn, ctas * (tm + tn))


PDL_US = 0.9  # programmatic dependent launch: launch latency hidden behind the previous kernel (H200, measured)
# wgmma tiles (tile_m, tile_n) relative to 128x256: operand bytes per MMA, accumulator fit, wave fill
WGMMA_TILE_EFF = {(128, 256): 1.0, (256, 128): 1.0, (128, 192): 0.95, (128, 128): 0.88, (64, 256): 0.85,
                  (64, 128): 0.75, (64, 192): 0.8, (256, 64): 0.8, (128, 64): 0.7, (64, 64): 0.6, (256, 192): 1.02,
                  (256, 256): 0.9, (256, 176): 1.0, (256, 160): 1.0, (256, 144): 1.0, (128, 176): 0.94,
                  (128, 160): 0.92, (128, 144): 0.9, (256, 96): 0.85, (128, 96): 0.8}



def streams_b(shape: tuple[int, int, int]) -> bool:
    """M <= 64 from K = 1024, K a multiple of 8 (TMA's 16-byte rows): where B is streamed through every SM (hopper_raw's
    streaming tiles, and the size class size_class gives them)."""
    m, _, k = shape
    return m <= 64 and k >= 1024 and in_16_byte_rows(k)


def streams_a(shape: tuple[int, int, int]) -> bool:
    """The mirror of `streams_b`: N <= 64, where A is the operand streamed (hopper_raw swaps the operands there)."""
    m, n, k = shape
    return streams_b((n, m, k))


def streams_ab(shape: tuple[int, int, int]) -> bool:
    """M <= 128 and 64 < N <= 128 with K = 2048-8192: an output of at most eight 64x32 tiles, each split over a
    cluster of up to eight CTAs, so that both operands stream through half the SMs (hopper_raw's 64-row tiles, as for
    `streams_b`; N <= 64 is `streams_a`'s). Beyond K = 8192 a CTA's eighth of K outlasts CUTLASS's batched split: the
    split tiles led the wgmma family's first proposals by 8-18% back to back and 4-15% cold at K = 2048-8192, by 5-9%
    and -5% to 0% at K = 12288-16384 (H100, docs/benchmarks/data/raw_small_output_h100_2026-11-26_8a2250e.json)."""
    m, n, k = shape
    return m <= 128 and 64 < n <= 128 and 2048 <= k <= 8192 and in_16_byte_rows(k)


def flop(shape: tuple[int, int, int]) -> float:
    m, n, k = shape
    return 2.0 * m * n * k


SIZE_CLASSES = ("skinny_streamed", "skinny_tma", "skinny_long_k", "output_bound", "launch_wave", "launch_bound",
                "mid_low", "mid_high", "large")


def size_class(shape: tuple[int, int, int], arch: str) -> str:
    """The class whose SHARES split a fresh batch between the families (agent.policy.priors.family_shares)."""
    m, n, k = shape
    f = flop(shape)
    if arch == "sm_90a" and f < LARGE_FLOP and m * n <= 2 ** 20 and (k >= 2048 or streams_operands(shape)):
        if (streams_b(shape) or streams_a(shape) or streams_ab(shape)) and in_16_byte_rows(n):
            # B (M <= 64), A (N <= 64) or both (M, N <= 128) streamed through the SMs by the TMA kernels (hopper_raw's
            # 64-row tiles)
            return "skinny_streamed"
        if k >= 2048 and in_16_byte_rows(n, k):
            return "skinny_tma"  # TMA's 16-byte rows, and K long enough that no mma.sync kernel has won
        return "skinny_long_k"  # where wgmma's batched split-K can run
    if f < LAUNCH_FLOP:
        if m * n >= OUTPUT_BOUND_OUTPUTS:
            return "output_bound"
        return "launch_wave" if m * n >= LAUNCH_WAVE_OUTPUTS else "launch_bound"
    if f < SMALL_FLOP:
        return "mid_low"
    return "mid_high" if f < LARGE_FLOP else "large"


# Operands this large (K >= 1024) take longer to read than to launch for: below 2^31 FLOP they are still TMA's, not
# the one-launch kernels'. On seven such K=1024 shapes outside both samples (64x1024 to 1024x1024 outputs, H200, back
# to back) a wgmma prior was each one's fastest first prior, 0.57-1.03 of best NVIDIA against 0.53-0.90 for the
# mma.sync families' (docs/benchmarks/data/mid_shapes_h200_2026-11-26_9568339.json); 64x128x1024 (384 KB, a dev
# shape the one-launch kernels win by 1.25) stays launch-bound.
STREAMED_OPERAND_BYTES = 2 ** 21


def streams_operands(shape: tuple[int, int, int]) -> bool:
    m, n, k = shape
    return k >= 1024 and 2 * (m + n) * k >= STREAMED_OPERAND_BYTES


def occupancy(threads: int, smem: int, regs: int, arch: str) -> int:
    lim = arch_limits(arch)
    by_smem = max(1, (228 * 1024 if lim.sm >= 90 else 164 * 1024) // max(smem, 1))
    by_regs = max(1, lim.regs_per_sm // max(regs * threads, 1))
    by_threads = max(1, 2048 // threads)
    return max(1, min(by_smem, by_regs, by_threads, 32))


def mma_sync_time(shape, bm, bn, bk, threads, smem, split, stages, arch, warp_tile, cluster=False) -> float:
    m, n, k = shape
    sms = arch_limits(arch).num_sms
    tiles = ceil_div(m, bm) * ceil_div(n, bn)
    ctas = tiles * split
    acc_regs = bm * bn // threads
    occ = occupancy(threads, smem, acc_regs + 48, arch)
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


L2_BYTES = 50 * 2 ** 20  # the H100's L2 (the H200 has 60 MiB): an operand this large mostly streams from DRAM


def outgrows_l2(nbytes: int) -> bool:
    """An operand of `nbytes` does not fit in the L2, so whoever reads it reads DRAM."""
    return nbytes >= L2_BYTES


def b_outgrows_l2(shape: tuple[int, int, int]) -> bool:
    """B (K x N halves) does not fit in the L2 (`outgrows_l2`)."""
    _, n, k = shape
    return outgrows_l2(2 * n * k)


# A cold single call (server mode) finds the L2 full of dirty lines: in a server the previous kernel's output, in
# server mode A just written after a scrub. Reading an operand that the grid passes over once evicts them at the
# default priority, each written back to DRAM while the kernel reads; read with evict_first, the operand's lines
# replace each other instead. With the L2 evicted by reading (clean lines only) the hint gained nothing (0.998x on
# seven shapes; docs/benchmarks/data/l2_window_and_clean_l2_h200_2026-11-28_933e40b.json), and grids that read
# the operand more than twice lost up to 7% with it (evict_first_many_passes_h200_2026-11-28_933e40b.json).
# Where one or two tiles across read an operand of 48-128 MiB (H200, 20 configs of hopper_raw on 15
# shapes, each in the same rounds as its unhinted twin; docs/benchmarks/data/read_once_hint_h200_2026-11-28_7611d7b.json
# and slice_pass_ab_and_n128_hints_h200_2026-11-28_6ab06e0.json) the hint read 1.06-1.22x in server mode (median
# 1.15x), 0.954-1.024x back to back and 0.962-1.029x separated; at 24 MiB 1.02x; on the other operand 0.95-1.01x.
READ_ONCE_MIN_BYTES = 32 * 2 ** 20
# A batched split hints for its slices' sake, not the operand's: with 8-16 MiB read once the hint read 1.018x back
# to back, 1.034x separated and 1.016x in server mode (five shapes, 0.990-1.061x, another process on the same GPU;
# H200, docs/benchmarks/data/batched_hint_below_32mib_h200_2026-11-28_ea70790.json)
BATCHED_READ_ONCE_MIN_BYTES = 8 * 2 ** 20
READ_ONCE_MAX_PASSES = 2


def read_once_operand(m: int, n: int, k: int, tile_m: int, tile_n: int, min_bytes: int = READ_ONCE_MIN_BYTES) -> str:
    """'a' or 'b': the larger operand of at least `min_bytes` that a grid of tile_m x tile_n tiles over M x N reads
    at most READ_ONCE_MAX_PASSES times (A once per tile column, B once per tile row); '' where neither is."""
    found = [(nbytes, x) for nbytes, x, passes in ((2 * m * k, "a", ceil_div(n, tile_n)),
                                                   (2 * n * k, "b", ceil_div(m, tile_m)))
             if passes <= READ_ONCE_MAX_PASSES and nbytes >= min_bytes]
    return max(found)[1] if found else ""


def read_once_twin(family: Any, params: dict[str, Any], shape: tuple[int, int, int]) -> dict[str, Any] | None:
    """A TMA family's cold twin (its `cold_twin`): `params`, validated, with evict_first (the family's
    `l2_evict_first` knob) on the operand `read_once_operand` names in the kernel's own terms (`kernel_shape`), or
    None where the config carries a hint already, none applies, or the hinted kernel is not feasible."""
    p = family.validate(params)
    if p.get("l2_evict_first", "none") != "none":
        return None
    hint = read_once_hint(p, shape)
    q = dict(p, l2_evict_first=hint)
    return q if hint and family.feasible(q, shape, "sm_90a")[0] else None


def read_once_hint(p: dict[str, Any], shape: tuple[int, int, int]) -> str:
    """`read_once_operand` of config `p`'s grid on `shape`, in the kernel's own terms (`kernel_shape`: 'a' is B where
    it swaps A and B); '' where none."""
    floor = BATCHED_READ_ONCE_MIN_BYTES if p.get("scheduler") == "batched" else READ_ONCE_MIN_BYTES
    return read_once_operand(*kernel_shape(p, shape), p["tile_m"], p["tile_n"], floor)


def read_once_hint_pays(p: dict[str, Any], cold: bool) -> bool:
    """Where a config's read-once hint is worth carrying: timed `cold` (a single call after an idle gap) on any
    config; otherwise on a batched split only, whose fp32 slices then stay in the L2 for the summing kernel (the
    wgmma family's: 1.028x back to back, 1.034x separated over 12 first-batch slots on eight shapes,
    docs/benchmarks/data/batched_hint_ab_h200_2026-11-28_75b5ac2.json); elsewhere it read -5% to +2% back to back."""
    return cold or p.get("scheduler") == "batched"


def follow_read_once(child: dict[str, Any], shape: tuple[int, int, int], cold: bool) -> dict[str, Any]:
    """A mutated child of a config hinted on its operand read once ('a' or 'b', kernel terms): the hint follows that
    operand to what the child reads once (its letter flips with swap_ab) and goes where the child reads none once,
    since on an operand read three or more times it cost up to 7% (0.93-1.01), or where it does not pay
    (`read_once_hint_pays`). Other hints stay as they are."""
    if child.get("l2_evict_first") not in ("a", "b") or not {"tile_m", "tile_n"} <= child.keys():
        return child  # nothing to follow, or a config too partial to say (its family's check refuses it later)
    hint = read_once_hint(child, shape) if read_once_hint_pays(child, cold) else ""
    return dict(child, l2_evict_first=hint or "none")


def splits_k(p: dict[str, Any]) -> bool:
    """Whether a config of any family shares a tile's K among CTAs or launches (split-K, stream-K, a cluster split)."""
    return (p.get("splits", 1) > 1 or p.get("split_k", 1) > 1 or p.get("cluster_k", 1) > 1
            or p.get("scheduler") in ("streamk", "batched") or p.get("grid") == "streamk")


def wave_fill(tiles: int, sms: int) -> float:
    """The share of the SMs a grid of `tiles` one-SM CTAs keeps busy, averaged over its waves."""
    return tiles / (ceil_div(tiles, sms) * sms)


# the wave_fill a tile's grid must reach: below it a big grid's last wave is ragged, and a mid shape's grid leaves
# SMs idle (the wgmma and hand-written families' wave-filling priors)
WAVE_FILL = 0.8


# up to this many waves a 1x1 cluster leads its 2x1 twin (single_cta_price); the priors list it first there
SINGLE_CTA_MAX_WAVES = 4.0


def single_cta_price(waves: float) -> float:
    """A 1x1 cluster's efficiency beside a 2x1 of the same CUTLASS tile on a multi-wave grid.

    128x256 cooperative persistent, swizzle 8, power-steady on H100s, 1x1 / 2x1: one sweep on two machines +0.6-0.7%
    at 3.9 waves (8192x2048x8192), +0.8-0.9% at 2.9, -0.9-1.2% at 7.8, -0.8-0.9% at 11.6, -1.9% at 46.5; another
    (shapes no prior was set on) +0.4% at 1.9, -0.1% at 3.9 (4096x4096x8192), -0.25% at 5.8, -0.8% at 7.8.
    Multicast halves a pair's L2 reads, which pays once enough waves contend for L2; below that the pair's coupling
    costs more than it saves.
    """
    if waves <= SINGLE_CTA_MAX_WAVES:
        return 1.004
    return 0.997 if waves <= 6.0 else (0.99 if waves <= 16.0 else 0.98)


def even_grid_gain(p: dict[str, Any], shape: tuple[int, int, int]) -> float:
    """Both persistent families, where the grid runs at the power limit (EVEN_GRID_GAIN says what was measured)."""
    m, n, k = shape
    return EVEN_GRID_GAIN if p.get("grid") == "even" and 2.0 * m * n * k >= POWER_LIMIT_FLOP else 1.0


def block_swizzle_stride(shape: tuple[int, int, int]) -> int:
    f = flop(shape)
    if f < 2 ** 27:
        return 1
    if f < 2 ** 33:
        return 4
    if f < 2 ** 37:
        return 8
    return 16


def pick(options: tuple[int, ...], target: float) -> int:
    return min(options, key=lambda o: (abs(math.log(o / target)), o))


def even_grid(family: Any, p: dict[str, Any], shape: tuple[int, int, int], sms: int = 132) -> dict[str, Any]:
    """`p` with the fewest persistent CTAs that take the same waves, on a power-limited grid of four waves or more where
    that launches fewer (`family.feasible` says): every CTA then runs as many tiles, and a wave in bands starts on a
    band. Power-steady on three H200s (three sweeps) it measured +0.8% to +1.6% at 3.9 to 31 waves (nine (shape,
    kernel, GPU) triples) and 0.0% at 2.9 waves (1024x12288x8192, two kernels); below that it was not measured."""
    if flop(shape) < POWER_LIMIT_FLOP or p.get("scheduler", "persistent") != "persistent":
        return p
    m, n, _ = shape
    if hasattr(family, "cta_grid"):  # a grid padded to the cluster
        gm, gn, _ = family.cta_grid(p, shape)
        tiles = gm * gn
    else:
        tiles = ceil_div(m, p["tile_m"]) * ceil_div(n, p["tile_n"])
    if tiles <= 3 * sms:
        return p
    q = dict(p, grid="even")
    return q if family.feasible(q, shape, "sm_90a")[0] else p
