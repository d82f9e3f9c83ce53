"""Family `ampere_cute`: Ampere-style CuTe multistage kernel (mma.sync, cp.async, ldmatrix); sm_80 and sm_90a."""
from __future__ import annotations

import itertools
from typing import Any

from . import pricing
from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, WS_FLOATS, ceil_div, first_on_both_archs, in_16_byte_rows,
                     launch_knobs, render_feasible, smem_problem, splitk_problem, validate_with_defaults, validated)

NAME = "ampere_cute"
TEMPLATE = "ampere_cute.cu.j2"
NEEDS_CUTLASS = True

DOMAIN: dict[str, tuple] = {
    "bm": (32, 64, 96, 128, 160, 192, 256),
    "bn": (32, 64, 96, 128, 160, 192, 256),
    "bk": (32, 64),
    "wm": (1, 2, 4),
    "wn": (1, 2, 4),
    "stages": (2, 3, 4, 5, 6, 7, 8),
    "prefetch": (1, 2, 3, 4, 5, 6, 7),  # cp.async tiles in flight, <= stages-1
    "sw_b": (0, 1, 2, 3),  # shared-memory swizzle Swizzle<B, M, S>
    "sw_m": (3,),  # 16-byte units: what one cp.async/ldmatrix row moves
    "sw_s": (3,),
    "block_swizzle": (1, 2, 4, 8, 16),  # tile-rows per rasterisation group; 1 = plain row-major order
    "reg_pipeline": (False, True),
    "epilogue": ("direct", "smem"),
    "split_k": (1, 2, 3, 4, 6, 8),
    "acc": ("fp32", "fp16"),
    **LAUNCH_DOMAIN,
}
DEFAULTS: dict[str, Any] = dict(LAUNCH_DEFAULTS)


def validate(params: dict[str, Any]) -> dict[str, Any]:
    return validate_with_defaults(params, DOMAIN, DEFAULTS)


def smem_bytes(p: dict[str, Any]) -> int:
    main = (p["bm"] + p["bn"]) * p["bk"] * p["stages"] * 2
    epi = p["bm"] * (p["bn"] + 8) * 2 if p["epilogue"] == "smem" else 0
    return max(main, epi)


def rows_per_copy(wm: int, wn: int, bk: int) -> int:
    """Rows of a tile that one pass of the block's 16-byte cp.async copies covers: bm and bn must be multiples."""
    return wm * wn * 32 // (bk // 8)


def feasible(params: dict[str, Any], shape: tuple[int, int, int] | None, arch: str) -> tuple[bool, str]:
    p, lim, why = validated(params, validate, arch, "sm_80", "cp.async/mma.sync m16n8k16")
    if why:
        return False, why
    threads = p["wm"] * p["wn"] * 32
    if threads > 512:
        return False, f"{threads} threads per block (limit 16 warps here)"
    if p["bm"] % (16 * p["wm"]) or p["bn"] % (16 * p["wn"]):
        return False, f"tile {p['bm']}x{p['bn']} is not a multiple of the {16 * p['wm']}x{16 * p['wn']} MMA tile"
    rows = rows_per_copy(p["wm"], p["wn"], p["bk"])
    if threads % (p["bk"] // 8) or p["bm"] % rows or p["bn"] % rows:
        return False, f"the cp.async layout ({rows} rows x {p['bk'] // 8} vectors) does not tile {p['bm']}/{p['bn']} rows"
    if p["bm"] % 8 or p["bn"] % 8:
        return False, "tiles must be multiples of the 8-row swizzle atom"
    if (1 << p["sw_b"]) > p["bk"] // 8:
        return False, f"swizzle B={p['sw_b']} permutes {1 << p['sw_b']} 16-byte units but a row holds {p['bk'] // 8}"
    if not 1 <= p["prefetch"] <= p["stages"] - 1:
        return False, f"prefetch distance {p['prefetch']} must be in 1..stages-1 ({p['stages'] - 1})"
    acc_regs = p["bm"] * p["bn"] // threads // (1 if p["acc"] == "fp32" else 2)
    if acc_regs > 128:
        return False, f"{acc_regs} accumulator registers per thread would spill (limit 128)"
    wtm, wtn = p["bm"] // p["wm"], p["bn"] // p["wn"]
    frag_regs = (wtm // 16) * 4 + (wtn // 8) * 2
    est = acc_regs + frag_regs * (2 if p["reg_pipeline"] else 1) + 40
    if est > lim.regs_per_thread:
        return False, f"~{est} registers per thread > {lim.regs_per_thread}"
    if est * threads > lim.regs_per_sm:
        return False, f"~{est} registers x {threads} threads > {lim.regs_per_sm} per SM"
    if why := smem_problem(smem_bytes(p), lim):
        return False, why
    if shape is not None:
        m, n, k = shape
        if not in_16_byte_rows(n, k):
            return False, f"N={n} and K={k} must be multiples of 8"
        if k % p["bk"]:
            return False, f"K={k} is not a multiple of bk={p['bk']}"
        if m < p["bm"] or n < p["bn"]:
            return False, f"tile {p['bm']}x{p['bn']} is larger than the {m}x{n} output (edge tiles are shifted, not padded)"
        kt = k // p["bk"]
        tiles = ceil_div(m, p["bm"]) * ceil_div(n, p["bn"])
        if p["split_k"] > 1 and (why := splitk_problem(kt, p["split_k"], tiles, p["bm"] * p["bn"])):
            return False, why
    return True, ""


def render(params: dict[str, Any]) -> str:
    return render_feasible("ampere_cute", TEMPLATE, validate(params), feasible, defaults=DEFAULTS, ws_floats=WS_FLOATS)


def space(shape: tuple[int, int, int], acc: str = "fp32", arch: str = "sm_90a") -> list[dict[str, Any]]:
    out = []
    for bm, bn, bk in itertools.product(DOMAIN["bm"], DOMAIN["bn"], DOMAIN["bk"]):
        for wm, wn in ((2, 2), (2, 4), (4, 2), (1, 4), (4, 1), (2, 1), (1, 2)):
            for stages in (2, 3, 4, 5):
                for split in (1, 2, 4):
                    for bsw in (1, 4, 8):
                        for regp, epi in ((True, "smem"), (False, "direct"), (True, "direct")):
                            p = {"bm": bm, "bn": bn, "bk": bk, "wm": wm, "wn": wn, "stages": stages,
                                 "prefetch": stages - 1, "sw_b": 3 if bk == 64 else 2, "sw_m": 3, "sw_s": 3,
                                 "block_swizzle": bsw, "reg_pipeline": regp, "epilogue": epi, "split_k": split,
                                 "acc": acc, **launch_knobs(arch)}
                            if feasible(p, shape, arch)[0]:
                                out.append(validate(p))
    return out


# ---------------------------------------------------------------- search: priors, shares, cost model, mutations

ORDER = 1
SHORT = "ac"
# Mid shapes (2^31-2^35 FLOP, outputs beyond 2^20): none of its own on sm_90a (on sm_80 the Hopper families hand it
# theirs). No mma.sync kernel is among the 72 mid-class winners (every mode) of the sm_90a tables under
# docs/benchmarks/data/tables, and on 14 mid shapes outside every sample the best of theirs in the search read 0.21-0.83
# of best NVIDIA, never a tournament player (raw_mid_campaign_h200_2026-11-26_56e6505.json,
# mid_rules_campaign_h200_2026-11-26_4acd906.json): a token share spent two of eight candidates a shape. M <= 64
# streamed: none either (hopper_raw's SHARES say why). Outputs of up to 2^20 with K >= 2048 on TMA's 16-byte rows
# (skinny_tma): none. No mma.sync kernel won any of the 17 such shapes of the sm_90a tables (the held-out sample's
# left out), and where both kinds were timed (ten shapes of K = 2176-16384: probes under docs/benchmarks/data, the
# fourth unseen draw's campaign) the best mma.sync kernel read 0.23-0.64 of the best TMA family's, while a token share
# of each took two of a campaign's first four candidates. At K = 1024-2047 they keep it (ampere_cute won
# 256x1024x1024, 0.93 against 0.73), and where N or K is off TMA's rows they are what runs.
SHARES = {"skinny_streamed": 0.0, "skinny_tma": 0.0, "skinny_long_k": 0.2, "output_bound": 0.3, "launch_wave": 0.5,
          "launch_bound": 0.5, "mid_low": 0.0, "mid_high": 0.0, "large": 0.0}


def runs_on(arch: str) -> bool:
    return True


def repair(p: dict[str, Any]) -> dict[str, Any]:
    """Keep coupled knobs consistent after a mutation."""
    q = dict(p)
    q["prefetch"] = max(1, min(q["prefetch"], q["stages"] - 1))
    q["sw_b"] = min(q["sw_b"], {32: 2, 64: 3}[q["bk"]])
    return q


def cold_twin(params: dict[str, Any], shape: tuple[int, int, int]) -> dict[str, Any] | None:
    """The same kernel for a cold single call (agent.families.COLD_MODE): every k-tile its CTA multiplies in flight
    from the start (`prefetch`, with the ring to hold them), up to the domain's deepest, or None where they are
    already or no deeper ring fits. A cold call reads B from DRAM, so each group of `prefetch` tiles waits its own
    round trip there; back to back the operands sit in the L2, where the search ranked the prefetch it found. The
    ring stays within an A100's shared memory, so the twin builds for either arch the family serves."""
    p = validate(params)
    per = ceil_div(shape[2] // p["bk"], p["split_k"])
    return first_on_both_archs((dict(p, prefetch=d, stages=max(p["stages"], d + 1))
                                for d in range(min(per, DOMAIN["prefetch"][-1]), p["prefetch"], -1)),
                               feasible, smem_bytes, shape)


def prior(shape: tuple[int, int, int], acc: str, sms: int = 132) -> dict[str, Any]:
    m, n, k = shape
    bm = pricing.pick((32, 64, 128, 160, 256), min(max(m / 8, 32), 160 if m >= 8192 else 128))
    bn = pricing.pick((32, 64, 128, 256), min(max(n / 8, 32), 128))
    bk = 64 if k >= 256 and k % 64 == 0 else 32
    warps = lambda bm: (2, 2) if bm * bn <= 64 * 128 else (2, 4)  # noqa: E731
    wm, wn = warps(bm)
    if bm % rows_per_copy(wm, wn, bk):
        # eight warps' cp.async moves 64 rows of bk=32 at a time, which 160 rows do not fill: the nearest tile they do
        bm = 128
        wm, wn = warps(bm)
    stages = 3 if k <= 1024 else (4 if k <= 4096 else 5)
    tiles = ceil_div(m, bm) * ceil_div(n, bn)
    split = 1
    while tiles * split * 2 <= sms and split < 8 and k // bk >= 8 * split * 2:
        split *= 2
    return {"bm": bm, "bn": bn, "bk": bk, "wm": wm, "wn": wn, "stages": stages, "prefetch": stages - 1,
            "sw_b": 3 if bk == 64 else 2, "sw_m": 3, "sw_s": 3, "block_swizzle": pricing.block_swizzle_stride(shape),
            "reg_pipeline": True, "epilogue": "smem", "split_k": split, "acc": acc}


# From pricing.LAUNCH_WAVE_OUTPUTS the 32x32 four-warp tile (one CTA per 1,024 outputs: about a wave of them from there)
# goes ahead of the paper's prior, below 2^31 FLOP and the output-bound tiles' 2^19 outputs. On five launch-bound shapes
# at the top of that class (1024x256x512, 256x1024x512, 512x512x512, 2048x128x512, 512x256x1024; H200, same rounds) it
# led the mma.sync families' first priors in every mode, 1.05-1.11 of best NVIDIA separated and 0.91-0.95 in server
# mode, where the paper's prior (64 CTAs of 128x32, 32x128 or 64x64, or 128 of a 2-way split) read 0.73-0.98 and
# 0.70-0.88; only the wgmma family's 64x32 tile on 512x256x1024 read more (1.138 separated), a family with no share
# there (docs/benchmarks/data/launch_bound_top_h200_2026-11-29_fa1c0db.json). A campaign on 1024x256x512, whose first
# batch held the prior, never reached it (its winner 0.874 in server mode, 32x32 0.930). 59 of 1,000 grid first batches
# change; on the eight of them timed old batch beside new (K = 64-1024), the new batch's best read the same or better in
# every mode, by up to 5% (data/launch_bound_32x32_first_batch_ab_h200_2026-11-29_b982588.json).
def priors(shape: tuple[int, int, int], acc: str, arch: str = "sm_90a", mode: str = "offline") -> list[dict[str, Any]]:
    """The paper's prior plus, for launch-bound shapes, the 32x32 / 64x64 four-warp tiles without split-K that beat
    cuBLASLt-AutoTuning under the evaluator (1.06-1.15x on 64x64x128 ... 512x512x64); from pricing.LAUNCH_WAVE_OUTPUTS
    outputs (up to the output-bound tiles' 2^19) the 32x32 tile ahead of the paper's prior."""
    m, n, k = shape
    if k % 32 or m < 32 or n < 32:
        # every tile's K step is 32 or 64 and the kernel has no K remainder, and its edge tiles are shifted, not
        # padded, so no tile runs where a side is under 32: no place to start, no share
        return []
    out = [prior(shape, acc)]
    if pricing.flop(shape) < pricing.LAUNCH_FLOP:
        for bm, bn in ((32, 32), (64, 64), (64, 32)):
            if bm <= m and bn <= n:
                bk = 64 if k % 64 == 0 and k >= 256 else 32
                wm = bm // 16 if bm <= 32 else 4 if bn == 32 else 2
                # with bk=32 eight warps' cp.async moves 64 rows at a time, more than a 32-column tile has: four warps
                wn = 1 if bn % rows_per_copy(wm, 2, bk) else 2
                out.append({"bm": bm, "bn": bn, "bk": bk, "wm": wm, "wn": wn, "stages": 3, "prefetch": 2,
                            "sw_b": 3 if bk == 64 else 2, "sw_m": 3, "sw_s": 3, "block_swizzle": 1,
                            "reg_pipeline": True, "epilogue": "smem", "split_k": 1, "acc": acc})
        if m * n >= pricing.OUTPUT_BOUND_OUTPUTS:
            out = _output_bound(shape, acc, mode) + out
        elif m * n >= pricing.LAUNCH_WAVE_OUTPUTS:
            out.insert(0, out.pop(1))  # the 32x32 tile, appended first above (both sides are at least 32)
    return out


def _output_bound(shape: tuple[int, int, int], acc: str, mode: str = "offline") -> list[dict[str, Any]]:
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
        # 64x64 and 128x64 tiles measured best of 54 configs on 128x16384x64 and 1024x2048x64 (H200 sweeps: 0.898-0.914
        # with PDL, against 0.797-0.840 for the wide tile above), 0.972 and 0.961 without PDL
        lean = {**common, "bk": 32, "stages": 2, "prefetch": 1, "reg_pipeline": False, "block_swizzle": 1}
        picks = [{**lean, "bm": 64, "bn": 64}, {**lean, "bm": 128, "bn": 64}] + picks
    return [q for q in picks if q["bm"] <= m and q["bn"] <= n]


def estimate_us(p: dict[str, Any], shape: tuple[int, int, int], arch: str) -> float:
    m, n, k = shape
    threads = p["wm"] * p["wn"] * 32
    smem = (p["bm"] + p["bn"]) * p["bk"] * p["stages"] * 2
    t = pricing.mma_sync_time(shape, p["bm"], p["bn"], p["bk"], threads, smem, p["split_k"], p["prefetch"] + 1, arch,
                       (p["bm"] // p["wm"], p["bn"] // p["wn"]))
    # bigger rasterisation groups keep B panels in L2 on large problems
    if 2.0 * m * n * k > 2 ** 30 and p["block_swizzle"] == 1:
        t *= 1.04
    if not p["reg_pipeline"]:
        t *= 1.03
    return t * 1e6 + (0.0 if p["epilogue"] == "smem" else 0.2)
