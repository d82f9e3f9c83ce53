"""Family `ampere_cute`: Ampere-style CuTe multistage kernel (mma.sync, cp.async, ldmatrix); sm_80 and sm_90a."""
from __future__ import annotations

import itertools
from typing import Any

from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, WS_FLOATS, ceil_div, launch_knobs, render_feasible, smem_problem,
                     splitk_problem, validate_with_defaults, validated)

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


def feasible(params: dict[str, Any], shape: tuple[int, int, int] | None, arch: str) -> tuple[bool, str]:
    p, lim, why = validated(params, validate, arch, "sm_80", "cp.async/mma.sync m16n8k16")
    if why:
        return False, why
    threads = p["wm"] * p["wn"] * 32
    if threads > 512:
        return False, f"{threads} threads per block (limit 16 warps here)"
    if p["bm"] % (16 * p["wm"]) or p["bn"] % (16 * p["wn"]):
        return False, f"tile {p['bm']}x{p['bn']} is not a multiple of the {16 * p['wm']}x{16 * p['wn']} MMA tile"
    rows_per_copy = threads // (p["bk"] // 8)
    if threads % (p["bk"] // 8) or p["bm"] % rows_per_copy or p["bn"] % rows_per_copy:
        return False, f"the cp.async layout ({rows_per_copy} rows x {p['bk'] // 8} vectors) does not tile {p['bm']}/{p['bn']} rows"
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
        if n % 8 or k % 8:
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
