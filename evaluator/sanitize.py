"""`--sanitize`: run the candidate once under compute-sanitizer memcheck and racecheck.

The run (evaluator.oneshot, shared with profiling) uses exact-size, unguarded allocations (the worker's guard bands
are valid memory, so memcheck could not see a write into them) and calls only the candidate, so every report is
the candidate's.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from evaluator.gpu import visible_token
from evaluator.proc import run_in_group
from evaluator.record import CheckOutcome

TOOLS = ("memcheck", "racecheck")


def run_sanitizers(so_path: str, shape, native_so: str, timeout: float = 900.0,
                   gpu: int | None = None) -> list[CheckOutcome]:
    exe = shutil.which("compute-sanitizer")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=visible_token(gpu)) if gpu is not None else None
    out = []
    for tool in TOOLS:
        name = f"sanitizer_{tool}"
        if exe is None:
            out.append(CheckOutcome(name, False, "compute-sanitizer is not installed; --sanitize cannot be honoured"))
            continue
        cmd = [exe, f"--tool={tool}", "--error-exitcode=99", "--print-limit=20", sys.executable, "-m",
               "evaluator.oneshot", native_so, so_path, *map(str, shape)]
        rc, text = run_in_group(cmd, timeout, cwd=str(Path(__file__).resolve().parent.parent), env=env)
        if rc is None:
            out.append(CheckOutcome(name, False, f"did not finish within {timeout:g} s"))
            continue
        # memcheck ends with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: ... (N errors, M warnings)"
        m = re.search(r"ERROR SUMMARY: (\d+) error", text) or re.search(r"RACECHECK SUMMARY:.*?\((\d+) error", text)
        errors = int(m.group(1)) if m else None
        ok = rc == 0 and errors == 0
        detail = "" if ok else _first_report(text, rc)
        out.append(CheckOutcome(name, ok, detail, {"errors": errors, "returncode": rc}))
    return out


def _first_report(text: str, rc: int) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("=========")]
    interesting = [ln for ln in lines if any(w in ln for w in ("Invalid", "hazard", "Error", "error"))]
    return (f"exit {rc}: " + " | ".join(interesting[:4]))[:600]
