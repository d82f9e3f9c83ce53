"""The built-in search policy (no LLM needed): `BuiltinPolicy(seed).propose(shape, acc, arch, history, n, seeds)`.
`cudal2 propose --model builtin` writes its candidates to a folder."""
from .builtin import BuiltinPolicy, Candidate

__all__ = ["BuiltinPolicy", "Candidate"]
