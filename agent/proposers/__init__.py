"""Proposers: where new kernel variants come from (an OpenAI-compatible endpoint, Anthropic, or the built-in policy)."""
from agent.proposers.base import Proposal, ProposalContext, Proposer, make_proposer

__all__ = ["Proposal", "ProposalContext", "Proposer", "make_proposer"]
