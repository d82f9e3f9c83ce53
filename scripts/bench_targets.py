"""The targets of big shapes and server mode, judged over a built-in policy benchmark's rows in every regime it
measured, against best NVIDIA (the fastest baseline of the same rounds), on final measurements only: a shape whose
search figure has not been re-measured yet is named as not judged, never counted for or against a target.

- every shape of 2^36 FLOP or more at 1.00 or better back to back, separated and power-steady (the offline regime,
  power-steady where a shape is power-limited), and their geomean at 1.03 or better in each;
- server mode: a geomean of 1.10 or better, with 75% of the shapes or more won;
- skinny long-K outputs (min(M, N) <= 256, K >= 8192): each at 1.05 or better in every offline regime;
- on average no more than 5 GPU-minutes a shape, counted as the time its evaluations held a GPU.
"""
from __future__ import annotations

import statistics

from agent.families.pricing import flop

BIG_FLOP = 2 ** 36
BIG_REGIMES = ("back-to-back", "separated", "offline")
BIG_EACH, BIG_GEOMEAN = 1.00, 1.03
SERVER_GEOMEAN, SERVER_WON = 1.10, 0.75
SKINNY_EACH = 1.05
GPU_MINUTES = 5.0


def is_big(shape: tuple[int, int, int]) -> bool:
    """2^36 FLOP or more, the issue's threshold (every table of the project judges big shapes by this)."""
    return flop(shape) >= BIG_FLOP


def skinny_long_k(shape: tuple[int, int, int]) -> bool:
    m, n, k = shape
    return min(m, n) <= 256 and k >= 8192


def missed(shape: tuple[int, int, int], regime: str, x: float) -> bool:
    """Whether one median final (`x` against best NVIDIA in `regime`) misses an each-shape target or loses server
    mode: the kernels the benchmark doc owes a profile (scripts/profile_misses.py)."""
    if regime == "server":
        return x <= 1.0
    return regime in BIG_REGIMES and ((is_big(shape) and x < BIG_EACH) or (skinny_long_k(shape) and x < SKINNY_EACH))


def _name(shape: tuple[int, int, int]) -> str:
    return "×".join(map(str, shape))


def _verdict(ok: bool, figure: str, misses: list[str], unjudged: list[str], aggregate: bool = False,
             lacking: str = "a final") -> str:
    """A shape that misses an each-shape target misses it whatever the others read; an aggregate over part of the
    shapes is not judged until every shape has its final."""
    state = "not judged yet" if unjudged and (ok or aggregate) else ("met" if ok else "not met")
    tail = f"; {len(unjudged)} shape{'s' if len(unjudged) > 1 else ''} without {lacking} yet" if unjudged else ""
    return f"{state} ({figure}" + (f"; misses: {', '.join(misses)}" if misses else "") + ")" + tail


def _each(label: str, group: list[tuple], finals: dict[str, dict[tuple, float]], regime: str, bar: float) -> str:
    """An each-shape target over `group` in one regime."""
    got = finals.get(regime, {})
    figs = {s: got[s] for s in group if s in got}
    misses = [f"{_name(s)} {x:.3f}" for s, x in figs.items() if x < bar]
    low = f"min {min(figs.values()):.3f}" if figs else "no final"
    return (f"- {label}, each ≥ {bar:.2f} {regime}: "
            + _verdict(not misses, f"{len(figs)} of {len(group)}, {low}", misses,
                       [_name(s) for s in group if s not in got]))


def judge(finals: dict[str, dict[tuple, float]], shapes: list[tuple], gpu_s: dict[tuple, float]) -> list[str]:
    """Markdown lines: one per target. `finals` maps a regime to each shape's median final speedup against best
    NVIDIA (shapes without a final in that regime absent); `shapes` is the run's shape list; `gpu_s` the GPU seconds
    each shape's evaluations held."""
    out = []
    big = [s for s in shapes if is_big(s)]
    for regime in BIG_REGIMES:
        out.append(_each("shapes ≥ 2^36 FLOP", big, finals, regime, BIG_EACH))
        figs = [finals.get(regime, {})[s] for s in big if s in finals.get(regime, {})]
        g = statistics.geometric_mean(figs) if figs else None
        out.append(f"- shapes ≥ 2^36 FLOP, geomean ≥ {BIG_GEOMEAN:.2f} {regime}: "
                   + _verdict(g is not None and g >= BIG_GEOMEAN, "no final" if g is None else f"{g:.3f}", [],
                              [_name(s) for s in big if s not in finals.get(regime, {})], aggregate=True))
    server = finals.get("server", {})
    figs = [server[s] for s in shapes if s in server]
    unjudged = [_name(s) for s in shapes if s not in server]
    g = statistics.geometric_mean(figs) if figs else None
    won = sum(x > 1.0 for x in figs)
    out.append(f"- server mode, geomean ≥ {SERVER_GEOMEAN:.2f}: "
               + _verdict(g is not None and g >= SERVER_GEOMEAN, "no final" if g is None else f"{g:.3f}", [],
                          unjudged, aggregate=True))
    out.append(f"- server mode, ≥ {SERVER_WON:.0%} of shapes won: "
               + _verdict(bool(figs) and won / len(figs) >= SERVER_WON,
                          f"{won / len(figs):.0%}, {won} of {len(figs)}" if figs else "no final",
                          [f"{_name(s)} {x:.3f}" for s in shapes if (x := server.get(s)) is not None
                           and missed(s, "server", x)],
                          unjudged, aggregate=True))
    skinny = [s for s in shapes if skinny_long_k(s)]
    out += [_each("skinny long-K (min(M, N) ≤ 256, K ≥ 8192)", skinny, finals, regime, SKINNY_EACH)
            for regime in BIG_REGIMES]
    spent = [gpu_s[s] for s in shapes if s in gpu_s]
    mean_min = statistics.fmean(spent) / 60 if spent else None
    out.append(f"- GPU time, ≤ {GPU_MINUTES:.0f} GPU-minutes a shape on average (held by its evaluations): "
               + _verdict(mean_min is not None and mean_min <= GPU_MINUTES,
                          "no record" if mean_min is None else f"{mean_min:.2f} over {len(spent)} shapes", [],
                          [_name(s) for s in shapes if s not in gpu_s], aggregate=True, lacking="a search"))
    return out
