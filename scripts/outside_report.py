"""The outside harness's figures from its raw timings, their comparison with the evaluator's, and the Markdown table.

Pure Python (no torch, no GPU), so a saved outside_harness.json can be summarised and compared again anywhere:
`python3 scripts/outside_harness.py --render OUT/outside_harness.json --out DIR`.
"""
from __future__ import annotations

import statistics
from typing import Any, Callable

REGIMES = ("back-to-back", "separated", "server")
# a baseline name (as the evaluator's records spell it) and the harness callables it takes the fastest of, by median
GROUPS: dict[str, Callable[[str], bool]] = {
    "best-nvidia": lambda nm: nm != "kernel",
    "torch": lambda nm: nm == "torch",
    "cublas-NN": lambda nm: nm == "cublas-NN",
    "cublas-TN": lambda nm: nm == "cublas-TN",
    "cublaslt-autotune-NN": lambda nm: nm.startswith("cublaslt-NN/"),
    "cublaslt-autotune-TN": lambda nm: nm.startswith("cublaslt-TN/"),
    "cublas-max": lambda nm: nm in ("cublas-NN", "cublas-TN"),
    "cublaslt-autotune-max": lambda nm: nm.startswith("cublaslt-"),
}
PER_BASELINE = ("torch", "cublas-NN", "cublas-TN", "cublaslt-autotune-NN", "cublaslt-autotune-TN")
COMPARED = ("best-nvidia",) + PER_BASELINE
LABEL = {"best-nvidia": "best NVIDIA", "torch": "torch.matmul", "cublas-NN": "cuBLAS NN", "cublas-TN": "cuBLAS TN",
         "cublaslt-autotune-NN": "cuBLASLt autotuned NN", "cublaslt-autotune-TN": "cuBLASLt autotuned TN",
         "cublas-max": "cuBLAS max", "cublaslt-autotune-max": "cuBLASLt autotuned max"}
# the evaluator modes that stand for each regime, in order of preference; offline is separated, power-steady on
# power-limited shapes (docs/evaluator.md), the nearest figure an export without per-regime finals carries
EVALUATOR_MODES = {"back-to-back": ("back-to-back",), "separated": ("separated", "offline"), "server": ("server",)}
GRAPH_KEYS = (("graph_pred", "graph, with a predecessor"),
              ("graph_pred_net", "graph, with a predecessor, its time taken out"),
              ("graph_loop", "graph, back to back"), ("graph_one", "graph, one call"),
              ("sustained", "sustained (≥ 2^36 FLOP)"))


def quartiles(xs: list[float]) -> list[float] | None:
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    if len(xs) == 1:
        return [xs[0]] * 3
    q = statistics.quantiles(xs, n=4)
    return [q[0], statistics.median(xs), q[2]]


def summarize(regime: dict[str, Any]) -> dict[str, Any]:
    """Per baseline group: the callable that was fastest by median, its per-call µs and the ratio
    t(baseline) / t(kernel) taken round by round (rounds where either side failed are left out)."""
    us = regime["us"]
    kern = us.get("kernel") or []
    med = {nm: statistics.median(v) for nm, v in ((nm, [t for t in v if t is not None]) for nm, v in us.items()) if v}
    # a median of zero or less (a separated call no longer than the separator's noise) is no time to rank by
    med = {nm: t for nm, t in med.items() if t > 0}
    out: dict[str, Any] = {"kernel_us": quartiles(kern)}
    if "kernel" not in med:
        return out
    for group, member in GROUPS.items():
        cands = [nm for nm in med if nm != "kernel" and member(nm)]
        if not cands:
            continue
        best = min(cands, key=med.__getitem__)
        ratios = [b / k for b, k in zip(us[best], kern) if b is not None and k is not None and b > 0 and k > 0]
        if ratios:
            out[group] = {"callable": best, "us": quartiles(us[best]), "ratio": quartiles(ratios)}
    return out


def evaluator_figures(entry: dict[str, Any], regime: str) -> tuple[str | None, dict[str, float]]:
    """The evaluator mode compared with `regime` and its speedups, from the export's manifest entry."""
    modes = dict(entry.get("speedups_by_mode") or {})
    if not modes and entry.get("speedups"):  # an export without per-mode finals: its one figure, in its mode
        modes[entry.get("mode") or "offline"] = entry["speedups"]
    for mode in EVALUATOR_MODES[regime]:
        if modes.get(mode):
            return mode, modes[mode]
    return None, {}


def comparisons(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (regime, baseline) that both the harness and the export have a figure for."""
    out = []
    for regime in REGIMES:
        reg = (row.get("harness") or {}).get("regimes", {}).get(regime)
        if not reg:
            continue
        mode, ev = evaluator_figures(row.get("evaluator") or {}, regime)
        summ = summarize(reg)
        for name in COMPARED:
            here = (summ.get(name) or {}).get("ratio")
            if here and ev.get(name):
                out.append({"shape": row["shape"], "regime": regime, "evaluator_mode": mode, "baseline": name,
                            "here": here[1], "evaluator": ev[name], "rel": here[1] / ev[name] - 1})
    return out


def disagreements(rows: list[dict[str, Any]], tolerance: float) -> list[dict[str, Any]]:
    return [c for r in rows for c in comparisons(r) if abs(c["rel"]) > tolerance]


def missing_modes(rows: list[dict[str, Any]]) -> list[str]:
    """What the export lacks for a like-for-like comparison, one line per shape and regime."""
    lines = []
    for r in rows:
        if not (r.get("harness") or {}).get("regimes"):
            continue
        for regime in REGIMES:
            mode, _ = evaluator_figures(r.get("evaluator") or {}, regime)
            if mode is None:
                lines.append(f"{_shape(r)}: the export carries no {regime} figures; not compared")
            elif mode != regime:
                lines.append(f"{_shape(r)}: the export carries no {regime} figures; compared with its {mode} ones")
    return lines


# ---------------------------------------------------------------------------------------------------- Markdown

def _shape(r: dict[str, Any]) -> str:
    return "×".join(map(str, r["shape"]))


def _q(q: list[float] | None, spec: str = ".3f") -> str:
    return "–" if not q else f"{q[1]:{spec}} ({q[0]:{spec}}–{q[2]:{spec}})"


def _f(x: float | None, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def _callable(nm: str) -> str:
    return {"torch": "torch", "cublas-NN": "cuBLAS NN", "cublas-TN": "cuBLAS TN"}.get(
        nm, nm.replace("cublaslt-", "cuBLASLt ").replace("/", " #"))


def _delta(here: float | None, ev: float | None, tolerance: float) -> str:
    if not here or not ev:
        return "–"
    rel = here / ev - 1
    return f"**{rel:+.1%}**" if abs(rel) > tolerance else f"{rel:+.1%}"


def _geo(xs: list[float]) -> str:
    return f"{statistics.geometric_mean(xs):.3f} over {len(xs)}, {sum(x > 1 for x in xs)} above 1" if xs else "–"


def _header(doc: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    gpus = sorted({r.get("gpu") for r in rows if r.get("gpu")})
    same = not gpus or not doc.get("device") or gpus == [doc.get("device")]
    s = doc.get("settings", {})
    return [
        "# Exported kernels against the outside harness's own NVIDIA baselines", "",
        f"- device: {doc.get('device')}; L2 {_f(doc.get('l2_mib'), '.0f')} MiB; date: {doc.get('date')}; "
        f"commit: {doc.get('commit')}; torch {doc.get('torch')}; cuBLASLt {doc.get('cublaslt_version')}; "
        f"kernels built for {doc.get('arch')} with the contract's command only",
        f"- exports: {', '.join(f'`{e}`' for e in doc.get('exports', []))}; built "
        f"{sum(r['built'] for r in rows)} of {len(rows)}; shapes: "
        + ", ".join(_shape(r) for r in rows),
        f"- evaluator figures (from the manifests) measured on: {', '.join(gpus) or 'unknown'}"
        + ("" if same else " — another GPU than this one, so differences are expected"),
        "- regimes: back to back (calls queued one after another), separated (an ordinary kernel before each "
        "call, its own time measured alone and taken out) and server (one call after an idle gap, the weights "
        "written before an L2 scrub, A after it); every batch held until queued, call i on operand set i "
        "(new random contents before every batch), rounds alternating the order (scripts/outside_regimes.py)",
        f"- baselines of the harness's own (scripts/outside_native.cu): cublasGemmEx NN and TN, cuBLASLt autotuned "
        f"per layout (every algorithm the heuristic offers, up to 1024, checked, screened, the 3 fastest timed in "
        f"the regimes), torch.matmul; best NVIDIA = the fastest of them by median; {s.get('rounds')} rounds, "
        f"batches of ~{s.get('target_ms')} ms (at most {s.get('max_calls')} calls, operand pool "
        f"{s.get('pool_gib')} GiB)",
        "- ratios: t(baseline) / t(kernel), medians over rounds (interquartile range); Δ = here / evaluator − 1, "
        f"bold beyond ±{doc.get('tolerance', 0.03):.0%}", "",
    ]


def render(doc: dict[str, Any]) -> str:
    rows, tol = doc["rows"], doc.get("tolerance", 0.03)
    lines = _header(doc, rows)
    timed = [r for r in rows if (r.get("harness") or {}).get("regimes")]
    summ = {id(r): {reg: summarize(r["harness"]["regimes"][reg]) if reg in r["harness"]["regimes"] else {}
                    for reg in REGIMES} for r in timed}

    def best_ratios(reg: str) -> list[float]:
        return [s["best-nvidia"]["ratio"][1] for s in (summ[id(r)][reg] for r in timed) if s.get("best-nvidia")]

    lines += ["geomean best NVIDIA / kernel: " + "; ".join(f"{reg} {_geo(best_ratios(reg))}" for reg in REGIMES), ""]
    lines += ["## Best NVIDIA / kernel", "",
              "| M | N | K | acc | family | operand sets: calls × MiB (L2-resident?) | " + " | ".join(
                  f"{reg}: here | fastest | evaluator | Δ" for reg in REGIMES) + " | max abs err kernel / cuBLAS |",
              "|" + "---|" * (7 + 4 * len(REGIMES))]
    for r in rows:
        h = r.get("harness") or {}
        cells = [*map(str, r["shape"]), r.get("acc", "fp32"), str(r.get("family"))]
        if "calls" in h:
            rot = h["rotation_mib"]
            cells.append(f"{h['calls']} × {h['set_mib']:.3g} = {rot:.3g}"
                         + ("" if doc.get("l2_mib") is None else (" (yes)" if rot < doc["l2_mib"] else " (no)")))
        else:
            cells.append("–")
        for reg in REGIMES:
            b = (summ.get(id(r), {}).get(reg) or {}).get("best-nvidia")
            mode, ev = evaluator_figures(r.get("evaluator") or {}, reg)
            evs = _f(ev.get("best-nvidia")) + ("" if mode in (None, reg) else f" ({mode})")
            cells += [_q(b and b["ratio"]), _callable(b["callable"]) if b else "–", evs,
                      _delta(b and b["ratio"][1], ev.get("best-nvidia"), tol)]
        err = h.get("max_abs_err", {})
        cells.append(f"{_f(err.get('kernel'), '.3g')} / {_f(err.get('cublas-NN'), '.3g')}" if err else
                     ("not built" if not r["built"] else "–"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Per baseline: here [evaluator]", "",
              "| M | N | K | regime | " + " | ".join(LABEL[b] for b in PER_BASELINE) + " | kernel µs/call |",
              "|" + "---|" * (5 + len(PER_BASELINE))]
    for r in timed:
        for reg in REGIMES:
            s = summ[id(r)][reg]
            _, ev = evaluator_figures(r.get("evaluator") or {}, reg)
            cells = [*map(str, r["shape"]), reg]
            for b in PER_BASELINE:
                here = (s.get(b) or {}).get("ratio")
                cells.append(f"{_q(here)} [{_f(ev.get(b))}]")
            cells.append(_q(s.get("kernel_us"), ".2f"))
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## cuBLASLt autotuning", "",
              "| M | N | K | layout | offered | correct | leaders (screen µs/call) |", "|---|---|---|---|---|---|---|"]
    for r in timed:
        for lay, a in r["harness"].get("cublaslt", {}).items():
            leaders = "; ".join(f"#{ld['name'].split('/')[1]} {ld['algo']} ({ld['screen_us']:.2f})"
                                for ld in a["leaders"])
            lines.append(f"| {' | '.join(map(str, r['shape']))} | {lay} | {a['offered']} | {a['correct']} | "
                         f"{leaders or '–'} |")
    lines += _findings(rows) + _graphs(rows)
    dis = disagreements(rows, tol)
    lines += ["", f"## Where this harness and the evaluator disagree by more than {tol:.0%}", ""]
    lines += [f"- {m}" for m in missing_modes(rows)]
    if dis:
        by_shape: dict[str, list[str]] = {}
        for d in dis:
            via = "" if d["evaluator_mode"] == d["regime"] else f", evaluator {d['evaluator_mode']}"
            by_shape.setdefault("×".join(map(str, d["shape"])), []).append(
                f"{d['regime']} {LABEL[d['baseline']]} {d['here']:.3f} here vs {d['evaluator']:.3f}{via} "
                f"({d['rel']:+.1%})")
        lines += [f"- {shape}: " + "; ".join(items) for shape, items in by_shape.items()]
    elif timed:
        lines.append(f"- none: every compared figure of {len(timed)} timed shape(s) agrees within {tol:.0%}")
    else:
        lines.append("- nothing was timed, so nothing was compared")
    return "\n".join(lines) + "\n"


def _findings(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        h, name = r.get("harness") or {}, _shape(r)
        if not r["built"]:
            out.append(f"- {r['file']}: the contract's build failed:\n\n```\n{r.get('build_log', '')}\n```")
        kerr = (h.get("max_abs_err") or {}).get("kernel")
        if kerr is not None and not kerr <= h["tolerance"]:
            out.append(f"- {name}: the kernel's max abs err on the full product, {kerr:.3g}, is over the tolerance "
                       f"{h['tolerance']:.3g}")
        if h.get("unheld"):
            out.append(f"- {name}: timed without the hold (a batch outlasted it: a blocking call inside?): "
                       + ", ".join(h["unheld"]))
        for nm, e in (h.get("errors") or {}).items():
            out.append(f"- {name}: {nm} failed: {e}")
        for reg, d in (h.get("regimes") or {}).items():
            for nm, v in d["us"].items():
                v = [t for t in v if t is not None]
                if v and statistics.median(v) <= 0:
                    net = " (the separator's own time taken out)" if reg == "separated" else ""
                    out.append(f"- {name}, {reg}: {nm} measured {statistics.median(v):.3g} µs a call{net}, left "
                               "out of the comparison")
            for nm, n in d.get("sampled_failures", {}).items():
                out.append(f"- {name}, {reg}: {nm} was outside the tolerance ({h['tolerance']:.3g}) on sampled "
                           f"outputs in {n} timed batch(es), worst {d['sampled_max_abs_err'][nm]:.3g}")
        if r.get("error"):
            out.append(f"- {name}: {r['error']}")
    return ["", "## Findings", ""] + out if out else []


def _graphs(rows: list[dict[str, Any]]) -> list[str]:
    rows = [r for r in rows if r.get("graphs")]
    if not rows:
        return []
    out = ["", "## Graph regimes, against torch.matmul only (--graphs; scripts/outside_graphs.py)", "",
           "| M | N | K | " + " | ".join(label for _, label in GRAPH_KEYS) + " |", "|" + "---|" * (3 + len(GRAPH_KEYS))]
    for r in rows:
        g = r["graphs"]
        out.append(f"| {' | '.join(map(str, r['shape']))} | " + " | ".join(_q(g.get(k)) for k, _ in GRAPH_KEYS)
                   + " |")
        if g.get("graph_error"):
            out.append(f"\n- {_shape(r)}: not captured in a graph: {g['graph_error']}\n")
    return out
