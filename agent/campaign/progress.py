"""A campaign's per-shape progress: live in a terminal (rich), plain lines otherwise (logs, CI, tests), with an ETA
from the mean wall time a candidate takes in its lane (the wait for its compile included)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agent.shapes import Shape, shape_str
from evaluator.record import EvalResult

PROGRESS_BASELINES = [("torch", "torch"), ("cuBLAS", "cublas-max"), ("Lt-heur", "cublaslt-heuristic-max"),
                      ("Lt-auto", "cublaslt-autotune-max")]

@dataclass
class ShapeProgress:
    shape: Shape
    budget: int
    state: str = "queued"  # queued | running | done | failed
    tried: int = 0  # evaluations archived for this shape (this run), seeds included
    ok: int = 0
    best: dict[str, float] = field(default_factory=dict)  # baseline -> best speedup so far
    started: float | None = None
    finished: float | None = None
    stop_reason: str | None = None
    error: str = ""
    eval_seconds: list[float] = field(default_factory=list)

    def note(self, res: EvalResult, seconds: float | None = None) -> None:
        self.tried += 1
        if seconds is not None:
            self.eval_seconds.append(seconds)
        if res.ok:
            self.ok += 1
            for _, name in PROGRESS_BASELINES:
                s = res.speedup(name)
                if s is not None and s > self.best.get(name, 0.0):
                    self.best[name] = s


class Progress:
    """Per-shape progress, shown live in a terminal (rich) and as plain lines otherwise (logs, CI, tests)."""

    def __init__(self, shapes: list[ShapeProgress], lanes: int, console=None, live: bool | None = None):
        from rich.console import Console

        self.shapes = {p.shape: p for p in shapes}
        self.lanes = max(1, lanes)
        self.console = console or Console(stderr=True)
        self.live_enabled = self.console.is_terminal if live is None else live
        self._lock = threading.Lock()
        self._live = None
        self.t0 = time.monotonic()

    def __enter__(self) -> "Progress":
        if self.live_enabled:
            from rich.live import Live

            self._live = Live(self.table(), console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.update(self.table())
            self._live.__exit__(*exc)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.table())

    def event(self, shape: Shape, kind: str, res: EvalResult | None = None, seconds: float | None = None,
              **info: Any) -> None:
        with self._lock:
            p = self.shapes[shape]
            if kind == "start":
                p.state, p.started = "running", time.monotonic()
            elif kind == "eval" and res is not None:
                p.note(res, seconds)
            elif kind == "done":
                p.state, p.finished, p.stop_reason = "done", time.monotonic(), info.get("stop_reason")
            elif kind == "failed":
                p.state, p.finished, p.error = "failed", time.monotonic(), info.get("error", "")
            if self._live is None or info.get("note"):  # a note (an endpoint not answering) is printed either way
                self.console.print(self.line(p, kind, res, info), highlight=False, soft_wrap=True)
            else:
                self._refresh()

    def line(self, p: ShapeProgress, kind: str, res: EvalResult | None, info: dict) -> str:
        best = " ".join(f"{label}={p.best[name]:.3f}x" for label, name in PROGRESS_BASELINES if name in p.best)
        head = f"[{shape_str(p.shape)}] {kind}"
        if kind == "eval" and res is not None:
            sp = res.speedup("cublaslt-autotune-max") if res.ok else None
            head += f" {res.status}" + (f" {sp:.3f}x vs cublaslt-autotune-max" if sp is not None else "")
        elif kind == "done":
            head += f" ({p.stop_reason or 'finished'})"
        elif kind == "failed":
            head += f": {p.error}"
        elif info.get("note"):
            head += f": {info['note']}"
        return f"{head} | tried {p.tried}/{p.budget} ok {p.ok} | best {best or '-'} | ETA {fmt_eta(self.eta())}"

    def eta(self) -> float | None:
        """Seconds left for the whole campaign: remaining candidates × the mean time per candidate / lanes."""
        secs = [s for p in self.shapes.values() for s in p.eval_seconds]
        if not secs:
            return None
        per = sum(secs) / len(secs)
        left = sum(max(0, p.budget - p.tried) for p in self.shapes.values() if p.state in ("queued", "running"))
        return left * per / self.lanes

    def shape_eta(self, p: ShapeProgress) -> float | None:
        if p.state != "running":
            return 0.0 if p.state in ("done", "failed") else None
        secs = p.eval_seconds or [s for q in self.shapes.values() for s in q.eval_seconds]
        if not secs:
            return None
        return max(0, p.budget - p.tried) * sum(secs) / len(secs)

    def table(self):
        from rich.table import Table

        el = time.monotonic() - self.t0
        t = Table(title=f"campaign · {sum(p.state == 'done' for p in self.shapes.values())}/{len(self.shapes)} "
                        f"shapes done · {fmt_eta(el)} elapsed · ETA {fmt_eta(self.eta())}", title_justify="left")
        t.add_column("shape", justify="left")
        t.add_column("state", justify="left")
        t.add_column("tried", justify="right")
        t.add_column("ok", justify="right")
        for label, _ in PROGRESS_BASELINES:
            t.add_column(f"vs {label}", justify="right")
        t.add_column("ETA", justify="right")
        style = {"done": "green", "failed": "red", "running": "yellow", "queued": "dim"}
        for p in self.shapes.values():
            cells = []
            for _, name in PROGRESS_BASELINES:
                v = p.best.get(name)
                cells.append("–" if v is None else f"[{'green' if v > 1 else 'red'}]{v:.3f}×[/]")
            state = p.state + (f" ({p.stop_reason})" if p.stop_reason else "")
            t.add_row(shape_str(p.shape), f"[{style[p.state]}]{state}[/]", f"{p.tried}/{p.budget}", str(p.ok), *cells,
                      fmt_eta(self.shape_eta(p)))
        return t


def fmt_eta(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
