"""Offline retrieval over CUTLASS/CuTe headers and the project's own notes (chromadb + MiniLM on the CPU).

The loop calls `build_query(shape, family, params, bottleneck)` and `Retriever(store_path).query(text, k,
token_budget)`; `cudal2 corpus build|query|stats` manage the store. See docs/retrieval.md.
"""
from __future__ import annotations

from .query import Passage, Retriever, approx_tokens, build_query, kernel_atoms
from .store import StoreError, build, default_store_path

__all__ = ["Passage", "Retriever", "StoreError", "approx_tokens", "build", "build_query", "default_store_path",
           "kernel_atoms"]
