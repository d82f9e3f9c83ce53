"""The built-in search policy (no LLM needed): `BuiltinPolicy(seed).propose(shape, acc, arch, history, n, seeds)`."""
from .builtin import BuiltinPolicy, Candidate

__all__ = ["BuiltinPolicy", "Candidate"]
