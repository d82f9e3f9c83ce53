"""Family `small`: one-launch mma.sync kernel for tiny and skinny shapes, with optional in-launch split-K."""
from __future__ import annotations

import itertools
from typing import Any

from . import pricing
from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, WS_FLOATS, arch_limits, ceil_div, first_on_both_archs,
                     in_16_byte_rows, launch_knobs, render_feasible, smem_problem, splitk_problem,
                     validate_with_defaults, validated)

NAME = "small"
TEMPLATE = "small.cu.j2"

DOMAIN: dict[str, tuple] = {
    "bm": (16, 32, 64, 128),
    "bn": (16, 32, 64, 128, 256),
    "bk": (32, 64, 128),
    "wm": (1, 2, 4),
    "wn": (1, 2, 4, 8),
    "stages": (2, 3, 4, 5, 6),
    "split_k": (1, 2, 3, 4, 6, 8, 12, 16),
    "cluster_k": (1, 2, 4, 8),
    "epi": ("direct", "smem"),
    **LAUNCH_DOMAIN,
}
# Knobs added after the first configs were measured: at their default they are left out of the canonical params,
# so earlier candidates keep their identity (name, archive key, build cache).
DEFAULTS: dict[str, Any] = {"cluster_k": 1, "epi": "direct", **LAUNCH_DEFAULTS}


def validate(params: dict[str, Any]) -> dict[str, Any]:
    return validate_with_defaults(params, DOMAIN, DEFAULTS)


def smem_bytes(p: dict[str, Any]) -> int:
    pipe = p["stages"] * (p["bm"] * (p["bk"] + 8) + p["bk"] * (p["bn"] + 8)) * 2
    if p.get("epi", "direct") == "smem" or p.get("cluster_k", 1) > 1:
        tile = max(pipe, p["bm"] * (p["bn"] + 8) * 4)  # the fp32 tile reuses the pipeline buffers
        # a pushing split also holds the barrier that counts the partial rows its cluster's CTAs push
        return tile + (8 if pushes(p) else 0)
    return pipe


def feasible(params: dict[str, Any], shape: tuple[int, int, int] | None, arch: str) -> tuple[bool, str]:
    p, lim, why = validated(params, validate, arch, "sm_80", "mma.sync m16n8k16 + cp.async")
    if why:
        return False, why
    ck = p.get("cluster_k", 1)
    if ck > 1:
        if lim.sm < 90:
            return False, f"cluster_k={ck}: thread-block clusters and distributed shared memory need sm_90"
        if p["split_k"] > 1:
            return False, "cluster_k and split_k are two ways to split K; use one"
        if p.get("epi", "direct") != "smem":
            return False, "cluster_k reduces through shared memory: it goes with epi=smem"
    wtm, wtn = p["bm"] // p["wm"], p["bn"] // p["wn"]
    if p["bm"] % p["wm"] or p["bn"] % p["wn"] or wtm % 16 or wtn % 16:
        return False, f"warp tile {p['bm']}/{p['wm']}x{p['bn']}/{p['wn']} is not a multiple of 16x16"
    threads = p["wm"] * p["wn"] * 32
    if threads > 512:
        return False, f"{threads} threads per block; this family stays at <= 16 warps"
    acc_regs = (wtm // 16) * (wtn // 8) * 4
    if acc_regs > 128:
        return False, f"{acc_regs} fp32 accumulators per thread would spill (limit 128)"
    # registers per thread: accumulators + A/B fragments + addressing, must let the block fit on one SM
    est_regs = acc_regs + (wtm // 16) * 4 + (wtn // 16) * 4 + 40
    if est_regs * threads > lim.regs_per_sm:
        return False, f"~{est_regs} registers x {threads} threads exceeds {lim.regs_per_sm} per SM"
    if why := smem_problem(smem_bytes(p), lim):
        return False, why
    if shape is not None:
        m, n, k = shape
        if not in_16_byte_rows(n, k):
            return False, f"N={n} and K={k} must be multiples of 8 (16-byte cp.async)"
        kt = ceil_div(k, p["bk"])
        tiles = ceil_div(m, p["bm"]) * ceil_div(n, p["bn"])
        if p["split_k"] > 1 and (why := splitk_problem(kt, p["split_k"], tiles, p["bm"] * p["bn"])):
            return False, why
        if ck > 1 and empty_cluster_splits(kt, ck):
            return False, f"cluster_k={ck} leaves empty splits of {kt} k-tiles"
        if ceil_div(m, p["bm"]) > 65535:
            return False, "grid.y over 65535"
        if p["bk"] > 2 * max(k, 16) and p["bk"] > 32:
            return False, f"bk={p['bk']} much larger than K={k}"
    return True, ""


# The largest tile (bm x bn) whose cluster split pushes its partial rows to the CTAs that sum them (st.async, counted
# on their barriers) instead of publishing them with a release/acquire cluster barrier for the peers to read, plus a
# barrier at the end. Each split's first prior, push against publish in the same rounds (H200, 2026-11-29,
# docs/benchmarks/data/publish_push_h200_2026-11-29_1985b9c.json): tiles of 1024-4096 elements 0.25-0.96 us a call
# faster (seven shapes, server and back to back); 64x128 0.9 us faster on one shape and 0.5-1.3 us slower on two,
# 128x128 0.6-1.0 us slower.
PUSH_MAX_TILE = 4096


def pushes(p: dict[str, Any]) -> bool:
    return p.get("cluster_k", 1) > 1 and p["bm"] * p["bn"] <= PUSH_MAX_TILE


def render(params: dict[str, Any]) -> str:
    p = validate(params)
    return render_feasible("small", TEMPLATE, p, feasible, defaults=DEFAULTS, ws_floats=WS_FLOATS, push=pushes(p))


def _warp_layouts(bm: int, bn: int) -> list[tuple[int, int]]:
    out = []
    for wm, wn in itertools.product(DOMAIN["wm"], DOMAIN["wn"]):
        if bm % (16 * wm) == 0 and bn % (16 * wn) == 0 and 2 <= wm * wn <= 8:
            out.append((wm, wn))
    return out


def space(shape: tuple[int, int, int], acc: str = "fp32", arch: str = "sm_90a") -> list[dict[str, Any]]:
    """Feasible configs for this shape. The kernel always accumulates in fp32 (also the safe choice for fp16)."""
    m, n, k = shape
    out = []
    for bm, bn, bk in itertools.product(DOMAIN["bm"], DOMAIN["bn"], DOMAIN["bk"]):
        if bm > max(16, 2 * m) or bn > max(16, 2 * n):
            continue
        for wm, wn in _warp_layouts(bm, bn):
            for stages in (2, 3, 4, 5):
                for split, ck, epi in _k_splits(arch):
                    p = validate({"bm": bm, "bn": bn, "bk": bk, "wm": wm, "wn": wn, "stages": stages,
                                  "split_k": split, "cluster_k": ck, "epi": epi, **launch_knobs(arch)})
                    if feasible(p, shape, arch)[0]:
                        out.append(p)
    return out


def _k_splits(arch: str) -> list[tuple[int, int, str]]:
    """(split_k, cluster_k, epi) combinations: workspace split-K with either epilogue, or a cluster split."""
    out = [(s, 1, e) for s in DOMAIN["split_k"] for e in DOMAIN["epi"]]
    if arch_limits(arch).sm >= 90:
        out += [(1, c, "smem") for c in DOMAIN["cluster_k"] if c > 1]
    return out


# ---------------------------------------------------------------- search: priors, shares, cost model, mutations

ORDER = 0  # the policy visits the families from the smallest problems they serve to the largest
SHORT = "sm"
# A fresh batch's share per size class (agent.families.pricing.size_class), before any measurement. On launch-bound
# shapes ampere_cute without split-K was as fast as or faster than this family (2.7-2.9 us against cuBLASLt's
# ~3.0 us floor, H200) and split-K's second pass cost ~1.5 us there (1.15 since its lean hand-off): hence the even
# split below 2^31 FLOP.
# Mid shapes, M <= 64 streamed and skinny outputs of K >= 2048 on TMA's rows: none, as for ampere_cute (which says
# why). Output-bound shapes (up to 2^31 FLOP, outputs from 2^19 elements): none either. On the 18 such shapes that
# committed probes timed it beside the other families (51 shape-modes, H200 and H100, docs/benchmarks/data) its best
# read 0.31-0.74 of the fastest player (median 0.51-0.59 by mode) and never led, and it won none of the 193 output-bound
# winner rows of the committed campaign tables, where ampere_cute won 149; its slot of a first batch went to a kernel
# at half speed (256x12288x256: 0.36 of best NVIDIA beside wgmma's 1.11, H200).
# The launch-bound class's top (launch_wave, 2^17-2^19 outputs): none either. It won none of the 85 winner rows of the
# committed tables there (ampere_cute all), and its first priors read 13-45% below ampere_cute's best (separated) on all
# eleven such shapes probed (docs/benchmarks/data/launch_bound_top_h200_2026-11-29_fa1c0db.json,
# launch_bound_32x32_first_batch_ab_h200_2026-11-29_b982588.json); in the first-batch A/Bs of twelve more its best
# read below ampere_cute's best on eleven, level on one (launch_wave_ab_h200_2026-11-29_a1132f0.json,
# launch_wave_first_batch_ab_h200_2026-11-29_5ec892e.json).
SHARES = {"skinny_streamed": 0.0, "skinny_tma": 0.0, "skinny_long_k": 0.2, "output_bound": 0.0, "launch_wave": 0.0,
          "launch_bound": 0.5, "mid_low": 0.0, "mid_high": 0.0, "large": 0.0}


def runs_on(arch: str) -> bool:
    return True


def repair(p: dict[str, Any]) -> dict[str, Any]:
    """Its knobs are independent: a mutation needs no repair."""
    return dict(p)


def cold_twin(params: dict[str, Any], shape: tuple[int, int, int]) -> dict[str, Any] | None:
    """The same kernel for a cold single call (agent.families.COLD_MODE): a ring one stage deeper than the k-tiles its
    CTA multiplies, so that all of them are in flight from the start (the kernel keeps stages - 1 ahead), up to the
    domain's deepest, or None where they are already or no deeper ring fits (ampere_cute.cold_twin says why). Within
    an A100's shared memory, as the family serves sm_80 too."""
    p = validate(params)
    per = ceil_div(ceil_div(shape[2], p["bk"]), p["split_k"] * p.get("cluster_k", 1))
    return first_on_both_archs((dict(p, stages=stages)
                                for stages in range(min(per + 1, DOMAIN["stages"][-1]), p["stages"], -1)),
                               feasible, smem_bytes, shape)


def empty_cluster_splits(kt: int, ck: int) -> bool:
    """Whether K's kt tiles, dealt out ceil(kt / ck) to a CTA, leave some of the cluster's ck CTAs none."""
    return ck > kt or ceil_div(kt, ceil_div(kt, ck)) < ck


def _largest_split(tiles: int, kt: int, tile_elems: int, sms: int = 132) -> int:
    """The most K slices (of 2-16) that keep the grid within two CTAs per SM, at least two k-tiles and none empty a
    slice: the launch-bound shapes' split-K (up to ~1-2 CTAs per SM)."""
    split = 1
    for s in (2, 3, 4, 6, 8, 12, 16):
        if tiles * s <= 2 * sms and kt // s >= 2 and not splitk_problem(kt, s, tiles, tile_elems):
            split = s
    return split


def prior(shape: tuple[int, int, int], sms: int = 132) -> dict[str, Any]:
    m, n, k = shape
    bm = 16 if m <= 64 else (32 if m <= 256 else 64)
    bn = 32 if n <= 256 else (64 if n <= 1024 else 128)
    bk = 32 if k <= 128 else 64
    tiles = ceil_div(m, bm) * ceil_div(n, bn)
    kt = ceil_div(k, bk)
    split = _largest_split(tiles, kt, bm * bn, sms)
    wm = min(2, bm // 16)
    wn = max(1, min(4 // wm, bn // 16))
    stages = max(2, min(4, ceil_div(kt, split)))
    return {"bm": bm, "bn": bn, "bk": bk, "wm": wm, "wn": wn, "stages": stages, "split_k": split}


def cluster_prior(shape: tuple[int, int, int]) -> dict[str, Any] | None:
    """Skinny M with a long K on sm_90: split K over an 8-CTA cluster reduced through distributed shared memory.
    Measured on the H200: 64x128x1024 at 0.86 of cuBLASLt (best of any family), 64x512x2048 at 0.83."""
    m, n, k = shape
    if m > 128 or k < 1024 or empty_cluster_splits(ceil_div(k, 64), 8):
        return None
    bm = 64 if m <= 64 else 128
    bn = max((b for b in (16, 32, 64, 128) if ceil_div(m, bm) * ceil_div(n, b) * 8 >= 128), default=16)
    wm, wn = (4, 1) if bn == 16 else (2, 2) if bn <= 64 else (2, 4)
    return {"bm": bm, "bn": bn, "bk": 64, "wm": wm, "wn": wn, "stages": 3, "split_k": 1, "cluster_k": 8,
            "epi": "smem"}


def priors(shape: tuple[int, int, int], acc: str = "fp32", arch: str = "sm_90a",
           mode: str = "offline") -> list[dict[str, Any]]:
    """The prior plus the two narrow-tile variants that won every launch-bound shape in our first H200 sweep
    (16-row tiles, 2-4 warps, split-K up to ~1-2 CTAs per SM), and on sm_90 the cluster split for skinny long K."""
    out = [prior(shape)]
    m, n, k = shape
    if arch in ("sm_90a", "sm_90") and (c := cluster_prior(shape)):
        out.insert(0, c)
    if out[0]["split_k"] > 1 and k <= 512:
        out.insert(0, dict(out[0], split_k=1, stages=max(2, min(4, ceil_div(k, out[0]["bk"])))))
    for bn, wn in ((32, 2), (64, 4)):
        q = dict(out[0], bm=16, bn=bn, wm=1, wn=wn)
        tiles = ceil_div(m, 16) * ceil_div(n, bn)
        kt = ceil_div(k, q["bk"])
        q["split_k"] = _largest_split(tiles, kt, 16 * bn)
        q["stages"] = max(2, min(4, ceil_div(kt, q["split_k"])))
        if q["split_k"] > 1:
            # a variant of the cluster prior splits K once: its cluster_k and split_k together are infeasible
            q.pop("cluster_k", None)
        out.append(q)
    return out


def estimate_us(p: dict[str, Any], shape: tuple[int, int, int], arch: str) -> float:
    m, n, k = shape
    threads = p["wm"] * p["wn"] * 32
    smem = p["stages"] * (p["bm"] * (p["bk"] + 8) + p["bk"] * (p["bn"] + 8)) * 2
    ck = p.get("cluster_k", 1)
    t = pricing.mma_sync_time(shape, p["bm"], p["bn"], p["bk"], threads, smem, max(p["split_k"], ck), p["stages"],
                       arch, (p["bm"] // p["wm"], p["bn"] // p["wn"]), cluster=ck > 1)
    # 16-byte stores from a shared-memory tile: measured 5.2 against 7.3 us on 1024x2048x64
    smem_epi = p.get("epi", "direct") == "smem" or ck > 1
    return t * 1e6 - (0.3 * min(1.0, m * n / 2 ** 21) if smem_epi else 0.0)
