"""Read campaign runs for export: each run's archive, transcript and final measurements, grouped into the steps that
proposed kernels.

A step group is every kernel one prompt produced: the variants the loop archived for one (GPU, accumulator, shape)
at one step. Kernels archived outside the loop's steps (seeds from the global archive, imports) have no step; the
seeds of a shape form one group, an import is a group of its own. Each group knows the moment its prompt was made
(`as_of`): the transcript's propose event for that step, or else the moment its first kernel was archived.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.campaign.archive import Archive, Variant
from agent.campaign.db import RUN_RECORD, run_record
from agent.loop.state import thread_id
from agent.transcript import Transcript
from evaluator.record import EvalResult

ARCHIVE_FILE = "archive.sqlite"
TRANSCRIPT_FILE = "transcript.jsonl"
FINALS_FILE = "campaign.sqlite"


class DatasetError(ValueError):
    """Bad export input (exit code 2)."""


@dataclass
class RunData:
    name: str
    path: Path
    meta: dict[str, Any]  # campaign.json ({} for a run without one)
    archive: Archive
    events: list[dict[str, Any]]
    # (gpu, acc, shape, source_hash) -> mode -> the final measurements of that kernel in that mode
    finals: dict[tuple, dict[str, list[EvalResult]]] = field(default_factory=dict)


@dataclass
class StepGroup:
    run: RunData
    gpu: str
    acc: str
    shape: tuple[int, int, int]
    step: int | None
    kernels: list[Variant]  # archive order
    as_of: float  # the archive as it was before this moment is what the prompt showed
    logged_prompt: dict[str, str] | None  # {"system", "user"} as sent, where the proposer sent one
    retrieval_note: str
    passages_lost: bool  # the step had retrieved passages, but the run keeps only where they came from
    start: dict[str, Any]  # the thread's start event input (gpu_facts, mode, arch where the run kept them)
    feedback: list[dict[str, Any]] = field(default_factory=list)  # "what went wrong last time", as the loop had it


def resolve_run(run: str, runs_dir: str | Path = "runs") -> Path:
    """RUN is a run name under runs_dir or a path to a run folder; either way it holds an archive."""
    cands = list(dict.fromkeys((Path(runs_dir) / run, Path(run))))
    for cand in cands:
        if (cand / ARCHIVE_FILE).is_file():
            return cand
    raise DatasetError(f"no run {run!r}: looked for " + " and ".join(str(c / ARCHIVE_FILE) for c in cands))


def open_run(path: Path) -> RunData:
    try:
        meta: dict[str, Any] = run_record(path)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path / RUN_RECORD}: not JSON ({e})") from None
    events = list(Transcript(path / TRANSCRIPT_FILE).read())
    run = RunData(name=str(meta.get("run") or path.resolve().name), path=path, meta=meta,
                  archive=Archive(path / ARCHIVE_FILE), events=events)
    if (path / FINALS_FILE).is_file():
        from agent.campaign.db import CampaignDB

        for f in CampaignDB(path / FINALS_FILE).finals():
            key = (f["gpu"], f["acc"], tuple(f["shape"]), f["source_hash"])
            run.finals.setdefault(key, {}).setdefault(f["mode"], []).append(f["result"])
    return run


def _latest(events: list[dict[str, Any]], before: float) -> dict[str, Any] | None:
    earlier = [e for e in events if (e.get("ts") or 0.0) <= before]
    return max(earlier, key=lambda e: e["ts"]) if earlier else None


def feedback_before(records: list[dict[str, Any]], before: float) -> list[dict[str, Any]]:
    """The failure notes the loop's state held at `before`: its record events' notes, carried forward as the loop
    carries them (agent.proposers.feedback.carry)."""
    from agent.proposers.feedback import carry

    notes: list[dict[str, Any]] = []
    for e in sorted((e for e in records if (e.get("ts") or 0.0) <= before), key=lambda e: e["ts"]):
        rows = ((e.get("input") or {}).get("results")) or []
        notes = carry(notes, [r["feedback"] for r in rows if isinstance(r, dict) and r.get("feedback")])
    return notes


def step_groups(run: RunData) -> list[StepGroup]:
    """Every group of kernels the run archived, in the order their prompts were made."""
    by_thread: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for e in run.events:
        by_thread.setdefault(str(e.get("thread")), {}).setdefault(str(e.get("node")), []).append(e)
    groups = []
    for key in run.archive.shapes():
        shape = tuple(int(x) for x in key.shape)
        tid = thread_id(key.gpu, key.acc, shape)
        nodes = by_thread.get(tid, {})
        bunches: dict[tuple, list[Variant]] = {}
        for v in run.archive.history(key.gpu, key.acc, shape):
            if v.step is not None:
                g = ("step", v.step)
            elif v.proposer.startswith("seed:"):
                g = ("seed", v.proposer)
            else:
                g = ("single", v.id)
            bunches.setdefault(g, []).append(v)
        for (kind, _), kernels in bunches.items():
            first = min(v.created_at for v in kernels)
            step = kernels[0].step if kind == "step" else None
            propose = None
            if step is not None:
                # a step re-run after a kill has a propose event per attempt: the one its kernels came from
                propose = _latest([e for e in nodes.get("propose", []) if e.get("step") == step], first)
            as_of = propose["ts"] if propose else first
            prompt = ((propose or {}).get("input") or {}).get("prompt")
            logged = prompt if isinstance(prompt, dict) and "system" in prompt and "user" in prompt else None
            retrieved = _latest([e for e in nodes.get("retrieve", []) if e.get("step") == step], as_of) \
                if step is not None else None
            out = (retrieved or {}).get("output") or {}
            # without a retrieve event the loop had no retriever: the note is the one its retrieve node gives then
            note = out.get("note", "") if retrieved else "no retriever configured"
            passages_lost = bool(out.get("passages")) and logged is None
            if passages_lost:
                note = "the retrieved passages were not kept with the run"
            start = _latest(nodes.get("start", []), as_of) or next(iter(nodes.get("start", [])), None)
            groups.append(StepGroup(run=run, gpu=key.gpu, acc=key.acc, shape=shape, step=step, kernels=kernels,
                                    as_of=as_of, logged_prompt=logged, retrieval_note=note,
                                    passages_lost=passages_lost, start=(start or {}).get("input") or {},
                                    feedback=feedback_before(nodes.get("record", []), as_of)))
    groups.sort(key=lambda g: (g.as_of, g.kernels[0].id))
    return groups
