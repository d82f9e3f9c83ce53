"""Contrastive pairs: two evaluated variants that differ in one idea, side by side.

A pair is a parent and its child: a model's edit of an earlier variant (its archive parent), or two kernels of
one family whose parameters differ in exactly one setting. The prompt shows each pair's speedups, the change of
each Nsight Compute metric both have, and the diff, and asks the model to say what made the faster one faster
before it proposes: the contrast the paper's loop learns from.
"""
from __future__ import annotations

import difflib
import math
from typing import Any

MAX_PAIRS = 3
DIFF_LINES = 40
METRICS = ("duration_us", "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "tensor_pipe_pct",
           "achieved_occupancy_pct", "l2_hit_rate_pct", "bank_conflict_pct", "spill_bytes")
MAX_METRICS = 6


def _ok(h: dict[str, Any]) -> bool:
    return h.get("status") == "ok" and h.get("speedup") is not None


def _one_param_change(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    pa, pb = a.get("params") or {}, b.get("params") or {}
    if not pa or not pb or a.get("family") != b.get("family") or set(pa) != set(pb):
        return None
    diff = [k for k in pa if pa[k] != pb[k]]
    return f"{diff[0]}: {pa[diff[0]]} -> {pb[diff[0]]}" if len(diff) == 1 else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def metric_deltas(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Metrics both profiles have, in the order most telling first: name, parent's, child's, change."""
    if not a or not b:
        return []
    out = []
    keys = [k for k in METRICS if k in a and k in b] + sorted(
        k for k in a if k in b and k not in METRICS and _num(a[k]) is not None and _num(b[k]) is not None)
    for k in keys:
        x, y = _num(a[k]), _num(b[k])
        if x is None or y is None:
            continue
        out.append({"name": k, "a": f"{x:.4g}", "b": f"{y:.4g}", "delta": f"{y - x:+.4g}"})
        if len(out) >= MAX_METRICS:
            break
    return out


def _diff(a: str, b: str, ida: int, idb: int, max_lines: int) -> str:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), f"#{ida}.cu", f"#{idb}.cu", lineterm="",
                                      n=1))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return "\n".join(lines)


def _bottleneck(h: dict[str, Any]) -> str:
    b = h.get("bottleneck") or (h.get("ncu") or {}).get("bottleneck")
    if isinstance(b, dict):
        b = b.get("label")
    return str(b) if b else ""


def find_pairs(history: list[dict[str, Any]], max_pairs: int = MAX_PAIRS) -> list[tuple[dict, dict, str]]:
    """(parent, child, idea) pairs of evaluated variants, the largest speedup changes first."""
    by_id = {h["id"]: h for h in history}
    cands: list[tuple[float, dict, dict, str]] = []
    seen = set()
    for h in history:
        p = by_id.get(h.get("parent")) if h.get("parent") is not None else None
        if p is not None and _ok(p) and _ok(h):
            cands.append((abs(math.log(h["speedup"] / p["speedup"])), p, h, h.get("summary") or "an edit"))
            seen.add((p["id"], h["id"]))
    oks = sorted((h for h in history if _ok(h) and h.get("params")), key=lambda h: h["id"])
    for i, a in enumerate(oks):
        for b in oks[i + 1:]:
            idea = _one_param_change(a, b)
            if idea and (a["id"], b["id"]) not in seen:
                cands.append((abs(math.log(b["speedup"] / a["speedup"])), a, b, idea))
    cands.sort(key=lambda t: -t[0])
    out, used = [], set()
    for _, a, b, idea in cands:
        if b["id"] in used:  # one pair per child: more pairs, more ideas
            continue
        used.add(b["id"])
        out.append((a, b, idea))
        if len(out) >= max_pairs:
            break
    return out


def pair_views(history: list[dict[str, Any]], max_pairs: int = MAX_PAIRS,
               diff_lines: int = DIFF_LINES) -> list[dict[str, Any]]:
    """What the step template shows of each pair."""
    views = []
    for a, b, idea in find_pairs(history, max_pairs):
        faster = b if b["speedup"] >= a["speedup"] else a
        views.append({
            "a": a["id"], "b": b["id"], "idea": idea, "a_speedup": f"{a['speedup']:.3f}x",
            "b_speedup": f"{b['speedup']:.3f}x", "faster": faster["id"],
            "change_pct": f"{100 * (b['speedup'] / a['speedup'] - 1):+.1f}%",
            "a_bottleneck": _bottleneck(a), "b_bottleneck": _bottleneck(b),
            "metrics": metric_deltas(a.get("ncu"), b.get("ncu")),
            "diff": _diff(a.get("source") or "", b.get("source") or "", a["id"], b["id"], diff_lines)
            if a.get("source") and b.get("source") else "",
        })
    return views
