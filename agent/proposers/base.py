"""The proposer interface, and the retrying, concurrent machinery the HTTP backends share.

A proposer turns a `ProposalContext` (the shape, GPU facts, the earlier variants with their results, the best
kernel, retrieved passages) into `n` `Proposal`s. A proposal either carries a contract source or says why not
(`reason`); either way it carries what the call cost (tokens, latency, attempts), so the loop can record it and go
on.
"""
from __future__ import annotations

import abc
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from agent.campaign.config import ModelConfig
from agent.proposers.deadline import (EndpointFatal, FatalError, RetryableError, call_with_retries,  # noqa: F401
                                      latch_for)
from agent.proposers.parse import parse_reply, reply_summary
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
    feedback: list[dict[str, Any]] = field(default_factory=list)  # what went wrong lately (agent.proposers.feedback)

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
    summary: str = ""  # the one-line summary the reply opens with (prompts ask for it), "" when it has none

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


@dataclass
class ChatReply:
    text: str
    usage: dict[str, int]
    model: str


class ChatProposer(Proposer):
    """Renders the prompts, calls a chat endpoint n times concurrently (each under a hard deadline, with bounded
    retries), parses each reply. An EndpointFatal answer stops every request of this configuration."""

    def __init__(self, config: ModelConfig):
        from agent.proposers.budget import check_budget

        check_budget(config)  # ConfigError when --max-tokens leaves the prompt no room in --context-tokens
        self.config = config
        self.name = f"{config.backend}:{config.model_name}"
        self.latch = latch_for(config)
        # where notes on a slow or failing endpoint go (a campaign routes them to its lane's progress line)
        self.on_note: Callable[[str], None] = lambda msg: print(f"note: {msg}", file=sys.stderr, flush=True)

    # --- what each backend provides ---
    @abc.abstractmethod
    def _call(self, system: str, user: str) -> ChatReply:
        """One request. Raise RetryableError / FatalError / EndpointFatal; anything else counts as fatal."""

    # --- shared ---
    def render(self, context: ProposalContext) -> tuple[str, str]:
        system, user, _ = self.render_logged(context)
        return system, user

    def render_logged(self, context: ProposalContext) -> tuple[str, str, list[str]]:
        """System prompt, step prompt, and what the context budget left out of the step prompt."""
        from agent.proposers.budget import render_prompt

        return render_prompt(context, self.config)

    def prompt_for_log(self, context: ProposalContext) -> dict[str, Any] | None:
        system, user, cut = self.render_logged(context)
        return {"system": system, "user": user, "dropped": cut}

    def where(self) -> str:
        return self.config.base_url or self.config.backend

    def _one(self, system: str, user: str, parent: int | None, parent_source: str | None) -> Proposal:
        c = self.config
        t0 = time.monotonic()
        base = dict(model=c.model_name or "")
        try:
            out = call_with_retries(lambda: self._call(system, user), request_timeout=c.timeout_s,
                                    max_attempts=c.max_attempts, max_retry_s=c.max_retry_s,
                                    backoff_initial_s=c.backoff_initial_s, backoff_max_s=c.backoff_max_s,
                                    where=self.where(), note=self.on_note, stop=self.latch)
        except EndpointFatal as e:
            self.latch.trip(e)
            msg = scrub(str(e))
            return Proposal(None, reason=f"model call failed: {msg}", error=msg, attempts=getattr(e, "attempts", 0),
                            total_s=time.monotonic() - t0, **base)
        except RetryableError as e:
            attempts = getattr(e, "attempts", 0)
            msg = scrub(str(e))
            self.on_note(f"{self.where()}: giving up on this request after {attempts} attempt(s): {msg}")
            return Proposal(None, reason=f"model call failed after {attempts} attempt(s): {msg}", error=msg,
                            attempts=attempts, total_s=time.monotonic() - t0, **base)
        except FatalError as e:
            msg = scrub(str(e))
            return Proposal(None, reason=f"model call failed: {msg}", error=msg, attempts=getattr(e, "attempts", 1),
                            total_s=time.monotonic() - t0, **base)
        except Exception as e:  # a client bug or an unforeseen reply must not end the loop
            msg = scrub(f"{type(e).__name__}: {e}")
            return Proposal(None, reason=f"model call failed: {msg}", error=msg, attempts=1,
                            total_s=time.monotonic() - t0, **base)
        reply: ChatReply = out.value
        parsed = parse_reply(reply.text, parent_source)
        base["model"] = reply.model or base["model"]
        # a parent only for an edit: a whole file written anew does not descend from the kernel it was shown
        return Proposal(parsed.source, reason=parsed.reason, raw=reply.text, usage=reply.usage,
                        latency_s=out.latency_s, total_s=time.monotonic() - t0, attempts=out.attempts,
                        parse_kind=parsed.kind, parent=parent if parsed.kind == "edit" else None,
                        summary=reply_summary(reply.text), **base)

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        """n proposals; raises EndpointFatal when the endpoint gave (now or earlier) an answer no retry can fix."""
        if n < 1:
            return []
        self.latch.check()
        system, user = self.render(context)
        args = (system, user, context.parent_id, context.parent_source)
        props = []
        if not self.latch.probed:
            # The first request of a configuration goes alone: a rejected key or an unknown model then costs one
            # request, not n. Any answer that is not such an error clears the way for concurrent requests.
            props.append(self._one(*args))
            self.latch.check()
            self.latch.probed = True
        workers = max(1, min(n - len(props), self.config.concurrency))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="propose") as pool:
            futs = [pool.submit(self._one, *args) for _ in range(n - len(props))]
            props += [f.result() for f in futs]
        self.latch.check()
        for i, p in enumerate(props):
            p.name = p.name or f"step{context.step}-{i}"
        return props
