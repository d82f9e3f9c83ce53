"""Render the system and step prompts (prompts/*.j2) from a ProposalContext, under a token budget.

The step prompt is contrastive: a table of the best and the most recent variants with their speedups against every
baseline, failure reasons, resource use and profiles; the best kernel's code; a diff from the runner-up to the best;
retrieved passages with their sources. When the rendered prompt is over budget, parts are dropped lowest value first
(see `_REDUCTIONS`), and the prompt says what was left out.
"""
from __future__ import annotations

import difflib
import math
from typing import Any

import jinja2

from agent.proposers.contrast import MAX_PAIRS, pair_views
from agent.resources import data_dir
from evaluator.contract import SIGNATURE

PROMPTS_DIR = data_dir("prompts")
GOAL_BASELINE = "cublaslt-autotune-max"

TOP_K = 5
RECENT = 5
MAX_PASSAGES = 6
DIFF_MAX_LINES = 120
REASON_CHARS = 140
CHARS_PER_TOKEN = 3.5  # code-heavy text; errs towards overestimating tokens

_GPU_LABELS = {
    "name": "name", "sm_count": "SMs", "sms": "SMs", "compute_capability": "compute capability",
    "smem_per_block_optin_kb": "shared memory per block (opt-in), KiB", "smem_per_sm_kb": "shared memory per SM, KiB",
    "l2_mb": "L2 cache, MiB", "l2_bytes": "L2 cache, bytes", "sm_clock_mhz": "SM clock, MHz",
    "max_sm_clock_mhz": "max SM clock, MHz", "mem_clock_mhz": "memory clock, MHz",
    "mem_bandwidth_gbs": "memory bandwidth, GB/s", "regs_per_sm": "registers per SM",
    "max_threads_per_sm": "max threads per SM",
}

# Short names of evaluator.profile's record, most telling first.
_NCU_PREFERRED = ("duration_us", "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct",
                  "tensor_pipe_pct", "achieved_occupancy_pct", "l2_hit_rate_pct", "bank_conflict_pct",
                  "spill_bytes", "top_stalls")
NCU_MAX_METRICS = 8


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              autoescape=False)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def render_system(acc: str = "fp32") -> str:
    return _env().get_template("system.j2").render(signature=SIGNATURE, acc=acc)


# ---- formatting helpers ----

def fmt_speedup(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}x"


def _fmt_num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _cell(s: Any, limit: int = REASON_CHARS) -> str:
    s = " ".join(str(s).split()).replace("|", "\\|")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def fmt_params(params: dict[str, Any] | None) -> str:
    if not params:
        return ""
    return " ".join(f"{k}={_fmt_num(v)}" for k, v in params.items())


def describe(item: dict[str, Any], by_id: dict[int, dict[str, Any]]) -> str:
    """Parameters where the variant has them, else the model's summary line, else its size of change against its
    parent."""
    fam = item.get("family") or ""
    params = fmt_params(item.get("params"))
    if fam or params:
        return _cell(f"{fam} {params}".strip(), 160)
    parent = by_id.get(item.get("parent")) if item.get("parent") is not None else None
    summary = item.get("summary") or ""
    if summary:
        return _cell(f"edit of #{item['parent']}: {summary}" if item.get("parent") is not None else summary, 160)
    if parent and parent.get("source") and item.get("source"):
        d = list(difflib.unified_diff(parent["source"].splitlines(), item["source"].splitlines(), lineterm="", n=0))
        plus = sum(1 for ln in d if ln.startswith("+") and not ln.startswith("+++"))
        minus = sum(1 for ln in d if ln.startswith("-") and not ln.startswith("---"))
        return f"edit of #{parent['id']} (+{plus}/-{minus} lines)"
    if item.get("parent") is not None:
        return f"child of #{item['parent']}"
    return f"new ({item['proposer']})" if item.get("proposer") else "new"


def ncu_summary(ncu: dict[str, Any] | None) -> tuple[str | None, str]:
    if not ncu:
        return None, ""
    bottleneck = ncu.get("bottleneck")
    metrics = {k: v for k, v in ncu.items() if k != "bottleneck" and isinstance(v, (int, float, str))}
    keys = [k for k in _NCU_PREFERRED if k in metrics] + sorted(k for k in metrics if k not in _NCU_PREFERRED)
    shown = ", ".join(f"{k}={_fmt_num(metrics[k])}" for k in keys[:NCU_MAX_METRICS])
    if isinstance(bottleneck, dict):  # evaluator.bottleneck's {"label", "why", "evidence"}
        bottleneck = f"{bottleneck.get('label')}: {bottleneck.get('why', '')}".rstrip(": ")
    return (str(bottleneck) if bottleneck else None), shown


def gpu_fact_lines(facts: dict[str, Any]) -> list[tuple[str, str]]:
    return [(_GPU_LABELS.get(k, k.replace("_", " ")), _fmt_num(v)) for k, v in facts.items() if v is not None]


def baseline_columns(history: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for h in history:
        for b in (h.get("speedups") or {}):
            if b not in names:
                names.append(b)
    # The goal baseline's family first, then the rest in a stable order.
    return sorted(names, key=lambda b: (not GOAL_BASELINE.startswith(b), b))


def select_rows(history: list[dict[str, Any]], top_k: int, recent: int) -> list[tuple[dict[str, Any], str]]:
    ok = [h for h in history if h.get("status") == "ok" and h.get("speedup") is not None]
    top = sorted(ok, key=lambda h: -h["speedup"])[:top_k]
    top_ids = {h["id"] for h in top}
    rec = [h for h in sorted(history, key=lambda h: (h.get("step") or 0, h["id"]), reverse=True)
           if h["id"] not in top_ids][:recent]
    return [(h, "top") for h in top] + [(h, "recent") for h in rec]


def unified_diff(a: str, b: str, max_lines: int = DIFF_MAX_LINES) -> str:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "runner-up.cu", "best.cu", lineterm="", n=2))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return "\n".join(lines)


def passage_where(p: dict[str, Any]) -> str:
    where = str(p.get("source") or "unknown source")
    if p.get("line"):
        where += f":{p['line']}"
    if p.get("symbol"):
        where += f" ({p['symbol']})"
    return where


# ---- the step prompt ----

# What each evaluator timing mode rewards, told to the model (the built-in policy sets its launch knobs by it).
TIMING = {
    "offline": "calls back to back in one stream, an ordinary kernel before each; launch overlap such as "
               "programmatic dependent launch (PDL) counts",
    "server": "single calls after an idle gap, so there is nothing to overlap the launch with; the weights (B) are "
              "cold in DRAM and the L2 is full of dirty lines (A was just written), so an L2 evict_first hint on an "
              "operand the grid reads once saves their write-back",
    "graph": "calls replayed from a CUDA graph, where launch gaps are short already; PDL measured up to 8% slower "
             "there, so launch without it",
}


def _view(ctx, top_k: int, recent: int, n_passages: int, neighbours: bool, diff: bool, ncu_all: bool,
          code_lines: int | None, pairs: int, cut: list[str]) -> dict[str, Any]:
    m, n, k = ctx.shape
    history = ctx.history
    by_id = {h["id"]: h for h in history}
    baselines = baseline_columns(history)
    rows, profiles = [], []
    best_id = ctx.best.get("id") if ctx.best else None
    for h, shown in select_rows(history, top_k, recent):
        res = h.get("resources") or {}
        spills = (res.get("spill_stores") or 0) + (res.get("spill_loads") or 0)
        note = "" if h.get("status") == "ok" else _cell(h.get("reason") or "")
        rows.append({
            "id": h["id"], "step": h.get("step") if h.get("step") is not None else "-", "shown": shown,
            "status": h.get("status"),
            "speedups": {b: fmt_speedup((h.get("speedups") or {}).get(b)) for b in baselines},
            "regs": res.get("registers") if res.get("registers") is not None else "-",
            "smem": f"{res['smem_bytes'] // 1024}K" if res.get("smem_bytes") else "-",
            "spills": spills if res.get("registers") is not None else "-", "desc": describe(h, by_id), "note": note,
        })
        if h.get("ncu") and (ncu_all or h["id"] == best_id):
            bottleneck, metrics = ncu_summary(h.get("ncu"))
            profiles.append({"id": h["id"], "bottleneck": bottleneck or h.get("bottleneck"), "metrics": metrics})
    best = None
    if ctx.best and ctx.best.get("source"):
        src = ctx.best["source"].rstrip("\n")
        lines = src.split("\n")
        if code_lines is not None and len(lines) > code_lines:
            half = code_lines // 2
            src = "\n".join(lines[:half] + [f"// ... ({len(lines) - 2 * half} lines left out) ..."] + lines[-half:])
        best = {"id": ctx.best["id"], "speedup": fmt_speedup(ctx.best.get("speedup")), "source": src}
    dview = None
    if diff and ctx.best and ctx.runner_up and ctx.best.get("source") and ctx.runner_up.get("source"):
        dview = {"other_id": ctx.runner_up["id"], "other_speedup": fmt_speedup(ctx.runner_up.get("speedup")),
                 "text": unified_diff(ctx.runner_up["source"], ctx.best["source"])}
    passages = [{"where": passage_where(p), "text": str(p.get("text", "")).strip("\n")}
                for p in ctx.passages[:n_passages]]
    nbs = []
    if neighbours:
        for nb in ctx.neighbours:
            s = nb.get("shape") or ()
            nbs.append({"shape": "x".join(str(x) for x in s), "speedup": fmt_speedup(nb.get("speedup")),
                        "desc": describe(nb, {}) or "kernel in the archive"})
    n_failed = sum(1 for h in history if h.get("status") != "ok")
    return {
        "M": m, "N": n, "K": k, "acc": ctx.acc, "arch": ctx.arch, "step": ctx.step, "n_tried": len(history),
        "n_failed": n_failed, "goal_baseline": GOAL_BASELINE, "gpu_name": ctx.gpu_name,
        "gpu_facts": gpu_fact_lines(ctx.gpu_facts), "baselines": baselines, "rows": rows, "profiles": profiles,
        "neighbours": nbs, "best": best, "diff": dview, "passages": passages,
        "retrieval_note": ctx.retrieval_note, "cut": cut, "timing": TIMING.get(ctx.mode, ctx.mode),
        "feedback": list(getattr(ctx, "feedback", None) or []),
        "pairs": pair_views(history, max_pairs=pairs) if pairs else [],
    }


def render_step(ctx, token_budget: int | None = None) -> str:
    """The step prompt; with a budget, parts are dropped (lowest value first) until it fits."""
    return render_step_cut(ctx, token_budget)[0]


def render_step_cut(ctx, token_budget: int | None = None) -> tuple[str, list[str]]:
    """The step prompt and the parts left out to fit `token_budget` (tokens as estimate_tokens counts them)."""
    tmpl = _env().get_template("step.j2")
    knobs = {"top_k": TOP_K, "recent": RECENT, "n_passages": min(MAX_PASSAGES, len(ctx.passages)),
             "neighbours": True, "diff": True, "ncu_all": True, "code_lines": None, "pairs": MAX_PAIRS}
    cut: list[str] = []

    def render() -> str:
        return tmpl.render(**_view(ctx, cut=cut, **knobs))

    text = render()
    if token_budget is None or estimate_tokens(text) <= token_budget:
        return text, cut
    # Ladder of reductions, lowest value first.
    n_total_passages = knobs["n_passages"]
    while estimate_tokens(text) > token_budget:
        if knobs["n_passages"] > 0:
            knobs["n_passages"] -= 1  # passages arrive best first: drop from the end
            label = f"{n_total_passages - knobs['n_passages']} retrieved passage(s)"
            cut[:] = [c for c in cut if "retrieved passage" not in c] + [label]
        elif knobs["neighbours"] and ctx.neighbours:
            knobs["neighbours"] = False
            cut.append("nearby shapes")
        elif knobs["recent"] > 2:
            knobs["recent"] = 2
            cut.append("older recent variants")
        elif knobs["diff"] and ctx.runner_up:
            knobs["diff"] = False
            cut.append("the runner-up diff")
        elif knobs["pairs"] > 1:
            knobs["pairs"] = 1
            cut.append("contrastive pairs but the first")
        elif knobs["ncu_all"]:
            knobs["ncu_all"] = False
            cut.append("profiles other than the best's")
        elif knobs["top_k"] > 3:
            knobs["top_k"] = 3
            cut.append("lower-ranked variants")
        elif knobs["recent"] > 0:
            knobs["recent"] = 0
            cut.append("recent variants")
        elif knobs["pairs"] > 0:
            knobs["pairs"] = 0
            cut.append("the contrastive pair")
        elif knobs["code_lines"] is None or knobs["code_lines"] > 40:
            lines = len((ctx.best or {}).get("source", "").split("\n"))
            if lines <= 40:
                break
            knobs["code_lines"] = max(40, (knobs["code_lines"] or lines) // 2)
            if "part of the best kernel's code" not in cut:
                cut.append("part of the best kernel's code")
        else:
            break  # nothing left to cut: send it over budget rather than without its core
        before, text = text, render()
        if cut and _strip_cut(text) == _strip_cut(before):
            cut.pop()  # that reduction removed nothing here: do not claim it
            text = render()
    return text, cut


def _strip_cut(text: str) -> str:
    return "\n".join(ln for ln in text.split("\n") if not ln.startswith("(Shortened to fit"))
