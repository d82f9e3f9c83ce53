"""Model replies, kept once per content hash in the run folder, with a cap on each.

A reply can be megabytes (a model that loops, a server that pads). The loop's state is checkpointed after every
node and the transcript is read whole by `cudal2 inspect`, so neither holds a reply: each reply goes once to
`<run>/replies/<sha256>.txt` (cut at REPLY_CAP_BYTES, with a note that says how much was left out), and the state
and transcript keep a reference and the reply's first lines (`ref()`).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from agent.files import replace_text
from agent.secrets import scrub

REPLY_CAP_BYTES = 256 * 1024
HEAD_CHARS = 2000  # what the state and the transcript keep of a reply


class ReplyStore:
    def __init__(self, run_dir: str | os.PathLike):
        self.dir = Path(run_dir) / "replies"

    def put(self, text: str) -> dict[str, Any]:
        """Store `text` (once per content) and return its reference: sha256, chars, file (relative to the run
        folder), cut (bytes left out by the cap), head (its first HEAD_CHARS characters)."""
        text = scrub(text or "")
        if not text:
            return {"sha256": None, "chars": 0, "file": None, "cut": 0, "head": ""}
        data = text.encode("utf-8", errors="replace")
        h = hashlib.sha256(data).hexdigest()
        path = self.dir / f"{h}.txt"
        cut = max(0, len(data) - REPLY_CAP_BYTES)
        if not path.exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            body = data[:REPLY_CAP_BYTES].decode("utf-8", errors="ignore")
            if cut:
                body += f"\n[cut: {cut} more bytes of this {len(data)}-byte reply were not kept]\n"
            replace_text(path, body)
        head = text[:HEAD_CHARS] + (f"\n[... {len(text) - HEAD_CHARS} more characters in replies/{h}.txt]"
                                    if len(text) > HEAD_CHARS else "")
        return {"sha256": h, "chars": len(text), "file": f"replies/{h}.txt", "cut": cut, "head": head}

    def read(self, ref: dict[str, Any]) -> str:
        """The stored reply of a reference ("" when it has none or the file is gone)."""
        f = ref.get("file") if ref else None
        p = self.dir.parent / f if f else None
        return p.read_text(encoding="utf-8", errors="replace") if p is not None and p.is_file() else ""
