"""What went wrong last time: one short note per failed proposal, kept in the loop's state and shown in the next
prompts, so that the model hears why its reply was not a kernel, did not build, failed a check or repeated one.

A note is a small dict: step, kind (no_kernel | model_error | compile_error | duplicate | a failed status such as
incorrect), what (one line) and lines (the first lines of the reply or of the compiler's errors).
"""
from __future__ import annotations

from typing import Any

REPLY_LINES = 5  # of a reply that held no kernel
ERROR_LINES = 6  # of a compile log
LINE_CHARS = 200
KEEP_STEPS = 3  # notes from this many latest steps with failures stay in the prompt
MAX_NOTES = 8


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def first_lines(text: str, n: int) -> list[str]:
    return [_clip(ln) for ln in (text or "").strip("\n").split("\n") if ln.strip()][:n]


def compile_error_lines(log: str, n: int = ERROR_LINES) -> list[str]:
    """The first error lines of an nvcc log (the lines that say `error`), else its first lines."""
    lines = [ln for ln in (log or "").split("\n") if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()]
    return [_clip(ln) for ln in (errs or lines)[:n]]


def note_for(step: int, proposal: dict[str, Any], row: dict[str, Any], result: Any = None) -> dict[str, Any] | None:
    """The note for one proposal of a step (None when it was evaluated and is fine). `row` is the evaluate
    node's result row (status, reason, memo, variant_id); `result` the EvalResult, when one was made."""
    status = row.get("status")
    if status == "no_kernel":
        if proposal.get("error"):
            return {"step": step, "kind": "model_error", "what": _clip(proposal.get("reason") or ""), "lines": []}
        return {"step": step, "kind": "no_kernel", "what": _clip(proposal.get("reason") or "no kernel in the reply"),
                "lines": first_lines(proposal.get("raw") or "", REPLY_LINES)}
    if row.get("memo"):
        sp = row.get("speedup")
        return {"step": step, "kind": "duplicate", "variant": row.get("variant_id"),
                "what": f"a duplicate of variant #{row.get('variant_id')} ({status}"
                        + (f", {sp:.3f}x" if sp is not None else "") + "), evaluated before: nothing was learnt",
                "lines": []}
    if status == "compile_error":
        log = getattr(getattr(result, "compile", None), "log", "") if result is not None else ""
        return {"step": step, "kind": "compile_error", "variant": row.get("variant_id"),
                "what": _clip(row.get("reason") or "the kernel did not compile"),
                "lines": compile_error_lines(log or row.get("reason") or "")}
    if status not in ("ok", None):
        return {"step": step, "kind": status, "variant": row.get("variant_id"),
                "what": _clip(row.get("reason") or status), "lines": []}
    return None


def carry(previous: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The notes the next prompt shows: the new step's, then the older ones, from the latest KEEP_STEPS steps
    that had failures, at most MAX_NOTES."""
    notes = list(new) + list(previous or [])
    steps = sorted({n.get("step", 0) for n in notes}, reverse=True)[:KEEP_STEPS]
    return [n for n in notes if n.get("step", 0) in steps][:MAX_NOTES]
