"""The run transcript: one JSON object per line, appended as the loop goes, secrets scrubbed.

Event fields: ts (unix seconds), run, thread ("<gpu>|<acc>|MxNxK"), shape [M, N, K], step, node (retrieve,
propose, evaluate, profile, record, decide, resume, ...), input, output (JSON values). Lines are written whole
and flushed one by one, so a killed run leaves a readable file; `read()` skips a torn last line.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from agent.secrets import scrub_obj


class Transcript:
    def __init__(self, path: str | os.PathLike, run: str = ""):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.run = run
        self._lock = threading.Lock()

    def append(self, *, thread: str, shape, step: int | None, node: str, input: Any = None, output: Any = None,
               run: str | None = None) -> dict[str, Any]:
        event = {"ts": time.time(), "run": run if run is not None else self.run, "thread": thread,
                 "shape": list(shape) if shape is not None else None, "step": step, "node": node,
                 "input": input, "output": output}
        event = scrub_obj(event)
        line = json.dumps(event, default=str, ensure_ascii=False) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
        return event

    def read(self, thread: str | None = None, node: str | None = None) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by a kill
                if (thread is None or ev.get("thread") == thread) and (node is None or ev.get("node") == node):
                    yield ev
