"""The built-in search policy (no LLM needed): `BuiltinPolicy(seed).propose(shape, acc, arch, history, n, seeds)`."""
from .builtin import BuiltinPolicy, Candidate
from .export import propose_to_dir, write_candidates

__all__ = ["BuiltinPolicy", "Candidate", "propose_to_dir", "write_candidates"]
