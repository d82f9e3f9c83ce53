"""Proposers: where new kernel variants come from (an OpenAI-compatible endpoint, Anthropic, or the built-in policy)."""
from agent.campaign.config import ModelConfig
from agent.proposers.base import Proposal, ProposalContext, Proposer


def make_proposer(config: ModelConfig) -> Proposer:
    """The backend named by the config."""
    if config.backend == "openai":
        from agent.proposers.openai_backend import OpenAIProposer

        return OpenAIProposer(config)
    if config.backend == "anthropic":
        from agent.proposers.anthropic_backend import AnthropicProposer

        return AnthropicProposer(config)
    from agent.proposers.builtin_backend import BuiltinProposer

    return BuiltinProposer(config)


__all__ = ["Proposal", "ProposalContext", "Proposer", "make_proposer"]
