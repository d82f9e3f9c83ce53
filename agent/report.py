"""`cudal2 report RUN`: one self-contained HTML page for a campaign.

The page carries the paper's summary tables (mean speedup of the best kernel per shape against torch.matmul,
cuBLAS, cuBLASLt-heuristic and cuBLASLt-AutoTuning, each as NN, TN and the faster of the two; offline and server
mode; win rates), speedup against log2(M·N·K) as an inline SVG, and a per-shape table linking each kernel file.
Nothing is fetched from elsewhere, so the file can be mailed or archived on its own.
"""
from __future__ import annotations

import contextlib
import html
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from agent.campaign.db import CampaignDB, run_record
from agent.resources import data_dir
from evaluator.contract import MODES  # the report's mode sections, in this order
from evaluator.record import BEST_NVIDIA, EvalResult, baseline_family

# (label, EvalResult.baselines key or '-max' name): best NVIDIA (the fastest of them all in the same rounds, the
# headline), then the paper's four families, each NN, TN and max.
BASELINE_FAMILIES = [
    ("best NVIDIA", [BEST_NVIDIA]),
    ("torch.matmul", ["torch"]),
    ("cuBLAS", ["cublas-NN", "cublas-TN", "cublas-max"]),
    ("cuBLASLt-heuristic", ["cublaslt-heuristic-NN", "cublaslt-heuristic-TN", "cublaslt-heuristic-max"]),
    ("cuBLASLt-AutoTuning", ["cublaslt-autotune-NN", "cublaslt-autotune-TN", "cublaslt-autotune-max"]),
]
PLOT_SERIES = [("best NVIDIA", BEST_NVIDIA, "#111827"), ("torch.matmul", "torch", "#6b7280"),
               ("cuBLAS max", "cublas-max", "#2563eb"),
               ("cuBLASLt-heuristic max", "cublaslt-heuristic-max", "#d97706"),
               ("cuBLASLt-AutoTuning max", "cublaslt-autotune-max", "#dc2626")]
SELECT_BY = "cublaslt-autotune-max"  # the strongest baseline decides which variant is a shape's best

_TEMPLATE_DIR = data_dir("prompts")
_TEMPLATE = "report.html.j2"


@dataclass
class ShapeRow:
    """The best correct variant of one shape in one mode (result None: nothing correct was found)."""
    shape: tuple[int, int, int]
    acc: str
    gpu: str
    mode: str
    result: EvalResult | None
    tried: int = 0
    correct: int = 0
    kernel_path: str | None = None  # absolute path of the winning .cu
    variant_id: int | None = None
    proposer: str = ""
    extra: dict = field(default_factory=dict)
    final: bool = True  # False: no final measurement yet, the figure is the search's own (it chose the kernel)

    @property
    def log2_mnk(self) -> float:
        m, n, k = self.shape
        return math.log2(m) + math.log2(n) + math.log2(k)

    def speedup(self, name: str) -> float | None:
        return self.result.speedup(name) if self.result is not None else None


# ---------------------------------------------------------------- summary statistics

def untimed(rows: list[ShapeRow], baseline: str) -> list[ShapeRow]:
    """The rows whose correct kernel was timed without this baseline beside it: power-steady timing of a big shape
    times only cuBLAS and cuBLASLt-AutoTuning (evaluator.timing), so such a row says nothing about torch."""
    return [r for r in rows if r.result is not None and r.speedup(baseline) is None]


def geomean(values) -> float | None:
    """The geometric mean of positive values; None for none (every summary of speedups here, tables and scripts)."""
    xs = list(values)
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else None


def short_gpu_id(uuid: str) -> str:
    """A physical GPU's name in tables: the first 8 hex digits of its UUID ("GPU-5775c9d1-..." -> "5775c9d1")."""
    return str(uuid).removeprefix("GPU-")[:8]


def summarise(rows: list[ShapeRow], baseline: str) -> dict:
    """Mean/median speedup over shapes that have a correct kernel, the win rate over all shapes, and the mean
    speedup of max(CUDA-L2, baseline), i.e. what a dispatcher that falls back to the baseline achieves. The
    `untimed` rows are left out of all of them, not counted as losses."""
    left_out = {id(r) for r in untimed(rows, baseline)}
    rows = [r for r in rows if id(r) not in left_out]
    vals = [s for s in (r.speedup(baseline) for r in rows) if s is not None]
    n_all = len(rows)
    if not vals:
        return {"n": 0, "n_all": n_all, "mean": None, "median": None, "geomean": None, "win_rate": None,
                "dispatch_mean": None}
    wins = sum(1 for s in vals if s > 1.0)
    # A shape without a correct kernel runs the baseline under dispatch: speedup 1.
    dispatch = [max(s, 1.0) for s in vals] + [1.0] * (n_all - len(vals))
    return {
        "n": len(vals), "n_all": n_all,
        "mean": statistics.fmean(vals),
        "median": statistics.median(vals),
        "geomean": geomean(max(s, 1e-9) for s in vals),
        "win_rate": wins / n_all if n_all else None,
        "dispatch_mean": statistics.fmean(dispatch),
    }


def summary_tables(rows: list[ShapeRow]) -> list[dict]:
    """One table per (gpu, acc): rows are baselines, column groups are modes."""
    groups: dict[tuple[str, str], list[ShapeRow]] = {}
    for r in rows:
        groups.setdefault((r.gpu, r.acc), []).append(r)
    tables = []
    for (gpu, acc), grp in sorted(groups.items()):
        modes = [m for m in MODES if any(r.mode == m for r in grp)]
        body = []
        for family, names in BASELINE_FAMILIES:
            for name in names:
                body.append({"family": family, "name": name,
                             "variant": "max" if name.endswith("-max") else (name.rsplit("-", 1)[-1]
                                                                              if name not in ("torch", BEST_NVIDIA)
                                                                              else ""),
                             "cells": [summarise([r for r in grp if r.mode == m], name) for m in modes]})
        tables.append({"gpu": gpu, "acc": acc, "modes": modes, "rows": body,
                       "n_shapes": {m: sum(1 for r in grp if r.mode == m) for m in modes}})
    return tables


# ---------------------------------------------------------------- the plot

def speedup_plot_svg(rows: list[ShapeRow], width: int = 760, height: int = 380) -> str:
    """Scatter of speedup against log2(M·N·K) for best NVIDIA and the four 'max' baselines; the dashed line is
    parity."""
    pts = [(r.log2_mnk, s, label, color, r) for r in rows
           for label, name, color in PLOT_SERIES if (s := r.speedup(name)) is not None]
    ml, mr, mt, mb = 60, 190, 24, 48
    pw, ph = width - ml - mr, height - mt - mb
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="speedup against log2(M*N*K)" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    if not pts:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#555">'
                   'no correct kernels to plot</text></svg>')
        return "\n".join(out)
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts] + [1.0]
    x0, x1 = math.floor(min(xs)) - 1, math.ceil(max(xs)) + 1
    y0, y1 = min(ys), max(ys)
    pad = max(0.05, (y1 - y0) * 0.1)
    y0, y1 = max(0.0, y0 - pad), y1 + pad

    def sx(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return mt + (1 - (y - y0) / (y1 - y0)) * ph

    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#999"/>')
    xstep = max(1, round((x1 - x0) / 10))
    for xv in range(int(x0), int(x1) + 1, xstep):
        X = sx(xv)
        out.append(f'<line x1="{X:.1f}" y1="{mt}" x2="{X:.1f}" y2="{mt + ph}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{X:.1f}" y="{mt + ph + 16}" text-anchor="middle">{xv}</text>')
    for yv in _nice_ticks(y0, y1):
        Y = sy(yv)
        out.append(f'<line x1="{ml}" y1="{Y:.1f}" x2="{ml + pw}" y2="{Y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{ml - 6}" y="{Y + 4:.1f}" text-anchor="end">{yv:g}</text>')
    Y1 = sy(1.0)
    out.append(f'<line x1="{ml}" y1="{Y1:.1f}" x2="{ml + pw}" y2="{Y1:.1f}" stroke="#111" '
               'stroke-dasharray="5,4"/>')
    out.append(f'<text x="{ml + pw / 2}" y="{height - 8}" text-anchor="middle">log2(M·N·K)</text>')
    out.append(f'<text transform="translate(16,{mt + ph / 2}) rotate(-90)" text-anchor="middle">'
               'speedup (baseline time / kernel time)</text>')
    for x, y, label, color, r in pts:
        tip = html.escape(f"{'x'.join(map(str, r.shape))} {r.mode}: {y:.3f}x vs {label}")
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4.5" fill="{color}" fill-opacity="0.8">'
                   f'<title>{tip}</title></circle>')
    for i, (label, _, color) in enumerate(PLOT_SERIES):
        ly = mt + 10 + i * 20
        out.append(f'<circle cx="{ml + pw + 16}" cy="{ly}" r="5" fill="{color}"/>')
        out.append(f'<text x="{ml + pw + 26}" y="{ly + 4}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    span = hi - lo
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=mag * 10)
    start = math.ceil(lo / step) * step
    ticks, v = [], start
    while v <= hi + 1e-12:
        ticks.append(round(v, 10))
        v += step
    return ticks


# ---------------------------------------------------------------- rendering

def render(rows: list[ShapeRow], *, run: str, out_path: str | Path, meta: dict | None = None) -> str:
    """The HTML text; kernel links are relative to out_path so the run folder can be moved as a whole."""
    out_dir = Path(out_path).resolve().parent
    rows = sorted(rows, key=lambda r: (r.gpu, r.acc, r.mode, r.log2_mnk, r.shape))
    per_shape = []
    for r in rows:
        href = None
        if r.kernel_path:
            href = os.path.relpath(Path(r.kernel_path).resolve(), out_dir).replace(os.sep, "/")
        checks = r.result.checks if r.result is not None else []
        per_shape.append({
            "row": r, "shape": "x".join(map(str, r.shape)), "href": href,
            "speedups": [r.speedup(name) for _, name, _ in PLOT_SERIES],
            "nn_tn": [r.speedup(n) for n in ("cublaslt-autotune-NN", "cublaslt-autotune-TN")],
            "kernel_us": r.result.candidate.median_us if r.result is not None and r.result.candidate else None,
            "checks_passed": sum(1 for c in checks if c.passed), "checks_total": len(checks),
            "max_abs_diff": r.result.max_abs_diff() if r.result is not None else None,
            "moved": r.extra["final_spread"] if baselines_moved(r) else None,
        })
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATE_DIR)),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
    env.filters["x"] = lambda v: "–" if v is None else f"{v:.3f}×"
    env.filters["pct"] = lambda v: "–" if v is None else f"{100 * v:.0f}%"
    env.filters["us"] = lambda v: "–" if v is None else f"{v:.2f}"
    env.filters["cls"] = lambda v: "" if v is None else ("win" if v > 1.0 else "loss")
    return env.get_template(_TEMPLATE).render(
        run=run, meta=meta or {}, generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        tables=summary_tables(rows), plot_svg=speedup_plot_svg(rows), per_shape=per_shape,
        series=[label for label, _, _ in PLOT_SERIES], select_by=SELECT_BY)


class ReportError(ValueError):
    pass


def collect_rows(run_dir: str | Path) -> list[ShapeRow]:
    """Per (gpu, acc, shape) and mode: the best kernel's measurement. The campaign re-measures each winner in
    every final mode (campaign.sqlite); where it has not (yet), the search's own measurement is used."""
    from agent.campaign.archive import Archive

    run_dir = Path(run_dir)
    archive = Archive(run_dir / "archive.sqlite")
    finals: dict[tuple, list[dict]] = {}
    winners: dict[tuple, dict[str, int]] = {}
    if (run_dir / "campaign.sqlite").is_file():
        cdb = CampaignDB(run_dir / "campaign.sqlite")
        for f in cdb.finals():
            finals.setdefault((f["gpu"], f["acc"], tuple(f["shape"])), []).append(f)
        winners = cdb.mode_winners()
    search_mode = run_record(run_dir).get("mode", "offline")
    rows = []
    for key in archive.shapes():
        hist = archive.history(key.gpu, key.acc, key.shape)
        tried, correct = len(hist), sum(1 for v in hist if v.status == "ok")
        best = archive.best(key.gpu, key.acc, key.shape, SELECT_BY)
        common = dict(shape=tuple(key.shape), acc=key.acc, gpu=key.gpu, tried=tried, correct=correct)
        if best is None:
            rows.append(ShapeRow(mode=search_mode, result=None, **common))
            continue
        shape_finals = finals.get((key.gpu, key.acc, tuple(key.shape)), [])
        # a final mode that played its own tournament measured its winner, which may be another leader
        by_mode = {m: archive.get(i) or best for m, i in winners.get((key.gpu, key.acc, tuple(key.shape)), {}).items()}
        # in a run from before the finals waited for every mode's tournament (2026-11-28), a cold twin archived after
        # the search mode's finals may outrank the kernel they measured: the finals name it
        of_best = {f["mode"] for f in shape_finals if f["source_hash"] == best.source_hash}
        for f in shape_finals:
            if f["mode"] not in by_mode and f["mode"] not in of_best:
                by_mode[f["mode"]] = archive.get(f["variant_id"]) or best
        passed: dict[str, list[EvalResult]] = {}
        failed: dict[str, list[str]] = {}  # a final evaluation that failed a check is shown, never dropped quietly
        for f in shape_finals:
            if f["source_hash"] == by_mode.get(f["mode"], best).source_hash:
                if f["result"].ok:
                    passed.setdefault(f["mode"], []).append(f["result"])
                else:
                    failed.setdefault(f["mode"], []).append(f["result"].status)
        own_mode = best.result.mode or search_mode
        for mode in dict.fromkeys([*passed, *failed]) or [own_mode]:
            if mode in passed:
                res, spread = median_measurement(passed[mode])
            else:  # no passing final here (none yet, or each one failed): the search's own figure, in its own mode
                res, spread = (best.result if mode == own_mode else None), []
            win = by_mode.get(mode, best)
            rows.append(ShapeRow(mode=mode, result=res, kernel_path=win.kernel_path, variant_id=win.id,
                                 proposer=win.proposer, final=mode in passed,
                                 extra={"final_speedups": spread, "final_failed": failed.get(mode, []),
                                        "final_spread": time_spread(passed.get(mode, [])),
                                        "mode_winner": win.id != best.id}, **common))
    return rows


def time_spread(results: list[EvalResult]) -> tuple[float, float] | None:
    """Over one kernel's evaluations in one mode: how far the fastest baseline's median time and the kernel's moved
    (max / min of each), or None below two evaluations."""
    pairs = [(min(r.baselines[n].median_us for n in baseline_family(BEST_NVIDIA, r.baselines)), r.candidate.median_us)
             for r in results if r.candidate and r.baselines]
    if len(pairs) < 2:
        return None
    return tuple(max(x) / min(x) for x in zip(*pairs))


def baselines_moved(row: ShapeRow, moved: float = 1.05, times: float = 3.0) -> bool:
    """The NVIDIA baselines moved between the final evaluations, and much further than the kernel: its figure then
    depends on which evaluation is the median (server finals of small shapes, docs/evaluator.md)."""
    spread = row.extra.get("final_spread")
    return bool(spread) and spread[0] >= moved and spread[0] - 1 >= times * (spread[1] - 1)


def median_measurement(results: list[EvalResult]) -> tuple[EvalResult, list[float]]:
    """The evaluation whose speedup against SELECT_BY is the median (of an even count, the lower middle one: a real
    measurement, never a blend), and every evaluation's speedup in ascending order."""
    ranked = sorted(results, key=lambda r: r.speedup(SELECT_BY) or 0.0)
    return ranked[(len(ranked) - 1) // 2], [s for r in ranked if (s := r.speedup(SELECT_BY)) is not None]


def report_run(run: str, *, runs_dir: str | Path = "runs", out: str | Path | None = None) -> Path:
    run_dir = next((d for d in (Path(runs_dir) / run, Path(run)) if (d / "archive.sqlite").is_file()), None)
    if run_dir is None:
        raise ReportError(f"no archive for run {run!r}: looked for {Path(runs_dir) / run / 'archive.sqlite'} and "
                          f"{Path(run) / 'archive.sqlite'}")
    rows = collect_rows(run_dir)
    meta: dict = {"run folder": str(run_dir)}
    if c := run_record(run_dir):
        meta.update({"search mode": c.get("mode"), "model": (c.get("model") or {}).get("model_name"),
                     "budget": c.get("budget_candidates") or f"{c.get('budget_minutes')} min"})
    if out is None:
        out_path = run_dir / "report.html"
    elif Path(out).is_dir() or str(out).endswith(("/", os.sep)):  # a folder: the report goes inside it
        out_path = Path(out) / "report.html"
    else:
        out_path = Path(out)
    return write_report(rows, run=run_dir.name, out_path=out_path, meta=meta)


def write_report(rows: list[ShapeRow], *, run: str, out_path: str | Path, meta: dict | None = None) -> Path:
    out = Path(out_path)
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(render(rows, run=run, out_path=out, meta=meta))
        tmp.replace(out)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise ReportError(f"cannot write the report to {out}: {e.strerror or e}") from None
    return out
