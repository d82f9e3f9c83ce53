"""Family `hopper_raw`: a hand-written sm_90a TMA + wgmma warp-specialised persistent GEMM, without CUTLASS's
collectives (the template says why), fp32 accumulation, K-major A and B (B_col_major)."""
from __future__ import annotations

import itertools
from typing import Any

from .common import (LAUNCH_DEFAULTS, LAUNCH_DOMAIN, ceil_div, launch_knobs, render_feasible, smem_problem,
                     uneven_waves, validate_with_defaults, validated)

NAME = "hopper_raw"
TEMPLATE = "hopper_raw.cu.j2"
# for cutlass/cuda_host_adapter.hpp: the driver's tensor-map encoder, looked up by CUTLASS (the screen refuses a
# candidate that names the lookup itself, and the build links no libcuda to call it directly)
NEEDS_CUTLASS = True

DOMAIN: dict[str, tuple] = {
    "tile_m": (128, 256),  # two consumer warpgroups of tile_m/2 rows: one or two m64 wgmma atoms each
    "tile_n": (64, 128, 144, 160, 176, 192, 208, 224, 240, 256),
    "stages": (2, 3, 4, 5, 6, 7),
    "group": (1, 2, 4, 8, 16),  # work-unit rows per band of the tile order
    # CTAs along M per cluster: 2 share each B tile, each CTA loading half and multicasting it (TMA) to both
    "cluster_m": (1, 2),
    "acc": ("fp32",),
    # direct: half2 stores from the accumulator registers; tma: 64x64 sub-tiles through shared memory, TMA stores
    "epi": ("direct", "tma"),
    # alternate: a CTA walks K backward on every other work unit, so a wave starts on what the last one left in L2
    "k_order": ("forward", "alternate"),
    # operands (and C) whose TMA copies carry an L2 evict_first hint: the streamed one, so that what the next wave
    # reads again stays in L2 (DRAM bytes cost clock at the power limit)
    "l2_evict_first": ("none", "a", "b", "ac", "bc", "c"),
    # full: one CTA per SM (the last wave may be partial); even: the fewest CTAs that take the same number of waves,
    # so every CTA runs the same number of work units and each wave starts on a band boundary (512 units on 132
    # SMs: 128 CTAs of 4 instead of 116 of 4 and 16 of 3)
    "grid": ("full", "even"),
    **LAUNCH_DOMAIN,
}
# What the policy's mutations move through, narrower than what a sweep may render: 29 of run 25's 48 hopper_raw
# candidates carried a hint; A's (a, ac) measured 0.946-0.971 on multi-wave shapes there and 0.6-4% slower than no
# hint in sweep r31, and B alone (b) never differed from B with C (bc)
SEARCH_DOMAIN: dict[str, tuple] = {**DOMAIN, "l2_evict_first": ("none", "c", "bc")}
DEFAULTS: dict[str, Any] = {"epi": "direct", "cluster_m": 1, "k_order": "forward", "l2_evict_first": "none",
                            "grid": "full", **LAUNCH_DEFAULTS}
EPI_BYTES = 4 * 64 * 64 * 2  # two 64x64 fp16 sub-tiles per consumer warpgroup
MAX_ACC_REGS = 192  # fp32 accumulators per consumer thread; the consumers get 232 registers (setmaxnreg)


def validate(params: dict[str, Any]) -> dict[str, Any]:
    return validate_with_defaults(params, DOMAIN, DEFAULTS)


def smem_bytes(p: dict[str, Any]) -> int:
    """The stage ring (128-byte rows of 64 K-elements), 1024 bytes of alignment slack and the barriers."""
    epi = EPI_BYTES if p.get("epi") == "tma" else 0
    return p["stages"] * (p["tile_m"] + p["tile_n"]) * 128 + epi + 1024 + 16 * p["stages"]


def feasible(params: dict[str, Any], shape: tuple[int, int, int] | None, arch: str) -> tuple[bool, str]:
    p, lim, why = validated(params, validate, arch, "sm_90a", "wgmma, TMA and setmaxnreg")
    if why:
        return False, why
    acc = (p["tile_m"] // 128) * p["tile_n"] // 2
    if acc > MAX_ACC_REGS:
        return False, f"{acc} fp32 accumulators per consumer thread (limit {MAX_ACC_REGS}: 232 registers in all)"
    if p.get("epi") == "tma" and p["tile_n"] % 64:
        return False, f"the TMA epilogue stores 64-column sub-tiles: tile_n={p['tile_n']} is not a multiple of 64"
    if "c" in p.get("l2_evict_first", "none") and p.get("epi") != "tma":
        return False, "an L2 hint on C needs the TMA epilogue (stores from registers carry none)"
    if why := smem_problem(smem_bytes(p), lim):
        return False, why
    if shape is not None:
        m, n, k = shape
        if k % 8 or n % 2:
            return False, f"K={k} must be a multiple of 8 (TMA row stride) and N={n} even (paired stores)"
        if p.get("epi") == "tma" and n % 8:
            return False, f"the TMA epilogue needs N={n} to be a multiple of 8 (16-byte rows of C)"
        if p["tile_n"] > max(128, 2 * n) or p["tile_m"] > max(128, 2 * m):
            return False, f"a {p['tile_m']}x{p['tile_n']} tile is more than twice the {m}x{n} output"
        rows, cl = ceil_div(m, p["tile_m"]), p.get("cluster_m", 1)
        if rows % cl:
            return False, (f"cluster_m={cl} takes {cl} tile-rows at a time: {rows} tile-rows of {p['tile_m']} do not "
                           "divide")
        if p["group"] > 1 and rows // cl < 2 * p["group"]:
            return False, (f"group {p['group']} needs at least {2 * p['group']} tile-rows of work units "
                           f"({cl} tile-rows each), the shape has {rows // cl}")
        if p.get("grid") == "even" and (why := uneven_waves(rows // cl * ceil_div(n, p["tile_n"]), cl, lim.num_sms)):
            return False, why
    return True, ""


def render(params: dict[str, Any]) -> str:
    p = validate(params)
    n = p["tile_n"] // 2  # accumulator registers of one m64 wgmma atom, spelled out for its inline assembly
    evict = p.get("l2_evict_first", "none").replace("none", "")
    return render_feasible(NAME, TEMPLATE, p, feasible, defaults=DEFAULTS, acc_regs=n, evict_first=evict,
                           acc_list=", ".join(f"%{i}" for i in range(n)),
                           acc_operands=", ".join(f'"+f"(d[{i}])' for i in range(n)))


def space(shape: tuple[int, int, int], acc: str = "fp32", arch: str = "sm_90a") -> list[dict[str, Any]]:
    """Feasible configs: each tile with the deepest ring that fits and one stage less, in every tile order, and the TMA
    epilogue where the tile allows it (stores from registers measured 6% more cycles,
    docs/benchmarks/data/sweeps/raw_tma_2026-11-23_1c52652.json), with or without a 2-CTA cluster. The 128x64 tile stays out: in the domain for sweeps and one-knob mutations, it
    won none of the output-bound small-K shapes it was written for (0.81-0.87 in graph mode, sweep r25), and the
    space's exploration samples of the big shapes stay as they were measured."""
    if acc != "fp32":
        return []
    out = []
    for tm, tn in itertools.product(DOMAIN["tile_m"], (t for t in DOMAIN["tile_n"] if t >= 128)):
        epi = "tma" if tn % 64 == 0 and shape[1] % 8 == 0 else "direct"
        base = {"tile_m": tm, "tile_n": tn, "group": 1, "acc": "fp32", "epi": epi}
        deepest = max((s for s in DOMAIN["stages"] if feasible(dict(base, stages=s), None, arch)[0]), default=None)
        if deepest is None:
            continue
        for stages, group, cl in itertools.product((deepest, deepest - 1), DOMAIN["group"], DOMAIN["cluster_m"]):
            p = validate(dict(base, stages=stages, group=group, cluster_m=cl, **launch_knobs(arch)))
            if feasible(p, shape, arch)[0]:
                out.append(p)
    return out
