"""The prompt of each step group, as the loop sent it or as it would have rendered it.

Where the transcript kept the prompt a proposer sent (the LLM backends log theirs), that is the prompt. Where it kept
none (the built-in policy sends none; seeds and imports have no step), the prompt is rendered now by the loop's own
code: `build_context` over the archive as it was at that moment, then the proposers' templates. The archive as it
was is a copy holding only the variants, re-measurements and tournaments created before the moment, grown forward
in time as the groups are visited in order. Other shapes' kernels (the prompt's nearby shapes) are as of the
transcript's propose event, which is logged the moment the proposer returns: for the built-in policy, milliseconds
after its context was built.
"""
from __future__ import annotations

from types import SimpleNamespace

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from agent.campaign.archive import Archive
from agent.campaign.config import ModelConfig
from agent.dataset.runs import StepGroup

_TABLES = ("variants", "remeasures", "tournaments")


class ArchiveAsOf:
    """A copy of a run's archive that holds what the original held at a moment, moved forward with `advance`."""

    def __init__(self, source: Archive):
        self.source = source
        self._tmp = tempfile.TemporaryDirectory(prefix="cudal2-dataset-")
        self.archive = Archive(Path(self._tmp.name) / "archive.sqlite")
        self.archive.kernels_dir = source.kernels_dir  # the sources are read where the run keeps them
        self.upto = float("-inf")

    def advance(self, t: float) -> Archive:
        if t < self.upto:
            raise ValueError("the archive copy only moves forward in time")
        c = sqlite3.connect(self.archive.db_path)
        try:
            c.execute("ATTACH DATABASE ? AS src", (str(self.source.db_path),))
            with c:
                for table in _TABLES:
                    c.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table} "
                              "WHERE created_at >= ? AND created_at < ?", (self.upto, t))
            c.execute("DETACH DATABASE src")
        finally:
            c.close()
        self.upto = t
        return self.archive

    def close(self) -> None:
        self._tmp.cleanup()


def _facts_arch_mode(group: StepGroup) -> tuple[dict[str, Any], str | None, str]:
    first = group.kernels[0].result
    facts = group.start.get("gpu_facts")
    arch = group.start.get("arch") or (first.compile.arch if first.compile else None)
    mode = group.start.get("mode") or group.run.meta.get("mode") or first.mode or "offline"
    return (dict(facts) if isinstance(facts, dict) else {}), arch, mode


def budget_config(group: StepGroup) -> SimpleNamespace:
    """The context budget the run's model had (context_tokens, max_tokens, prompt_token_budget; defaults where the
    run predates a field), as agent.proposers.budget reads it."""
    model, default = group.run.meta.get("model") or {}, ModelConfig()
    return SimpleNamespace(**{k: model.get(k) if model.get(k) is not None else getattr(default, k)
                              for k in ("context_tokens", "max_tokens", "prompt_token_budget")})


def render(group: StepGroup, asof: ArchiveAsOf) -> tuple[str, str, str]:
    """(system, user, where from): "transcript" for the prompt a proposer sent, "rendered" for one made now."""
    from agent.loop.shape_loop import build_context
    from agent.proposers.budget import render_prompt

    if group.logged_prompt is not None:
        return group.logged_prompt["system"], group.logged_prompt["user"], "transcript"
    facts, arch, mode = _facts_arch_mode(group)
    ctx = build_context(asof.advance(group.as_of), gpu_name=group.gpu, acc=group.acc, shape=group.shape, arch=arch,
                        gpu_facts=facts, step=group.step or 0, passages=[], retrieval_note=group.retrieval_note,
                        mode=mode, feedback=group.feedback)
    system, user, _ = render_prompt(ctx, budget_config(group))
    return system, user, "rendered"


def has_facts(group: StepGroup) -> bool:
    return group.logged_prompt is not None or isinstance(group.start.get("gpu_facts"), dict)
