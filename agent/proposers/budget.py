"""The context budget: system prompt + step prompt + the reply (max_tokens) must fit the model's context.

The step prompt gets what `context_tokens` leaves after the reply, the system prompt and a margin for the chat
template and for the token estimate's error; prompt.render_step_cut then drops its least useful parts until it
fits, and the transcript records what went.
"""
from __future__ import annotations

from typing import Any

# Chat-template tokens around the messages, plus slack for the estimate (prompt.estimate_tokens counts 3.5
# characters a token, which overestimates code-heavy text for the tokenizers seen, but not every tokenizer).
MARGIN_TOKENS = 512
MIN_STEP_TOKENS = 2048  # below this the prompt cannot hold the task, the best kernel and the failures


def step_budget(config: Any, system: str) -> int:
    """Tokens the step prompt may take under `config` (context_tokens, max_tokens, prompt_token_budget)."""
    from agent.proposers.prompt import estimate_tokens

    room = config.context_tokens - config.max_tokens - estimate_tokens(system) - MARGIN_TOKENS
    if config.prompt_token_budget is not None:
        room = min(room, config.prompt_token_budget)
    return room


def render_prompt(ctx: Any, config: Any) -> tuple[str, str, list[str]]:
    """System prompt, step prompt and what the context budget dropped, for a ProposalContext under a
    ModelConfig: what an LLM backend sends for that step (agent.loop.shape_loop.build_context makes the context
    from an archive's history)."""
    from agent.proposers.prompt import render_step_cut, render_system

    system = render_system(acc=ctx.acc)
    user, cut = render_step_cut(ctx, token_budget=step_budget(config, system))
    return system, user, cut


def check_budget(config: Any) -> None:
    """ConfigError when --max-tokens leaves too little of --context-tokens for a useful prompt."""
    from agent.campaign.config import ConfigError
    from agent.proposers.prompt import render_system

    if config.backend == "builtin":
        return
    room = step_budget(config, render_system(acc="fp32"))
    if room < MIN_STEP_TOKENS:
        raise ConfigError(
            f"--context-tokens {config.context_tokens} with --max-tokens {config.max_tokens} leaves {max(room, 0)} "
            f"tokens for the step prompt, and it needs at least {MIN_STEP_TOKENS}: raise --context-tokens to the "
            f"model's context length, or lower --max-tokens")
