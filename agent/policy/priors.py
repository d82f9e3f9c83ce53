"""Starting points before any measurement: each family's priors for a shape (the family carries them, see
agent.families.protocol), with the launch knobs the search's timing mode uses, and a fresh batch's split between
the families by the shape's size class.

Following the paper's analysis (§5-6), by size: launch-bound shapes go to one-launch kernels with split-K inside
them, mid shapes to split-K mma.sync kernels and Hopper stream-K, large shapes to wgmma kernels.
"""
from __future__ import annotations

from typing import Any

from agent.families import ARCHS, COLD_MODE, cold_twin, families, get, normal_params, with_launch_knobs
from agent.families.common import in_16_byte_rows
from agent.families.pricing import LARGE_FLOP, LAUNCH_WAVE_OUTPUTS, SMALL_FLOP, flop, streams_a, streams_ab, streams_b

SIZE_CLASSES = ("skinny_streamed", "skinny_tma", "skinny_long_k", "output_bound", "launch_wave", "launch_bound",
                "mid_low", "mid_high", "large")


def size_class(shape: tuple[int, int, int], arch: str) -> str:
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
    if f < 2 ** 31:
        if m * n >= 2 ** 19:
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


def family_shares(shape: tuple[int, int, int], arch: str, acc: str = "fp32") -> dict[str, float]:
    """Share of a fresh batch per family, before any measurement: each family's share of the shape's size class;
    a family that cannot run on `arch` hands its share to its ARCH_FALLBACK."""
    cls = size_class(shape, arch)
    fams = families()
    shares = {name: float(mod.SHARES.get(cls, 0.0)) for name, mod in fams.items()}
    for name, mod in fams.items():
        # a family that lists no prior for the shape and accumulator where it runs knows no place to start there
        # (hopper_raw on a mid shape that none of its tiles fills, or at fp16): it gets no share and hands none on
        own = next((a for a in ARCHS if mod.runs_on(a)), arch)
        if shares[name] > 0 and not mod.priors(shape, acc, own):
            shares[name] = 0.0
    for name, mod in fams.items():
        if not mod.runs_on(arch):
            fallback = getattr(mod, "ARCH_FALLBACK", None)
            if fallback:
                shares[fallback] += shares[name]
            shares[name] = 0.0
    if not any(shares.values()):
        # no family of the class can start here (a class that leaves families out, at an accumulator its families do
        # not list priors for): every family that runs here and lists priors gets an even share, so no batch is empty
        shares = {name: float(mod.runs_on(arch) and bool(mod.priors(shape, acc, arch))) for name, mod in fams.items()}
    return shares


def priors(family: str, shape: tuple[int, int, int], acc: str, arch: str,
           mode: str = "offline") -> list[dict[str, Any]]:
    listed = get(family).priors(shape, acc, arch, mode)
    if mode == COLD_MODE:  # a search timed cold starts from each prior's cold twin, where its family has one
        listed = [cold_twin(family, p, shape) or p for p in listed]
    return [_fit_ring(family, with_launch_knobs(family, p, arch, mode), shape, arch) for p in listed]


def _fit_ring(family: str, p: dict[str, Any], shape: tuple[int, int, int], arch: str) -> dict[str, Any]:
    """The mma.sync families' priors are written for sm_90's 227 KB of shared memory; on sm_80 (163 KB) and sm_86/89
    (99 KB) the policy's pool would drop those that overflow without a word (54 and 729 on the grid). The tile is the
    prior's point, so its ring gives way: the deepest that fits, else the prior as listed."""
    mod = get(family)
    if not p.get("stages") or mod.feasible(normal_params(family, p), shape, arch)[0]:
        return p
    for stages in range(p["stages"] - 1, 1, -1):
        q = mod.repair(dict(p, stages=stages))
        if mod.feasible(normal_params(family, q), shape, arch)[0]:
            return q
    return p
