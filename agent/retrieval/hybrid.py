"""Keyword retrieval beside the vectors: BM25 over the store's chunks, fused with the vector ranking.

MiniLM knows English better than CuTe: a question about TMA multicast finds prose about TMA, while the header
chunk declaring `SM90_TMA_LOAD_MULTICAST` wins on its words (tma, load, multicast, cluster) and its identifier.
Identifiers are indexed whole and in parts (`SM90_TMA_LOAD_MULTICAST` -> sm90_tma_load_multicast, sm90, tma,
load, multicast; `warpgroup_arrive` -> warpgroup, arrive; `makeTiledCopy` -> make, tiled, copy), and a chunk's
symbol counts SYMBOL_WEIGHT times. The two rankings are fused by reciprocal rank (`fuse`).

The index is built from the collection itself (its documents and metadata) on first use and cached next to the
store, keyed by the store's manifest, so it never disagrees with the vectors.
"""
from __future__ import annotations

import json
import math
import pickle
import re
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable

K1, B = 1.2, 0.75
HEAD_CHARS = 800
SYMBOL_WEIGHT = 3
RRF_K = 60  # reciprocal rank fusion: score = sum of 1 / (RRF_K + rank)
INDEX_VERSION = 1
PROSE_DECLS = frozenset({"page", "section"})  # chunking.chunk_markdown's decl values: the rest is code

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset("""a an and are as at be by can do does for from has have how i in is it its my of on or so that the
this to use used uses what when where which while who why will with without should would into than then them
they their there these those via per each one""".split())


_PTX = re.compile(r"\b[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_:]*)+")


def tokens(text: str) -> list[str]:
    """Lower-case terms of a text: every identifier whole, and its parts when it has any; every PTX mnemonic
    (`cp.async.bulk.tensor.2d.global...`) by each of its prefixes of two parts or more, so that a question saying
    `cp.async.bulk` or `wgmma.fence` meets the asm statement that issues it."""
    out = []
    for m in _PTX.findall(text):
        parts = m.split(".")
        out.extend(".".join(parts[:i]) for i in range(2, min(len(parts), 5) + 1))
    for w in _WORD.findall(text):
        low = w.lower()
        parts = [p.lower() for piece in w.split("_") if piece for p in _CAMEL.findall(piece)]
        if low not in _STOP and len(low) > 1:
            out.append(low)
        if len(parts) > 1:
            out.extend(p for p in parts if p not in _STOP and len(p) > 1)
    return out


class KeywordIndex:
    def __init__(self, ids: list[str], docs: list[str], metas: list[dict[str, Any]]):
        self.ids = ids
        self.kinds = [str(m.get("decl", "")) for m in metas]
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.lengths: list[int] = []
        for i, (doc, meta) in enumerate(zip(docs, metas)):
            # A chunk's head (its declaration and the comment above it) says what it is; the body of a long class
            # mentions everything and would win every query on term counts alone.
            terms = (tokens(doc[:HEAD_CHARS]) + tokens(str(meta.get("source") or "")) +
                     tokens(str(meta.get("name") or meta.get("symbol") or "")) * SYMBOL_WEIGHT)
            self.lengths.append(len(terms))
            for t, n in Counter(terms).items():
                self.postings[t].append((i, n))
        self.postings = dict(self.postings)
        self.avg = sum(self.lengths) / max(1, len(self.lengths))

    def search(self, text: str, n: int = 50, prose: bool | None = None) -> list[tuple[str, float]]:
        """Chunk ids and BM25 scores, best first; prose=True: notes and text pages only, False: code only."""
        scores: dict[int, float] = defaultdict(float)
        big_n = len(self.lengths)
        for t in set(tokens(text)):
            post = self.postings.get(t)
            if not post:
                continue
            idf = math.log(1 + (big_n - len(post) + 0.5) / (len(post) + 0.5))
            for i, tf in post:
                if prose is not None and (self.kinds[i] in PROSE_DECLS) != prose:
                    continue
                scores[i] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * self.lengths[i] / self.avg))
        best = sorted(scores.items(), key=lambda kv: -kv[1])[:n]
        return [(self.ids[i], s) for i, s in best]


_cache: dict[str, KeywordIndex] = {}
_lock = threading.Lock()


def keyword_index(col: Any, store: Path) -> KeywordIndex:
    """The index of a store's collection: from memory, from the cache file beside it, or built (seconds)."""
    man = store / "cudal2_manifest_v1.json"
    try:
        stamp = str(json.loads(man.read_text()).get("built_at"))
    except (OSError, ValueError):
        stamp = ""
    key = f"{store}|{stamp}|{col.count()}"
    with _lock:
        if key in _cache:
            return _cache[key]
        path = store / f"cudal2_keyword_index_v{INDEX_VERSION}.pkl"
        idx = None
        if stamp and path.is_file():
            try:
                with open(path, "rb") as f:
                    saved_key, idx = pickle.load(f)
                if saved_key != key:
                    idx = None
            except Exception:  # a torn or foreign file: rebuild it
                idx = None
        if idx is None:
            got = col.get(include=["documents", "metadatas"])
            idx = KeywordIndex(got["ids"], got["documents"], got["metadatas"])
            if stamp:
                try:
                    tmp = path.with_suffix(".tmp")
                    with open(tmp, "wb") as f:
                        pickle.dump((key, idx), f, protocol=pickle.HIGHEST_PROTOCOL)
                    tmp.replace(path)
                except OSError:
                    pass  # a read-only store still works, it builds the index each time
        _cache[key] = idx
        return idx


def fuse(*rankings: list[str], weights: Iterable[float] | None = None) -> list[str]:
    """Reciprocal rank fusion of rankings of ids (best first)."""
    ws = list(weights) if weights is not None else [1.0] * len(rankings)
    score: dict[str, float] = defaultdict(float)
    for w, ranking in zip(ws, rankings):
        for r, cid in enumerate(ranking):
            score[cid] += w / (RRF_K + r + 1)
    return sorted(score, key=lambda c: -score[c])
