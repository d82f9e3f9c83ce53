"""The proposer interface, and the retrying, concurrent machinery the HTTP backends share.

A proposer turns a `ProposalContext` (the shape, GPU facts, the earlier variants with their results, the best
kernel, retrieved passages) into `n` `Proposal`s. A proposal either carries a contract source or says why not
(`reason`); either way it carries what the call cost (tokens, latency, attempts), so the loop can record it and go
on.
"""
from __future__ import annotations

import abc
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import tenacity

from agent.campaign.config import ModelConfig
from agent.proposers.parse import parse_reply
from agent.secrets import scrub


@dataclass
class ProposalContext:
    shape: tuple[int, int, int]
    acc: str = "fp32"
    arch: str | None = None
    gpu_name: str = ""
    gpu_facts: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    # Earlier variants of this (gpu, acc, shape), oldest first; see agent.campaign.archive.Variant.as_history().
    history: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None  # history item of the best variant, plus "source"
    runner_up: dict[str, Any] | None = None  # likewise, second best (for the diff)
    passages: list[dict[str, Any]] = field(default_factory=list)  # retrieved: text, source, symbol, line, score
    retrieval_note: str = ""  # why there are no passages, when there are none
    neighbours: list[dict[str, Any]] = field(default_factory=list)  # best variants of nearby shapes (seeding)
    mode: str = "offline"  # the evaluator's timing mode of this search (offline, server, graph)

    @property
    def parent_id(self) -> int | None:
        return self.best.get("id") if self.best else None

    @property
    def parent_source(self) -> str | None:
        return self.best.get("source") if self.best else None


@dataclass
class Proposal:
    source: str | None
    reason: str = ""  # why there is no source ("" when there is one)
    raw: str = ""  # the model's reply text (or the policy's rationale)
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens
    latency_s: float = 0.0  # the successful call alone
    total_s: float = 0.0  # with retries and waits
    attempts: int = 0
    model: str = ""
    parent: int | None = None  # archive id of the variant it edits or improves on
    name: str = ""
    family: str | None = None
    params: dict[str, Any] | None = None
    parse_kind: str = ""  # edit | fenced | whole-file | none (LLM backends)
    error: str = ""  # transport failure after retries, if any

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Proposal":
        return cls(**d)


class Proposer(abc.ABC):
    name: str = "proposer"

    @abc.abstractmethod
    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        ...

    def prompt_for_log(self, context: ProposalContext) -> dict[str, str] | None:
        """The prompt this proposer sends for `context` (for the transcript); None when it sends none."""
        return None


class RetryableError(Exception):
    """A transient failure the backend maps its client's exception to (429, 5xx, timeout, connection)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class FatalError(Exception):
    """A failure that retrying will not fix (400, 401, 404, a reply that is not a chat completion)."""


@dataclass
class ChatReply:
    text: str
    usage: dict[str, int]
    model: str


class _Wait(tenacity.wait.wait_base):
    """Exponential backoff with full jitter, but never shorter than a server's Retry-After (capped)."""

    def __init__(self, initial: float, maximum: float):
        self.initial, self.maximum = initial, maximum

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        n = retry_state.attempt_number
        base = min(self.maximum, self.initial * (2 ** (n - 1)))
        w = random.uniform(base / 2, base)
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        ra = getattr(exc, "retry_after", None)
        if ra:
            w = max(w, min(float(ra), self.maximum))
        return w


class ChatProposer(Proposer):
    """Renders the prompts, calls a chat endpoint n times concurrently (with retries), parses each reply."""

    def __init__(self, config: ModelConfig):
        self.config = config
        self.name = f"{config.backend}:{config.model_name}"

    # --- what each backend provides ---
    @abc.abstractmethod
    def _call(self, system: str, user: str) -> ChatReply:
        """One request. Raise RetryableError / FatalError; anything else counts as fatal."""

    # --- shared ---
    def render(self, context: ProposalContext) -> tuple[str, str]:
        from agent.proposers.prompt import render_system, render_step

        return render_system(acc=context.acc), render_step(context, token_budget=self.config.prompt_token_budget)

    def prompt_for_log(self, context: ProposalContext) -> dict[str, str] | None:
        system, user = self.render(context)
        return {"system": system, "user": user}

    def _retrying(self) -> tenacity.Retrying:
        c = self.config
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(RetryableError),
            stop=tenacity.stop_after_attempt(c.max_attempts) | tenacity.stop_after_delay(c.max_retry_s),
            wait=_Wait(c.backoff_initial_s, c.backoff_max_s),
            reraise=True,
        )

    def _one(self, system: str, user: str, parent: int | None, parent_source: str | None) -> Proposal:
        t0 = time.monotonic()
        attempts = 0
        retrier = self._retrying()

        def attempt() -> tuple[ChatReply, float]:
            nonlocal attempts
            attempts += 1
            s = time.monotonic()
            r = self._call(system, user)
            return r, time.monotonic() - s

        base = dict(model=self.config.model_name or "", parent=parent)
        try:
            reply, latency = retrier(attempt)
        except RetryableError as e:
            return Proposal(None, reason=f"model call failed after {attempts} attempt(s): {scrub(str(e))}",
                            error=scrub(str(e)), attempts=attempts, total_s=time.monotonic() - t0, **base)
        except FatalError as e:
            return Proposal(None, reason=f"model call failed: {scrub(str(e))}", error=scrub(str(e)),
                            attempts=attempts, total_s=time.monotonic() - t0, **base)
        except Exception as e:  # a client bug or an unforeseen reply must not end the loop
            msg = scrub(f"{type(e).__name__}: {e}")
            return Proposal(None, reason=f"model call failed: {msg}", error=msg, attempts=attempts,
                            total_s=time.monotonic() - t0, **base)
        parsed = parse_reply(reply.text, parent_source)
        base["model"] = reply.model or base["model"]
        return Proposal(parsed.source, reason=parsed.reason, raw=reply.text, usage=reply.usage, latency_s=latency,
                        total_s=time.monotonic() - t0, attempts=attempts, parse_kind=parsed.kind, **base)

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        if n < 1:
            return []
        system, user = self.render(context)
        workers = max(1, min(n, self.config.concurrency))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="propose") as pool:
            futs = [pool.submit(self._one, system, user, context.parent_id, context.parent_source) for _ in range(n)]
            props = [f.result() for f in futs]
        for i, p in enumerate(props):
            p.name = p.name or f"step{context.step}-{i}"
        return props
