"""Progress for slow nvcc builds: elapsed time against what earlier builds of the same kind of kernel took.

A CUTLASS/CuTe build takes 10-90 s and nvcc says nothing while it runs, so a caller that shows progress gets a
`BuildProgress` every few seconds. The expected time is the median of the last builds of that kind on this machine,
kept in a small log next to the build cache (`build_times.jsonl`, one line per finished build).
"""
from __future__ import annotations

import dataclasses
import json
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Callable

FIRST_REPORT_S = 5.0  # builds shorter than this stay silent
REPORT_EVERY_S = 10.0
MEDIAN_OF = 15  # the last builds of a kind that the estimate looks at
LOG_NAME = "build_times.jsonl"
_KEEP_LINES = 2000  # the log is rewritten to its newest lines beyond twice this

_FAMILY = re.compile(r'cuda-l2 (?:family "(\w+)"|candidate: family (\w+))')
_CUTLASS = re.compile(r'#\s*include\s*[<"](?:cutlass|cute)/')


def kind_of(source: str) -> str:
    """The built-in family a generated kernel names in its header, else 'CUTLASS/CuTe' or 'plain CUDA'."""
    if m := _FAMILY.search(source[:2000]):
        return m.group(1) or m.group(2)
    return "CUTLASS/CuTe" if _CUTLASS.search(source) else "plain CUDA"


@dataclasses.dataclass
class BuildProgress:
    kind: str
    elapsed: float
    expected: float | None  # median seconds of earlier builds of this kind; None when there were none
    earlier: int  # how many earlier builds the median is taken over

    def line(self) -> str:
        head = f"building {self.kind} kernel: {self.elapsed:.0f} s"
        if self.expected is None:
            return head + " (no earlier build of this kind to estimate from)"
        left = self.expected - self.elapsed
        eta = f"about {left:.0f} s left" if left >= 1 else "taking longer than usual"
        return f"{head} of ~{self.expected:.0f} s expected ({eta}; median of {self.earlier} earlier builds)"


def expected_seconds(cache_root: Path, kind: str) -> tuple[float | None, int]:
    times = [r["seconds"] for r in _read(cache_root) if r.get("kind") == kind][-MEDIAN_OF:]
    return (statistics.median(times) if times else None), len(times)


def record(cache_root: Path, kind: str, seconds: float) -> None:
    """Append one finished build; a log that cannot be written only costs the estimate."""
    path = cache_root / LOG_NAME
    try:
        with path.open("a") as f:  # one short append per build: concurrent builders do not interleave lines
            f.write(json.dumps({"kind": kind, "seconds": round(seconds, 2), "at": round(time.time())}) + "\n")
        if path.stat().st_size > _KEEP_LINES * 2 * 80:
            lines = path.read_text().splitlines()[-_KEEP_LINES:]
            tmp = path.with_suffix(".tmp")
            tmp.write_text("\n".join(lines) + "\n")
            tmp.replace(path)
    except OSError:
        pass


def _read(cache_root: Path) -> list[dict]:
    try:
        text = (cache_root / LOG_NAME).read_text()
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if isinstance(row, dict) and isinstance(row.get("seconds"), (int, float)):
            rows.append(row)
    return rows


class Ticker:
    """Calls `report(BuildProgress)` after FIRST_REPORT_S and then every REPORT_EVERY_S until the block ends."""

    def __init__(self, report: Callable[[BuildProgress], None] | None, kind: str, cache_root: Path,
                 started: float):
        self.report, self.kind, self.started = report, kind, started
        self.expected, self.earlier = expected_seconds(cache_root, kind) if report else (None, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="build-progress")

    def _loop(self) -> None:
        wait = FIRST_REPORT_S - (time.monotonic() - self.started)
        while not self._stop.wait(max(0.0, wait)):
            try:
                self.report(BuildProgress(self.kind, time.monotonic() - self.started, self.expected, self.earlier))
            except Exception:  # noqa: BLE001 (a broken progress display must not fail the build)
                return
            wait = REPORT_EVERY_S

    def __enter__(self) -> Ticker:
        if self.report is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
