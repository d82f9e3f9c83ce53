"""Family `small`: one-launch mma.sync kernel for tiny and skinny shapes, with optional in-launch split-K."""
from __future__ import annotations

import itertools
from typing import Any

from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, WS_FLOATS, arch_limits, ceil_div, launch_knobs, render_feasible,
                     smem_problem, splitk_problem, validate_with_defaults, validated)

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
        return max(pipe, p["bm"] * (p["bn"] + 8) * 4)  # the fp32 tile reuses the pipeline buffers
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
        if n % 8 or k % 8:
            return False, f"N={n} and K={k} must be multiples of 8 (16-byte cp.async)"
        kt = ceil_div(k, p["bk"])
        tiles = ceil_div(m, p["bm"]) * ceil_div(n, p["bn"])
        if p["split_k"] > 1 and (why := splitk_problem(kt, p["split_k"], tiles, p["bm"] * p["bn"])):
            return False, why
        if ck > 1 and (ck > kt or ceil_div(kt, ceil_div(kt, ck)) < ck):
            return False, f"cluster_k={ck} leaves empty splits of {kt} k-tiles"
        if ceil_div(m, p["bm"]) > 65535:
            return False, "grid.y over 65535"
        if p["bk"] > 2 * max(k, 16) and p["bk"] > 32:
            return False, f"bk={p['bk']} much larger than K={k}"
    return True, ""


def render(params: dict[str, Any]) -> str:
    return render_feasible("small", TEMPLATE, validate(params), feasible, defaults=DEFAULTS, ws_floats=WS_FLOATS)


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
