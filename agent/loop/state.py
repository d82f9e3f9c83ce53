"""The per-shape loop's state: what the LangGraph checkpointer saves after every node.

Everything in it is plain JSON (lists, dicts, numbers, strings) so checkpoints stay readable and portable. Kernel
results themselves live in the archive; the state holds ids, counters and the current step's proposals.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict


class ShapeState(TypedDict, total=False):
    run: str
    thread_id: str  # "<gpu>|<acc>|MxNxK"
    gpu_name: str
    acc: str
    arch: str | None
    shape: list[int]

    step: int  # the step being worked on (0-based); advanced by the record node
    candidates: int  # proposals that carried a source (the candidate budget counts these)
    evaluations: int  # evaluate_fn calls that finished in this thread (archive hits excluded)
    memo_hits: int  # proposals whose source was already archived for this key
    no_kernel: int  # proposals without a usable source (parse failures, model call failures)
    failed_steps_in_row: int  # steps in a row that produced no source at all
    last_error: str  # why the latest step without a source had none (the model's error, the parse failure)
    no_improve_steps: int  # steps in a row without a new best (plateau)
    elapsed_s: float  # time spent inside the nodes (a killed run's downtime does not count)
    tokens: dict[str, int]  # prompt_tokens, completion_tokens, summed over calls

    passages: list[dict[str, Any]]  # retrieved for the current step
    retrieval_note: str  # why there are none, when there are none
    proposals: list[dict[str, Any]]  # Proposal.to_dict() of the current step: source_hash and a reply reference in
    # place of the source and the reply (agent.reply_store), so no checkpoint holds a kernel or a reply
    step_results: list[dict[str, Any]]  # per proposal: index, variant_id, status, speedup, memo, reason
    profiled: list[int]  # variant ids profiled in this thread
    feedback: list[dict[str, Any]]  # what went wrong in the latest steps, for the next prompts (proposers.feedback)

    best_id: int | None
    best_speedup: float | None
    stop_reason: str | None  # set by decide: target_reached, budget_candidates, budget_minutes, plateau, ...


def thread_id(gpu_name: str, acc: str, shape) -> str:
    m, n, k = (int(x) for x in shape)
    return f"{gpu_name}|{acc}|{m}x{n}x{k}"


@dataclass
class ShapeOutcome:
    thread_id: str
    shape: tuple[int, int, int]
    acc: str
    gpu_name: str
    stop_reason: str | None
    steps: int
    candidates: int
    evaluations: int
    memo_hits: int
    no_kernel: int
    best_variant_id: int | None
    best_speedup: float | None  # against cublaslt-autotune-max
    elapsed_s: float
    tokens: dict[str, int] = field(default_factory=dict)
    resumed: bool = False  # this call continued a checkpointed, unfinished thread
    already_done: bool = False  # the thread had finished before this call; nothing ran
    last_error: str = ""  # with stop_reason proposer_failing: why the model's last step gave no kernel

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
