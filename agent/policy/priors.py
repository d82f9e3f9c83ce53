"""Starting points from the paper's analysis (§5-6) and our first H200 measurements, as functions of (M, N, K).

BM grows with M, BN with N, pipeline stages with K; grouped block rasterisation above ~2^27 FLOP with a group
stride that grows with the problem; family by size: launch-bound shapes go to `small` (one launch, split-K inside
it), mid shapes to split-K mma.sync kernels and Hopper stream-K, large shapes to `hopper_wgmma`.
"""
from __future__ import annotations

import math
from typing import Any

from agent.families import hopper_raw, hopper_wgmma, with_launch_knobs
from agent.families.common import ceil_div

from .costmodel import POWER_LIMIT_FLOP, SINGLE_CTA_MAX_WAVES, b_streams

SMALL_FLOP = 2 ** 33  # below: the launch and the k-loop latency dominate
LARGE_FLOP = 2 ** 35  # above: wgmma tensor-core throughput dominates


def flop(shape: tuple[int, int, int]) -> float:
    m, n, k = shape
    return 2.0 * m * n * k


def family_shares(shape: tuple[int, int, int], arch: str) -> dict[str, float]:
    """Share of a fresh batch per family, before any measurement."""
    f = flop(shape)
    hopper = arch == "sm_90a"
    # Evaluator (offline, GPU time per call) on the H200: on launch-bound shapes ampere_cute without split-K was
    # as fast as or faster than `small` (2.7-2.9 us against cuBLASLt's ~3.0 us floor); split-K's second pass costs
    # ~1.5 us there. Hence the even split below 2^31 FLOP.
    m, n, k = shape
    if hopper and k >= 2048 and f < LARGE_FLOP and m * n <= 2 ** 20:
        # Skinny outputs with a long K: wgmma GEMMs over K slices (batched split-K) measured 0.98-1.00 of cuBLASLt on
        # the H200 where the mma.sync families reached 0.60-0.89. They won none of the five dev shapes of this class
        # in runs 2, 3, 15, 16 and 17, but giving their two slots in twelve to wgmma found no better kernel either
        # (run 18, docs/benchmarks/data/tables/fp32_skinny_2026-11-24_186c0cf.md): they stay, and at fp16 lose them
        # on their first failure.
        shares = {"small": 0.2, "ampere_cute": 0.2, "hopper_wgmma": 0.6}
    elif f < 2 ** 31 and m * n >= 2 ** 19:
        # Output-bound small-K shapes (128x4096x128, 1024x2048x64, 128x16384x64): a persistent CUTLASS 128x128 tile
        # with the TMA epilogue measured 0.83-0.90 of cuBLASLt there, mma.sync families 0.73-0.79.
        shares = {"small": 0.3, "ampere_cute": 0.3, "hopper_wgmma": 0.4}
    elif f < 2 ** 31:
        shares = {"small": 0.5, "ampere_cute": 0.5, "hopper_wgmma": 0.0}
    elif f < SMALL_FLOP:
        shares = {"small": 0.35, "ampere_cute": 0.35, "hopper_wgmma": 0.3}
    elif f < LARGE_FLOP:
        shares = {"small": 0.2, "ampere_cute": 0.3, "hopper_wgmma": 0.5}
    elif hopper:
        # mma.sync reaches ~60% of wgmma's peak: ampere_cute measured 0.37-0.53 of cuBLASLt on all 8 big dev shapes
        # in runs 4 and 5 (H200), one candidate in twelve spent for nothing
        # half to the hand-written kernel: on the four big dev shapes where CUTLASS lost it needs 1-2% fewer cycles a
        # call than CUTLASS and cuBLASLt with its TMA epilogue (sweep r14, H200 power-steady)
        shares = {"small": 0.0, "ampere_cute": 0.0, "hopper_wgmma": 0.5, "hopper_raw": 0.5}
    else:
        shares = {"small": 0.0, "ampere_cute": 1.0, "hopper_wgmma": 0.0}
    if not hopper:
        shares["ampere_cute"] += shares.pop("hopper_wgmma")
        shares["hopper_wgmma"] = 0.0
    shares.setdefault("hopper_raw", 0.0)
    return shares


def block_swizzle_stride(shape: tuple[int, int, int]) -> int:
    f = flop(shape)
    if f < 2 ** 27:
        return 1
    if f < 2 ** 33:
        return 4
    if f < 2 ** 37:
        return 8
    return 16


def _pick(options: tuple[int, ...], target: float) -> int:
    return min(options, key=lambda o: (abs(math.log(o / target)), o))


def ampere_prior(shape: tuple[int, int, int], acc: str, sms: int = 132) -> dict[str, Any]:
    m, n, k = shape
    bm = _pick((32, 64, 128, 160, 256), min(max(m / 8, 32), 160 if m >= 8192 else 128))
    bn = _pick((32, 64, 128, 256), min(max(n / 8, 32), 128))
    bk = 64 if k >= 256 else 32
    stages = 3 if k <= 1024 else (4 if k <= 4096 else 5)
    tiles = ceil_div(m, bm) * ceil_div(n, bn)
    split = 1
    while tiles * split * 2 <= sms and split < 8 and k // bk >= 8 * split * 2:
        split *= 2
    wm, wn = (2, 2) if bm * bn <= 64 * 128 else (2, 4)
    return {"bm": bm, "bn": bn, "bk": bk, "wm": wm, "wn": wn, "stages": stages, "prefetch": stages - 1,
            "sw_b": 3 if bk == 64 else 2, "sw_m": 3, "sw_s": 3, "block_swizzle": block_swizzle_stride(shape),
            "reg_pipeline": True, "epilogue": "smem", "split_k": split, "acc": acc}


def small_prior(shape: tuple[int, int, int], sms: int = 132) -> dict[str, Any]:
    m, n, k = shape
    bm = 16 if m <= 64 else (32 if m <= 256 else 64)
    bn = 32 if n <= 256 else (64 if n <= 1024 else 128)
    bk = 32 if k <= 128 else 64
    tiles = ceil_div(m, bm) * ceil_div(n, bn)
    kt = ceil_div(k, bk)
    split = 1
    for s in (2, 3, 4, 6, 8, 12, 16):
        if tiles * s <= 2 * sms and kt // s >= 2:
            split = s
    wm = min(2, bm // 16)
    wn = max(1, min(4 // wm, bn // 16))
    stages = max(2, min(4, ceil_div(kt, split)))
    return {"bm": bm, "bn": bn, "bk": bk, "wm": wm, "wn": wn, "stages": stages, "split_k": split}


def hopper_prior(shape: tuple[int, int, int], acc: str) -> dict[str, Any]:
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


def small_cluster_prior(shape: tuple[int, int, int]) -> dict[str, Any] | None:
    """Skinny M with a long K on sm_90: split K over an 8-CTA cluster reduced through distributed shared memory.
    Measured on the H200: 64x128x1024 at 0.86 of cuBLASLt (best of any family), 64x512x2048 at 0.83."""
    m, n, k = shape
    if m > 128 or k < 1024:
        return None
    bm = 64 if m <= 64 else 128
    bn = max((b for b in (16, 32, 64, 128) if ceil_div(m, bm) * ceil_div(n, b) * 8 >= 128), default=16)
    wm, wn = (4, 1) if bn == 16 else (2, 2) if bn <= 64 else (2, 4)
    return {"bm": bm, "bn": bn, "bk": 64, "wm": wm, "wn": wn, "stages": 3, "split_k": 1, "cluster_k": 8,
            "epi": "smem"}


def small_priors(shape: tuple[int, int, int], arch: str = "sm_90a") -> list[dict[str, Any]]:
    """The prior plus the two narrow-tile variants that won every launch-bound shape in our first H200 sweep
    (16-row tiles, 2-4 warps, split-K up to ~1-2 CTAs per SM), and on sm_90 the cluster split for skinny long K."""
    out = [small_prior(shape)]
    m, n, k = shape
    if arch in ("sm_90a", "sm_90") and (c := small_cluster_prior(shape)):
        out.insert(0, c)
    if out[0]["split_k"] > 1 and k <= 512:
        out.insert(0, dict(out[0], split_k=1, stages=max(2, min(4, ceil_div(k, out[0]["bk"])))))
    for bn, wn in ((32, 2), (64, 4)):
        q = dict(out[0], bm=16, bn=bn, wm=1, wn=wn)
        tiles = ceil_div(m, 16) * ceil_div(n, bn)
        kt = ceil_div(k, q["bk"])
        q["split_k"] = 1
        for s in (2, 3, 4, 6, 8, 12, 16):
            if tiles * s <= 2 * 132 and kt // s >= 2:
                q["split_k"] = s
        q["stages"] = max(2, min(4, ceil_div(kt, q["split_k"])))
        out.append(q)
    return out


def hopper_priors(shape: tuple[int, int, int], acc: str, sms: int = 132) -> list[dict[str, Any]]:
    """The prior plus its raster/cluster/B-layout variants that were within 3% of cuBLAS on large shapes."""
    m, n, k = shape
    base = hopper_prior(shape, acc)

    def plain(**kw: Any) -> dict[str, Any]:
        """The base with one CTA per cluster, the heuristic raster and no stream-K, then `kw`."""
        return {**base, "cluster_m": 1, "cluster_n": 1, "scheduler": "persistent", "splits": 1, "raster": "heuristic",
                "swizzle": 1, **kw}

    out = [base]
    pm, pn = (n, m) if base["swap_ab"] else (m, n)
    tiles = ceil_div(pm, base["tile_m"]) * ceil_div(pn, base["tile_n"])
    ragged = tiles > sms and tiles / (ceil_div(tiles, sms) * sms) < 0.8
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
        # more store rounds, each behind a barrier, per 64x128 half-tile, and 64 columns take two. Sweep r44 (H200,
        # the same kernel with and without): 1024x12288x256 1.058 against 1.001-1.004, 2048x8192x256 0.997 against
        # 0.928, 512x16384x512 1.033 against 1.012; with the long side on wgmma's M (C^T = B^T A^T) 1.066, 1.007
        # and 1.053.
        wide_epilogue = dict(pp, swap_ab=n > m, epi_n=64)
        out = ([wide_epilogue, pp, coop] if m * n >= 2 ** 23 else [coop, pp]) + [
            plain(tile_m=64, tile_n=128, schedule="pingpong", swap_ab=False)] + out
    if flop(shape) >= LARGE_FLOP and base["schedule"] == "cooperative":
        out = _power_bound_priors(shape, base, ragged, waves=tiles / sms) + out
    if base["schedule"] == "cooperative":
        out.append(dict(base, raster="along_n", swizzle=4, scheduler="persistent", splits=1))
        if base["tile_m"] == 128 and base["tile_n"] == 256:
            out.append(dict(base, tile_m=256, tile_n=128))
        out.append(dict(base, b_operand="row"))
    # Too few output tiles to fill the machine and a long K: split K into slices, each a GEMM into fp32 partials,
    # summed by a second kernel (sweeps r4/r5, H200). 4 slices of 1024+ over 32 tiles measured 0.98-1.00 of cuBLASLt
    # on 64x2048x4096, 128x2048x4096, 256x2048x16384 and 8 slices 1.00 on 64x512x2048, where stream-K's split-K
    # fixup (2-4 us per doubling of splits) measured 0.55-0.82. Without a split the tile comes after them.
    sliced = []
    skinny = m <= 128 <= n
    tiles_first = [("pingpong", 64, 64, skinny), ("cooperative", 128, 64, skinny), ("pingpong", 128, 128, m < n)]
    for sched, tm, tn, swap in tiles_first if skinny else tiles_first[::-1]:
        pm, pn = (n, m) if swap else (m, n)
        tiles = ceil_div(pm, tm) * ceil_div(pn, tn)
        # 64x8192x4096 (64 tiles of 128x64): 2 slices 0.83, no split 0.975; 128-wide tiles on a 64-wide output pad
        if tiles > 40 or k < 1024 or tn > max(64, pn) or (tm == 64 and pn > 64):
            continue
        # as many slices as fill the SMs once, each at least 256 long (64x512x2048: 8 slices 1.00, 4 slices 0.99)
        slices = [s for s in (2, 4, 8) if tiles * s <= sms and k % (8 * s) == 0 and k // s >= 256]
        if slices:
            q = plain(tile_m=tm, tile_n=tn, schedule=sched, swap_ab=swap, scheduler="batched", splits=slices[-1])
            if b_streams(shape):
                # Each slice reads its stretch of B once, from DRAM: read as stored (N-major), it took 4% less
                # time and energy per call than through B_col_major on 256x2048x16384 (sweep r60, one H100,
                # power-steady, 1.051 against 1.011 of cuBLASLt in all three rounds; campaign run 43: five of six
                # N-major twins 1.006-1.012 against 0.962-0.973). The K-major twin stays listed right after it.
                sliced.append(dict(q, b_operand="row"))
            sliced.append(q)
    out = sliced + out
    for swap, tm, tn in ((base["swap_ab"], 128, 128), (m <= 128 <= n, 128, 64)):
        pm, pn = (n, m) if swap else (m, n)
        tiles = ceil_div(pm, tm) * ceil_div(pn, tn)
        if tiles >= 66 or ceil_div(k, 64) < 16:
            continue
        out.append(plain(tile_m=tm, tile_n=tn, schedule="cooperative", swap_ab=swap))
    if m <= 64 and b_streams(shape):
        # A few rows against a B larger than the L2 (64x8192x4096: 64 MB each call): a DRAM stream, where a 64x64
        # tile puts a CTA on every SM that reads B in its row-major layout (cuBLASLt's pick there is that tile, NN,
        # Nsight Compute in session 17). Against the 128x64 prior above, in one process each: 0.980 / 0.952 in graph
        # replay (sweep r28), 1.025 / 0.990 offline with PDL (r30); 1.026 of cuBLASLt in graphs on another machine.
        stream = {**base, "tile_m": 64, "tile_n": 64, "tile_k": 64, "cluster_m": 1, "cluster_n": 1,
                  "schedule": "pingpong", "scheduler": "persistent", "splits": 1, "raster": "along_n", "swizzle": 1,
                  "stages": 0, "b_operand": "row", "swap_ab": True}
        out = [stream] + [q for q in out if q != stream]
    return out


def _power_bound_priors(shape: tuple[int, int, int], base: dict[str, Any], ragged: bool,
                        waves: float) -> list[dict[str, Any]]:
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
        # Up to four waves the pair's multicast saves less than its coupling costs (sweep r57, power-steady, two
        # H100s, the same 128x256 swizzle-8 kernel with 1x1 and 2x1 clusters: +0.6% at 3.9 waves on 8192x2048x8192,
        # +0.8-0.9% at 2.9 on 1024x12288x8192; from 7.8 waves on the pair leads by 1-2%). The release's kernel for
        # 8192x2048x8192 is such a 1x1 and led our 2x1 winner there. Along N even where N < M: on 8192x2048x8192 the
        # 1x1 along M ran 0.8% behind it in every round (sweep r59), where the 2x1 showed no difference.
        out.insert(0, dict(widest, cluster_m=1, cluster_n=1, raster="along_n"))
    if waves <= 1.0:
        # One wave (1024x4096x8192, 4096x1024x12288: 128 tiles): no later wave reuses what a cluster multicasts, and
        # every epilogue runs at once, unhidden. Power-steady on the H200, 1024x4096x8192: one CTA per cluster
        # 0.1067 ms against 0.1078 for 2x1 (the SM clock +1%), epi_n=128 0.1075; cuBLASLt 0.1060.
        out.insert(0, dict(base, cluster_m=1, cluster_n=1, b_operand="row", epi_n=128, raster=raster, swizzle=4,
                           scheduler="persistent", splits=1))
    wide = dict(base, tile_m=256, tile_n=192, cluster_m=2, cluster_n=1, raster=raster, swizzle=8,
                scheduler="persistent", splits=1)
    if n % 192 == 0 and m >= 256:
        out.insert(0, dict(wide, swap_ab=False))
    elif m % 192 == 0 and n % 256 == 0:
        # C^T = B^T A^T puts M on the 192 side (12288x512x12288: 1.02 of cuBLASLt against 0.98 for 128x128)
        out.insert(0, dict(wide, swap_ab=True, cluster_m=1, raster="along_n" if m >= n else "along_m"))
    return out


def ampere_priors(shape: tuple[int, int, int], acc: str, mode: str = "offline") -> list[dict[str, Any]]:
    """The paper's prior plus, for launch-bound shapes, the 32x32 / 64x64 four-warp tiles without split-K that beat
    cuBLASLt-AutoTuning under the evaluator (1.06-1.15x on 64x64x128 ... 512x512x64)."""
    out = [ampere_prior(shape, acc)]
    m, n, k = shape
    if flop(shape) < 2 ** 31:
        for bm, bn in ((32, 32), (64, 64), (64, 32)):
            if bm <= m and bn <= n:
                bk = 64 if k % 64 == 0 and k >= 256 else 32
                out.append({"bm": bm, "bn": bn, "bk": bk, "wm": bm // 16 if bm <= 32 else 4 if bn == 32 else 2,
                            "wn": 2, "stages": 3, "prefetch": 2, "sw_b": 3 if bk == 64 else 2, "sw_m": 3,
                            "sw_s": 3, "block_swizzle": 1, "reg_pipeline": True, "epilogue": "smem", "split_k": 1,
                            "acc": acc})
    if flop(shape) < 2 ** 31 and m * n >= 2 ** 19:
        out = _output_bound_ampere(shape, acc, mode) + out
    return out


def _output_bound_ampere(shape: tuple[int, int, int], acc: str, mode: str = "offline") -> list[dict[str, Any]]:
    """Small K, large output: the tiles that won our two 24-shape runs on the H200 go first (the paper's prior, a
    32-row tile there, measured 0.92 on 128x4096x128). Up to 2^20 outputs, 64x64 with bk=64 (0.985 on
    128x4096x128); above, 128x128 with bk=64 and 4 stages (0.955 on 1024x2048x64) and 64x128 with bk=32 (0.96 on
    128x16384x64). All without split-K and with the shared-memory epilogue."""
    m, n, k = shape
    bk = 64 if k % 64 == 0 else 32
    # exactly the measured kernels' knobs, so that they keep their identity
    common = {"wm": 2, "wn": 2, "prefetch": 2, "sw_b": 2, "sw_m": 3, "sw_s": 3, "reg_pipeline": True,
              "epilogue": "smem", "split_k": 1, "acc": acc}
    small_out = {**common, "bm": 64, "bn": 64, "bk": bk, "stages": 3, "block_swizzle": 1}
    wide = {**common, "bm": 128, "bn": 128, "bk": bk, "stages": 4, "block_swizzle": 4}
    narrow = {**common, "bm": 64, "bn": 128, "bk": 32, "stages": 3, "block_swizzle": 4}
    picks = [small_out, narrow] if m * n <= 2 ** 20 else [wide, narrow, small_out]
    if mode == "graph" and k <= 64 and m * n > 2 ** 20:
        # Replayed from a graph, two k-blocks of 32 (the second loading while the first multiplies) in two-stage
        # 64x64 and 128x64 tiles measured best of 54 configs on 128x16384x64 and 1024x2048x64 (sweep r24: 0.898-0.914
        # with PDL, against 0.797-0.840 for the wide tile above), 0.972 and 0.961 without PDL (sweep r26)
        lean = {**common, "bk": 32, "stages": 2, "prefetch": 1, "reg_pipeline": False, "block_swizzle": 1}
        picks = [{**lean, "bm": 64, "bn": 64}, {**lean, "bm": 128, "bn": 64}] + picks
    return [q for q in picks if q["bm"] <= m and q["bn"] <= n]


def _widest_band(unit_rows: int, cap: int) -> int:
    """The widest tile-order band up to `cap` that hopper_raw accepts: it needs two bands' worth of work-unit rows."""
    return max(g for g in (1, 2, 4, 8, 16) if g == 1 or (g <= cap and unit_rows >= 2 * g))


def _square_band(tile_m: int, tile_n: int, sms: int) -> int:
    """The band (tile-rows) that makes a wave's operand footprint smallest: a wave of `sms` tiles in bands of g rows reads
    g A panels and sms/g B panels, each panel bytes proportional to its tile side, so g = sqrt(sms * tile_n / tile_m),
    as a power of two. 128x256 gets 16: on 8192x4096x16384 bands of 16 measured 0.993 and 1.004 of cuBLASLt against
    0.983 and 0.996 for bands of 8 in the same sweeps (r21, r32), and 0.997 in r18; 256x192 and 256x128 get 8."""
    g = math.sqrt(sms * tile_n / tile_m)
    return 2 ** round(math.log2(g))


def _one_wave_band(rows: int, tile_m: int, tile_n: int, tiles: int) -> int:
    """The tile order of a grid that runs in one wave, where every tile is resident at once and the order only decides
    which CTAs are launched next to each other: in bands (neighbours down M, sharing B's tile) where B's tile is the
    wider, else along N (sharing A's). Power-steady on an H200 (sweeps r47, r48): 1024x4096x8192 with 128x256 tiles,
    bands of 2 or 4 tile-rows 0.998-0.999 of cuBLASLt against 0.967 for rows (their loads alone: 30 against 43 mJ a
    call), 1.011 against 0.984 with the B/C evict_first hint; 4096x1024x12288, bands of 16 0.999 against 0.995 for
    128x256, and rows 0.985 against 0.972-0.979 for bands of 4-8 of 256x128."""
    return _widest_band(rows, _square_band(tile_m, tile_n, tiles)) if tile_n > tile_m else 1


def raw_priors(shape: tuple[int, int, int], sms: int = 132) -> list[dict[str, Any]]:
    """The hand-written kernel's tiles that matched cuBLASLt's cycles (128x256, then 256x128) with the TMA epilogue and
    the deepest ring; beyond one wave, bands that keep a wave's footprint square (`_square_band`), and on one wave
    the order `_one_wave_band` measured. 256x192 where 192 divides N, as for CUTLASS, and first where 128x256 would
    take more than four waves. No 2-CTA cluster: it has not been timed beyond one wave since its barrier fix
    (docs/benchmarks/data/sweeps/cluster_arrive_2026-11-23_3767b20.txt), and on one wave it measured 0.987-0.994 in
    bands (r49).
    A one-wave grid whose B is at least twice A streams B (and C) with an L2 evict_first hint, so A stays for the next
    call: 1.2% and 1.1% faster power-steady on 1024x4096x8192 in two sweeps on two machines (r31, r32; clock +15-22
    MHz, cycles unchanged); the hint on A measured nothing on 4096x1024x12288 (r31), and on multi-wave shapes it cost
    0.6-4% (A's panels are shared by CTAs that drift apart), so it goes nowhere else."""
    m, n, _ = shape
    out = []
    for tm, tn in ((128, 256), (256, 128)):
        rows, tiles = ceil_div(m, tm), ceil_div(m, tm) * ceil_div(n, tn)
        if tiles > sms:
            group = _widest_band(rows, _square_band(tm, tn, sms))
        else:  # measured only where the power limit holds the clock
            group = _one_wave_band(rows, tm, tn, tiles) if flop(shape) >= POWER_LIMIT_FLOP else 1
        p = {"tile_m": tm, "tile_n": tn, "stages": 4, "group": group, "acc": "fp32", "epi": "tma"}
        if tiles <= sms and n >= 2 * m:  # B's bytes (N*K) at least twice A's (M*K)
            p["l2_evict_first"] = "bc"
        out.append(p)
    if n % 192 == 0 and m >= 256:
        wide = {"tile_m": 256, "tile_n": 192, "stages": 3, "acc": "fp32", "epi": "tma",
                "group": _widest_band(ceil_div(m, 256), _square_band(256, 192, sms))}
        # Many waves: 256x192 first. It led 128x256 on 4096x12288x16384 (11.6 waves of 128x256) in runs 25, 26, 28
        # and 29 by 1.0-3.2% and on 16384x12288x8192 in run 28 by 1.6%; listed third, run 29 never measured it
        # there (one prior is reserved a step). At 2.9 waves (1024x12288x8192) the two were within 1.3% either way.
        if ceil_div(m, 128) * ceil_div(n, 256) > 4 * sms:
            out.insert(0, wide)
        else:
            out.append(wide)
    return [even_grid(hopper_raw, p, shape) for p in out]


def even_grid(family: Any, p: dict[str, Any], shape: tuple[int, int, int], sms: int = 132) -> dict[str, Any]:
    """`p` with the fewest persistent CTAs that take the same waves, on a power-limited grid of four waves or more where
    that launches fewer (`family.feasible` says): every CTA then runs as many tiles, and a wave in bands starts on a
    band. Power-steady on three H200s (sweeps r33-r35) it measured +0.8% to +1.6% at 3.9 to 31 waves (nine (shape,
    kernel, GPU) triples) and 0.0% at 2.9 waves (1024x12288x8192, two kernels); below that it was not measured."""
    if flop(shape) < POWER_LIMIT_FLOP or p.get("scheduler", "persistent") != "persistent":
        return p
    m, n, _ = shape
    if family is hopper_wgmma:
        gm, gn, _ = hopper_wgmma.cta_grid(p, shape)
        tiles = gm * gn
    else:
        tiles = ceil_div(m, p["tile_m"]) * ceil_div(n, p["tile_n"])
    if tiles <= 3 * sms:
        return p
    q = dict(p, grid="even")
    return q if family.feasible(q, shape, "sm_90a")[0] else p


def priors(family: str, shape: tuple[int, int, int], acc: str, arch: str,
           mode: str = "offline") -> list[dict[str, Any]]:
    if family == "small":
        out = small_priors(shape, arch)
    elif family == "ampere_cute":
        out = ampere_priors(shape, acc, mode)
    elif family == "hopper_wgmma":
        # a swizzle that CUTLASS would cap or that pads the grid is refused: keep the prior, narrower
        out = [even_grid(hopper_wgmma, hopper_wgmma.fit_swizzle(p, shape), shape) for p in hopper_priors(shape, acc)] \
            if arch == "sm_90a" else []
    elif family == "hopper_raw":
        out = raw_priors(shape) if arch == "sm_90a" and acc == "fp32" else []
    else:
        raise ValueError(family)
    return [with_launch_knobs(family, p, arch, mode) for p in out]
