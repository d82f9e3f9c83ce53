"""`cudal2 inspect RUN`: read a run's transcript in the terminal.

The transcript (runs/<run>/transcript.jsonl) is one JSON event per line: {ts, run, thread, shape, step, node, input,
output}. Three views:
  no options            one line per shape: steps, events, evaluations, best speedup
  --shape M N K         one line per step of that shape (nodes, candidates, statuses, speedups)
  --shape ... --step I  every node of step I in full: prompt, raw reply, compile log, checks, timings, NCU metrics
  --shape ... --diff I J  the kernel of step I against the kernel of step J, as a unified diff
The renderer knows a few field names (prompt, raw, source, log, checks, baselines, ncu) and shows anything else
as JSON, so it keeps working when nodes add fields.
"""
from __future__ import annotations

import difflib
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from agent.shapes import parse_shape_line

TRANSCRIPT = "transcript.jsonl"
SPEEDUP_KEYS = ("cublaslt-autotune-max", "cublaslt-heuristic-max", "cublas-max", "torch")


class InspectError(ValueError):
    pass


@dataclass
class Event:
    ts: float
    run: str
    thread: str
    shape: tuple[int, int, int] | None
    step: int | None
    node: str
    input: Any
    output: Any
    line: int


def resolve_run_dir(run: str, runs_dir: str | Path = "runs") -> Path:
    """RUN is a run name under runs_dir or a path to a run folder."""
    cands = list(dict.fromkeys((Path(runs_dir) / run, Path(run))))  # one, when RUN is an absolute path
    for cand in cands:
        if (cand / TRANSCRIPT).is_file():
            return cand
    raise InspectError(f"no transcript for run {run!r}: looked for "
                       + " and ".join(str(c / TRANSCRIPT) for c in cands))


def _shape(v: Any) -> tuple[int, int, int] | None:
    if v is None:
        return None
    if isinstance(v, (list, tuple)) and len(v) == 3:
        return tuple(int(x) for x in v)
    if isinstance(v, str):
        try:
            return parse_shape_line(v)
        except ValueError:
            return None
    return None


def load_events(path: str | Path) -> tuple[list[Event], list[str]]:
    """Events in file order, and a note per line that could not be read (a run killed mid-write leaves at most
    one torn last line; it is reported, not fatal)."""
    events, problems = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                if not isinstance(d, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                problems.append(f"line {i}: unreadable ({e})")
                continue
            step = d.get("step")
            events.append(Event(ts=float(d.get("ts") or 0.0), run=str(d.get("run", "")),
                                thread=str(d.get("thread", "")), shape=_shape(d.get("shape")),
                                step=int(step) if isinstance(step, (int, float)) else None,
                                node=str(d.get("node", "?")), input=d.get("input"), output=d.get("output"), line=i))
    return events, problems


# ---------------------------------------------------------------- finding things inside node payloads

def _walk(obj: Any, path: str = "") -> Iterable[tuple[str, Any]]:
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")


def _is_kernel(s: Any) -> bool:
    return isinstance(s, str) and "hgemm" in s and ("__global__" in s or 'extern "C"' in s)


def kernel_sources(events: list[Event]) -> list[tuple[str, str]]:
    """(where, source) of every distinct kernel source in these events, outputs before inputs."""
    seen, out = set(), []
    for part in ("output", "input"):
        for e in events:
            for path, v in _walk(getattr(e, part)):
                if _is_kernel(v) and v not in seen:
                    seen.add(v)
                    out.append((f"{e.node}.{part}{'.' + path if path else ''}", v))
    return out


def _results(events: list[Event]) -> list[dict]:
    """One dict per evaluation in these events: the evaluate node's output ({variant_id, status, speedup,
    speedups, memo}), or a full EvalResult dict where a node logged one."""
    found, logged = [], set()
    for e in events:
        if e.node == "evaluate" and isinstance(e.output, dict) and "status" in e.output:
            # a resumed step logs again ("recovered") what its killed predecessor had evaluated and archived: one
            # evaluation, or a resumed shape would show more evaluations than its budget allowed
            vid = e.output.get("variant_id")
            if not (e.output.get("recovered") and vid in logged):
                found.append(e.output)
            logged.add(vid)
            continue
        for _, v in _walk(e.output):
            if isinstance(v, dict) and "status" in v and "baselines" in v and "checks" in v:
                found.append(v)
    return found


def _speedup(res: dict, name: str) -> float | None:
    if "baselines" in res and "checks" in res:
        try:
            from evaluator.record import EvalResult

            return EvalResult.from_dict(res).speedup(name)
        except (TypeError, ValueError, KeyError):
            return None
    if name == SPEEDUP_KEYS[0] and res.get("speedup") is not None:
        return float(res["speedup"])
    sp = res.get("speedups") or {}
    if name in sp:
        return sp[name]
    if name.endswith("-max"):  # the evaluate node logs NN/TN; max = the faster baseline = the smaller speedup
        pair = [sp[k] for k in (name[:-4] + "-NN", name[:-4] + "-TN") if sp.get(k) is not None]
        return min(pair) if pair else None
    return None


def _fmt_x(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}×"


# ---------------------------------------------------------------- views

def view_run(events: list[Event], console: Console, run: str) -> None:
    by_shape: dict[Any, list[Event]] = defaultdict(list)
    for e in events:
        by_shape[e.shape].append(e)
    t = Table(title=f"run {run}: {len(events)} events", title_justify="left")
    for c in ("shape", "steps", "evaluations", "ok", "best vs " + SPEEDUP_KEYS[0], "stopped"):
        t.add_column(c, justify="left" if c in ("shape", "stopped") else "right")
    for shape, evs in sorted(by_shape.items(), key=lambda kv: (kv[0] is None, kv[0] or ())):
        res = [r for r in _results(evs) if not r.get("memo")]
        ok = [r for r in res if r.get("status") == "ok"]
        best = max((s for r in ok if (s := _speedup(r, SPEEDUP_KEYS[0])) is not None), default=None)
        steps = {e.step for e in evs if e.step is not None}
        stops = [e.output.get("stop_reason") for e in evs if e.node == "decide" and isinstance(e.output, dict)]
        stop = stops[-1] if stops and stops[-1] else ("running/killed" if stops else "–")
        t.add_row("x".join(map(str, shape)) if shape else "(campaign)", str(len(steps)), str(len(res)),
                  str(len(ok)), _fmt_x(best), stop)
    console.print(t)


def view_shape(events: list[Event], console: Console, shape: tuple[int, int, int]) -> None:
    evs = [e for e in events if e.shape == shape]
    if not evs:
        raise InspectError(f"no events for shape {'x'.join(map(str, shape))} in this transcript; "
                           f"shapes present: {_shapes_present(events)}")
    by_step: dict[int | None, list[Event]] = defaultdict(list)
    for e in evs:
        by_step[e.step].append(e)
    n_steps = sum(1 for s in by_step if s is not None)  # the step-less rows: the leaders measured again, the finals
    t = Table(title=f"shape {'x'.join(map(str, shape))}: {n_steps} steps", title_justify="left")
    for c in ("step", "nodes", "proposals", "statuses", *(f"vs {k}" for k in SPEEDUP_KEYS[:2])):
        t.add_column(c, justify="left" if c in ("nodes", "statuses") else "right")
    for step in sorted(by_step, key=lambda s: (s is None, s or 0)):
        se = by_step[step]
        res = _results(se)
        statuses = defaultdict(int)
        for r in res:
            statuses[r.get("status", "?")] += 1
        best = {k: max((s for r in res if r.get("status") == "ok" and (s := _speedup(r, k)) is not None),
                       default=None) for k in SPEEDUP_KEYS[:2]}
        t.add_row("–" if step is None else str(step), " → ".join(dict.fromkeys(e.node for e in se)),
                  str(_n_proposals(se)), ", ".join(f"{k}×{n}" for k, n in sorted(statuses.items())) or "–",
                  *(_fmt_x(best[k]) for k in SPEEDUP_KEYS[:2]))
    console.print(t)
    for e in evs:  # how the winner was chosen: each leader's figure in the same rounds
        if e.node == "tournament" and isinstance(e.output, dict) and e.output.get("figures"):
            figs = sorted(e.output["figures"].items(), key=lambda kv: -kv[1])
            refused = e.output.get("refused") or {}
            console.print(f"tournament ({(e.input or {}).get('rounds', '?')} rounds, vs {SPEEDUP_KEYS[0]}): "
                          + ", ".join(f"#{i} {_fmt_x(f)}" for i, f in figs) + f" → #{figs[0][0]}"
                          + (f"; refused {', '.join('#' + i for i in refused)}" if refused else ""))


def _n_proposals(events: list[Event]) -> int:
    return sum(len(e.output.get("proposals") or []) for e in events
               if e.node == "propose" and isinstance(e.output, dict))


def view_step(events: list[Event], console: Console, shape: tuple[int, int, int], step: int,
              max_lines: int = 200, archive=None) -> None:
    evs = [e for e in events if e.shape == shape and e.step == step]
    if not evs:
        raise InspectError(f"no events for shape {'x'.join(map(str, shape))} step {step}; steps present: "
                           f"{sorted({e.step for e in events if e.shape == shape and e.step is not None})}")
    console.print(Text(f"shape {'x'.join(map(str, shape))} · step {step} · {len(evs)} node events", style="bold"))
    for e in evs:
        parts = []
        for label, payload in (("input", e.input), ("output", e.output)):
            if payload in (None, {}, []):
                continue
            parts.append(Text(label, style="bold cyan"))
            parts.extend(_render_payload(payload, max_lines))
        vid = e.output.get("variant_id") if isinstance(e.output, dict) else None
        if archive is not None and e.node in ("evaluate", "seed", "final") and vid is not None:
            v = archive.get(int(vid))
            if v is not None:
                parts.append(Text(f"archived variant #{v.id} ({v.proposer})", style="bold cyan"))
                parts.append(_render_result("evaluation record", v.result.to_dict(), max_lines))
                if e.node != "final":
                    parts.append(_render_value(f"kernel {v.source_hash[:12]}", v.read_source(), max_lines))
        console.print(Panel(Group(*parts) if parts else Text("(no payload)"),
                            title=f"[bold]{e.node}[/] · thread {e.thread} · line {e.line}", title_align="left"))


def _render_payload(obj: Any, max_lines: int) -> list:
    if not isinstance(obj, dict):
        return [_render_value("", obj, max_lines)]
    out = []
    for k, v in obj.items():
        out.append(_render_value(k, v, max_lines))
    return out


def _clip(s: str, max_lines: int) -> str:
    lines = s.splitlines()
    if len(lines) <= max_lines:
        return s
    return "\n".join(lines[:max_lines]) + f"\n… ({len(lines) - max_lines} more lines; --max-lines to see more)"


def _render_value(key: str, v: Any, max_lines: int):
    title = key or "value"
    if _is_kernel(v):
        return Panel(Syntax(_clip(v, max_lines), "cpp", line_numbers=True, word_wrap=False), title=title,
                     title_align="left")
    if isinstance(v, dict) and "status" in v and "baselines" in v and "checks" in v:
        return _render_result(title, v, max_lines)
    if isinstance(v, str) and ("\n" in v or len(v) > 120):
        return Panel(Text(_clip(v, max_lines)), title=title, title_align="left")
    if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        return Panel(Group(*(Panel(Group(*_render_payload(x, max_lines)), title=f"{title}[{i}]", title_align="left")
                             for i, x in enumerate(v))), title=title, title_align="left")
    if isinstance(v, (dict, list)) and len(json.dumps(v, default=str)) <= 100:
        return Text.assemble((f"{title}: ", "bold"), json.dumps(v, default=str))
    if isinstance(v, (dict, list)):
        if isinstance(v, dict) and any(_is_kernel(x) or isinstance(x, str) and "\n" in x for x in v.values()):
            return Panel(Group(*_render_payload(v, max_lines)), title=title, title_align="left")
        return Panel(Syntax(_clip(json.dumps(v, indent=2, default=str), max_lines), "json", word_wrap=True),
                     title=title, title_align="left")
    return Text.assemble((f"{title}: ", "bold"), str(v))


def _render_result(title: str, r: dict, max_lines: int):
    head = Text.assemble(("status ", "bold"), (str(r.get("status")), "green" if r.get("status") == "ok" else "red"),
                         f"  {r.get('reason') or ''}")
    parts: list = [head]
    comp = r.get("compile") or {}
    if comp:
        parts.append(Text(f"compile: ok={comp.get('ok')} arch={comp.get('arch')} {comp.get('seconds', 0):.1f}s "
                          f"regs={comp.get('registers')} smem={comp.get('smem_bytes')} "
                          f"spills={comp.get('spill_stores', 0)}/{comp.get('spill_loads', 0)}"))
        if comp.get("log") and (not comp.get("ok") or comp.get("spill_stores")):
            parts.append(Panel(Text(_clip(comp["log"], max_lines)), title="compile log", title_align="left"))
    if r.get("checks"):
        ct = Table("check", "passed", "detail", title="checks", title_justify="left")
        for c in r["checks"]:
            ct.add_row(str(c.get("name")), "✓" if c.get("passed") else "✗", str(c.get("detail", ""))[:160])
        parts.append(ct)
    if r.get("baselines"):
        cand = r.get("candidate") or {}
        tt = Table("timing", "median µs", "speedup (mean)", "95% CI", title="timings", title_justify="left")
        if cand:
            tt.add_row("candidate", f"{cand.get('median_us', 0):.2f}", "", "")
        for name, t in r["baselines"].items():
            ci = t.get("speedup_ci95")
            tt.add_row(name, f"{t.get('median_us', 0):.2f}", _fmt_x(t.get("speedup_mean")),
                       f"{ci[0]:.3f}–{ci[1]:.3f}" if ci else "")
        parts.append(tt)
    if r.get("ncu"):
        nt = Table("metric", "value", title="Nsight Compute", title_justify="left")
        for k, v in r["ncu"].items():
            nt.add_row(str(k), json.dumps(v) if isinstance(v, (dict, list)) else str(v))
        parts.append(nt)
    return Panel(Group(*parts), title=title, title_align="left")


def view_diff(events: list[Event], console: Console, shape: tuple[int, int, int], i: int, j: int,
              archive=None) -> None:
    """The best kernel of step i (by speedup; the first evaluated where none was correct) against step j's."""
    def source_of(step: int) -> tuple[str, str]:
        evs = [e for e in events if e.shape == shape and e.step == step]
        if not evs:
            raise InspectError(f"no events for shape {'x'.join(map(str, shape))} step {step}")
        if archive is not None:
            res = [r for e in evs if e.node == "evaluate" and isinstance(e.output, dict)
                   and (r := e.output).get("variant_id") is not None]
            res.sort(key=lambda r: -(r.get("speedup") or -1.0))  # stable: first evaluated wins ties
            for r in res:
                v = archive.get(int(r["variant_id"]))
                if v is not None:
                    sp = f", {v.speedup:.3f}x" if v.speedup is not None else ""
                    return f"#{v.id} {v.status}{sp}", v.read_source()
        srcs = kernel_sources(evs)
        if not srcs:
            raise InspectError(f"step {step} of {'x'.join(map(str, shape))} holds no kernel source")
        return srcs[0]

    (wi, a), (wj, b) = source_of(i), source_of(j)
    diff = "".join(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True),
                                        fromfile=f"step {i} ({wi})", tofile=f"step {j} ({wj})"))
    if not diff:
        console.print(Text(f"steps {i} and {j} carry the same kernel", style="yellow"))
        return
    console.print(Syntax(diff, "diff", word_wrap=False))


def _shapes_present(events: list[Event]) -> str:
    shapes = sorted({e.shape for e in events if e.shape})
    return ", ".join("x".join(map(str, s)) for s in shapes) or "none"


def inspect_run(run: str, *, shape: tuple[int, int, int] | None = None, step: int | None = None,
                diff: tuple[int, int] | None = None, runs_dir: str | Path = "runs",
                console: Console | None = None, max_lines: int = 200) -> int:
    console = console or Console()
    run_dir = resolve_run_dir(run, runs_dir)
    events, problems = load_events(run_dir / TRANSCRIPT)
    archive = None
    if (run_dir / "archive.sqlite").is_file():
        from agent.campaign.archive import Archive

        archive = Archive(run_dir / "archive.sqlite")
    for p in problems:
        console.print(Text(f"note: {run_dir / TRANSCRIPT} {p}", style="yellow"))
    if (step is not None or diff is not None) and shape is None:
        raise InspectError("--step and --diff need --shape M N K")
    if shape is None:
        view_run(events, console, run)
    elif diff is not None:
        view_diff(events, console, shape, *diff, archive=archive)
    elif step is not None:
        view_step(events, console, shape, step, max_lines, archive=archive)
    else:
        view_shape(events, console, shape)
    return 0
