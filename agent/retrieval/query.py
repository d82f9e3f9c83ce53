"""What the loop calls: `build_query` turns a search state into query text; `Retriever.query` returns passages."""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .embedding import MiniLMEmbeddingFunction
from .hybrid import fuse, keyword_index
from .store import StoreError, open_collection, resolve_store_path

__all__ = ["Passage", "Retriever", "build_query", "approx_tokens", "kernel_atoms", "StoreError"]

# An identifier a query mentions by name (make_tiled_copy, SM80_CP_ASYNC, TiledMMA, cute::Swizzle) gets the chunks
# declaring it as candidates even if the embedding ranks them low: MiniLM knows English better than CuTe.
_IDENT = re.compile(r"\b(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*\b")
NAME_BOOST = 0.12
PER_SOURCE_CAP = 2
CODE_MARGIN = 0.15
PROSE_DECLS = ("page", "section")  # chunking.chunk_markdown's decl values
KEYWORD_WEIGHT = 1.0  # of the keyword ranking against the vectors' in the fusion
KEYWORD_KEEP = 5  # code the keyword search ranks this high is never pushed behind the prose
CODE_FIRST_RATIO = 0.5  # code leads when its best keyword score is over this share of the best note's


@dataclass
class Passage:
    text: str
    source: str  # retrieval_corpus/<page>.md, a header path like cute/atom/copy_atom.hpp, or <extra dir>/<file>
    symbol: str
    line: int
    score: float  # cosine similarity to the query (plus a small bonus for a named symbol), higher is better
    kind: str  # note | header | extra
    rank: int | None = None  # place in the fused vector + keyword ranking of its pool (None: vectors alone)

    def cite(self) -> str:
        return f"{self.source}:{self.line}" + (f" ({self.symbol})" if self.symbol else "")


def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _code_like(tok: str) -> bool:
    return ("_" in tok or "::" in tok or re.search(r"[a-z][A-Z]|[A-Z]{2,}\w*[a-z]|\d", tok) is not None) \
        and len(tok) >= 4


class Retriever:
    """Queries a built store. Raises StoreError (with how to rebuild) if the store is missing or corrupt."""

    def __init__(self, store_path: str | os.PathLike | None = None, hybrid: bool = True):
        self.hybrid = hybrid  # fuse a BM25 keyword ranking with the vectors' (hybrid.py)
        self.store_path = resolve_store_path(store_path)
        self._col = open_collection(store_path)
        self._ef = MiniLMEmbeddingFunction()  # the same model the store was built with (one copy per process)

    def count(self) -> int:
        return self._col.count()

    def query(self, text: str, k: int = 5, token_budget: int = 1500) -> list[Passage]:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("a retrieval query needs non-empty text")
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        facets = [ln.strip() for ln in text.splitlines() if ln.strip()]
        texts = [" ".join(facets)] + (facets if len(facets) > 1 else [])
        vecs = self._ef.embed(texts)
        n = max(10 * k, 60)
        # Prose (notes, extra text) and code (headers, extra code) are ranked apart and then alternated: in one
        # ranking, thousands of near-identical code chunks (the SM90 MMA atoms, say) crowd out the one page that
        # explains the technique, while a query naming a symbol still puts that symbol's code first.
        pools = [self._search(vecs, n, {"decl": {"$in": list(PROSE_DECLS)}}),
                 self._search(vecs, n, {"decl": {"$nin": list(PROSE_DECLS)}})]
        kw = self._keywords() if self.hybrid else None
        ranked: list[list[Passage]] = []
        for fi in range(len(texts)):
            prose_cands, code_cands = pools[0][fi], pools[1][fi]
            self._add_named(texts[fi], vecs[fi], code_cands)
            if kw is None:
                prose = _dedupe(sorted(prose_cands.values(), key=lambda p: -p.score))
                code = _dedupe(sorted(code_cands.values(), key=lambda p: -p.score))
                ranked.append(_dedupe(_alternate(prose, code)))
                continue
            # Hybrid: in each pool (prose, code) the vectors' ranking is fused with the keywords' by reciprocal
            # rank; the pools are then alternated as without keywords.
            keep: set[tuple] = set()
            best_kw = {}
            for pool, prose_pool in ((prose_cands, True), (code_cands, False)):
                scored = kw.search(texts[fi], n, prose=prose_pool)
                best_kw[prose_pool] = scored[0][1] if scored else 0.0
                hits = [cid for cid, _ in scored]
                self._add_ids(hits, vecs[fi], pool)
                order = fuse(sorted(pool, key=lambda c, pool=pool: -pool[c].score), hits,
                             weights=(1.0, KEYWORD_WEIGHT))
                for r, cid in enumerate(order):
                    pool[cid].rank = r
                if hits and not prose_pool:  # the best keyword match in the code leads the code: reciprocal rank
                    pool[hits[0]].rank = -1  # fusion would put a chunk both rankings like a little below it
                keep.update(_key(pool[c]) for c in hits[:KEYWORD_KEEP])
            prose = _dedupe(sorted(prose_cands.values(), key=_order))
            code = _dedupe(sorted(code_cands.values(), key=_order))
            # An API question (its words match a declaration about as well as any note) is answered by code first.
            code_first = best_kw[False] > CODE_FIRST_RATIO * best_kw[True]
            ranked.append(_dedupe(_alternate(prose, code, keep=keep, code_first=code_first)))
        picked = _interleave(ranked, k)
        return trim_to_budget(picked, token_budget)

    def _search(self, vecs: list, n: int, where: dict) -> list[dict[str, Passage]]:
        try:
            res = self._col.query(query_embeddings=vecs, n_results=n, where=where,
                                  include=["documents", "metadatas", "distances"])
        except Exception as e:  # chromadb refuses n_results beyond what matches on some versions
            if "n_results" not in str(e) and "contigious" not in str(e) and "contiguous" not in str(e):
                raise
            res = self._col.query(query_embeddings=vecs, n_results=max(1, min(n, self._col.count())), where=where,
                                  include=["documents", "metadatas", "distances"])
        out = []
        for fi in range(len(vecs)):
            out.append({cid: _passage(doc, meta, 1.0 - float(dist)) for cid, doc, meta, dist in
                        zip(res["ids"][fi], res["documents"][fi], res["metadatas"][fi], res["distances"][fi])})
        return out

    def _keywords(self):
        return keyword_index(self._col, self.store_path)

    def _add_ids(self, ids: list[str], vec: Any, cands: dict[str, Passage]) -> None:
        """Candidates for chunks only the keyword search found, scored by their cosine like the others."""
        missing = [i for i in ids if i not in cands]
        if not missing:
            return
        got = self._col.get(ids=missing, include=["documents", "metadatas", "embeddings"])
        for cid, doc, meta, emb in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"]):
            cands[cid] = _passage(doc, meta, float(sum(a * b for a, b in zip(vec, emb))))

    def _add_named(self, text: str, vec: Any, cands: dict[str, Passage]) -> None:
        names = sorted({t.split("::")[-1] for t in _IDENT.findall(text) if _code_like(t)})
        if not names:
            return
        got = self._col.get(where={"name": {"$in": names[:20]}}, limit=40,
                            include=["documents", "metadatas", "embeddings"])
        for cid, doc, meta, emb in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"]):
            sim = float(sum(a * b for a, b in zip(vec, emb)))
            p = cands.get(cid) or _passage(doc, meta, sim)
            p.score = sim + NAME_BOOST
            cands[cid] = p


def _passage(doc: str, meta: Mapping[str, Any], score: float) -> Passage:
    return Passage(text=doc, source=str(meta.get("source", "")), symbol=str(meta.get("symbol", "")),
                   line=int(meta.get("line", 0) or 0), score=round(score, 4), kind=str(meta.get("kind", "")))


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _dedupe(ps: Iterable[Passage]) -> list[Passage]:
    """Best first; drops repeated text, repeated (source, symbol) and more than PER_SOURCE_CAP pieces of one file."""
    out, seen_text, seen_sym, per_src = [], set(), set(), {}
    for p in ps:
        t, s = _norm(p.text), (p.source, p.symbol)
        if t in seen_text or s in seen_sym or per_src.get(p.source, 0) >= PER_SOURCE_CAP:
            continue
        seen_text.add(t)
        seen_sym.add(s)
        per_src[p.source] = per_src.get(p.source, 0) + 1
        out.append(p)
    return out


def _order(p: Passage) -> tuple:
    return (p.rank, -p.score) if p.rank is not None else (float("inf"), -p.score)


def _alternate(prose: list[Passage], code: list[Passage], keep: set = frozenset(),
               code_first: bool = False) -> list[Passage]:
    """Prose and code merged by turns, starting with the list whose best passage scores higher. Code that scores
    far below the best prose is only weakly related boilerplate: it goes after all the prose, unless the keyword
    search ranked it high (`keep`: its (source, symbol, line) keys)."""
    if prose:
        floor = max(p.score for p in prose[:3]) - CODE_MARGIN
        late = [p for p in code if p.score < floor and _key(p) not in keep]
        code = [p for p in code if p.score >= floor or _key(p) in keep]
    else:
        late = []
    if code_first:  # two pieces of code to one of prose
        out, ci, pi = [], 0, 0
        while ci < len(code) or pi < len(prose):
            out.extend(code[ci:ci + 2])
            ci += 2
            out.extend(prose[pi:pi + 1])
            pi += 1
        return out + late
    a, b = (code, prose) if code and (not prose or code[0].score > prose[0].score) else (prose, code)
    out = []
    for i in range(max(len(a), len(b))):
        out.extend(x[i] for x in (a, b) if i < len(x))
    return out + late


def _key(p: Passage) -> tuple:
    return (p.source, p.symbol, p.line)


def _interleave(ranked: list[list[Passage]], k: int) -> list[Passage]:
    """The whole query's best first, then each facet's best in turn, so every facet of a long query is heard."""
    if len(ranked) == 1:
        return ranked[0][:k]
    out: list[Passage] = []
    positions = [0] * len(ranked)
    while len(out) < k and any(pos < len(r) for pos, r in zip(positions, ranked)):
        for fi, r in enumerate(ranked):
            while positions[fi] < len(r):
                p = r[positions[fi]]
                positions[fi] += 1
                grown = _dedupe(out + [p])
                if len(grown) > len(out):
                    out = grown
                    break
            if len(out) >= k:
                break
    return out


def trim_to_budget(passages: list[Passage], token_budget: int) -> list[Passage]:
    """Keep passages in rank order within the budget; the last one may be cut at a line boundary."""
    if token_budget <= 0:
        raise ValueError(f"token_budget must be positive, got {token_budget}")
    out, left = [], token_budget
    for p in passages:
        need = approx_tokens(p.text)
        if need <= left:
            out.append(p)
            left -= need
            continue
        if left >= 48:
            cut = p.text[: left * 4 - 4]
            nl = cut.rfind("\n")
            if nl > len(cut) // 2:
                cut = cut[:nl]
            out.append(Passage(cut + "\n…", p.source, p.symbol, p.line, p.score, p.kind, p.rank))
        break
    return out


# ------------------------------------------------------------------ queries from loop state -------------------------

_BOTTLENECK_TERMS = [
    (("dram", "memory bound", "memory-bound", "bandwidth", "hbm"),
     "memory bound: DRAM throughput near peak, raise arithmetic intensity with larger tiles, L2 reuse, "
     "block swizzle rasterization"),
    (("bank", "conflict"), "shared memory bank conflicts: swizzle the shared memory layout, ldmatrix"),
    (("occupancy", "register", "regs"), "low achieved occupancy and register pressure: launch bounds, tile size, "
                                        "stages versus shared memory per block"),
    (("spill", "local memory"), "register spills to local memory: reduce accumulator tile per thread"),
    (("latency", "launch", "small", "tail", "wave"), "latency bound small GEMM: launch overhead, wave quantization, "
                                                     "split-K or stream-K to fill the SMs"),
    (("stall", "long_scoreboard", "scoreboard", "barrier", "wait"),
     "warp stall reasons: long scoreboard waits on global loads, deepen the cp.async or TMA pipeline, "
     "prefetch distance"),
    (("tensor", "mma", "pipe", "compute"), "tensor core pipe utilisation: mma.sync or wgmma issue rate, "
                                           "keep tensor cores fed"),
    (("l2", "cache"), "L2 hit rate: threadblock rasterization and swizzle for L2 locality"),
    (("l1", "smem", "shared"), "shared memory throughput and L1: ldmatrix, vectorized 128-bit accesses"),
    (("epilogue", "store"), "epilogue: fp32 accumulator to fp16 conversion, vectorized stores of C through "
                            "shared memory"),
]


def _shape_facets(m: int, n: int, k: int) -> list[str]:
    out = []
    tiles = math.ceil(m / 128) * math.ceil(n / 128)
    flops = 2.0 * m * n * k
    if flops < 2 * 512 ** 3:
        out.append("small GEMM bound by kernel launch latency, few thread blocks; small tiles or split-K")
    elif tiles < 132:
        out.append(f"only {tiles} output tiles of 128x128, fewer than the SMs: split-K or stream-K, smaller tiles, "
                   "wave quantization")
    if k >= 4 * max(m, n):
        out.append("long K reduction relative to M and N: split-K or stream-K partial sums")
    if min(m, n) <= 64:
        out.append("skinny GEMM with tiny M or N, GEMV-like and memory bound")
    if m % 128 or n % 128 or k % 32:
        out.append("M, N or K not a multiple of the tile: padding, predication, residue handling at the boundary")
    if k % 8 or n % 8:
        out.append("K or N not a multiple of 8 halves: 16-byte vector loads and cp.async alignment fail")
    if flops >= 2 * 4096 ** 3 and min(m, n) >= 1024:
        out.append("large compute bound GEMM: wgmma TMA warp specialized pipelines, large tiles, "
                   "block swizzle for L2 reuse")
    return out


def _family_facet(family: str | None, params: Mapping[str, Any] | None) -> str:
    parts = []
    if family:
        f = family.lower()
        parts.append(f"current kernel family {family}")
        if any(x in f for x in ("sm90", "wgmma", "tma", "hopper")):
            parts.append("Hopper wgmma TMA mbarrier warp specialization CollectiveBuilder")
        elif any(x in f for x in ("sm80", "cp_async", "cpasync", "mma", "ampere", "multistage", "cute")):
            parts.append("cp.async multistage pipeline ldmatrix mma.sync fragments")
        if "wmma" in f:
            parts.append("WMMA fragments versus mma.sync")
        if "splitk" in f or "split_k" in f or "stream" in f:
            parts.append("split-K stream-K reduction")
    if params:
        kv = ", ".join(f"{k}={v}" for k, v in sorted(params.items()) if isinstance(v, (int, float, str, bool)))
        if kv:
            parts.append(f"parameters {kv}")
        names = " ".join(str(x).lower() for x in params)
        if "stage" in names:
            parts.append("pipeline stages")
        if "swizzle" in names or "raster" in names:
            parts.append("block swizzle rasterization")
    return "; ".join(parts)


def _bottleneck_facet(bottleneck: Any) -> str:
    if bottleneck is None:
        return ""
    if isinstance(bottleneck, Mapping):
        words = " ".join(str(k) for k, v in bottleneck.items() if v) + " " + " ".join(
            str(v) for v in bottleneck.values() if isinstance(v, str))
    elif isinstance(bottleneck, str):
        words = bottleneck
    else:
        words = " ".join(str(x) for x in bottleneck)
    low = words.lower().replace("_", " ")
    hits = [t for keys, t in _BOTTLENECK_TERMS if any(key.replace("_", " ") in low for key in keys)]
    return f"NCU bottleneck {words.strip()}" + (": " + "; ".join(hits) if hits else "")


_ATOM = re.compile(r"\bSM\d\d_[A-Za-z0-9_]+")
_API = re.compile(r"\b(?:cute|cutlass)::(?:\w+::)*([A-Z][a-z]+(?:[A-Z][a-z0-9]*)+\w*)")
_ASM = re.compile(r'"\s*([a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+)')
MAX_ATOMS = 12


def kernel_atoms(source: str | None, limit: int = MAX_ATOMS) -> list[str]:
    """The API a kernel is built from, as retrieval terms: CuTe atoms (SM80_CP_ASYNC_CACHEGLOBAL), CUTLASS types
    (CollectiveBuilder, KernelTmaWarpSpecializedCooperative) and the PTX its asm issues (cp.async.bulk,
    mbarrier.arrive.expect_tx), most used first."""
    if not source:
        return []
    counts: dict[str, int] = {}
    for pat, pick in ((_ATOM, 0), (_API, 1), (_ASM, 1)):
        for m in pat.finditer(source):
            term = m.group(pick)
            if pat is _ASM:
                if term.endswith((".j2", ".h", ".hpp", ".cuh", ".cu")):  # a file name in a string, not PTX
                    continue
                term = ".".join(term.split(".")[:3])
            counts[term] = counts.get(term, 0) + 1
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:limit]


def build_query(shape: Iterable[int], family: str | None = None, params: Mapping[str, Any] | None = None,
                bottleneck: Any = None, atoms: Iterable[str] = ()) -> str:
    """Query text for the current state of a shape's search, one facet per line (Retriever.query uses them)."""
    try:
        m, n, k = (int(x) for x in shape)
    except (TypeError, ValueError) as e:
        raise ValueError(f"shape must be three integers (M, N, K), got {shape!r}") from e
    if min(m, n, k) <= 0:
        raise ValueError(f"shape dimensions must be positive, got {(m, n, k)}")
    lines = []
    b = _bottleneck_facet(bottleneck)
    if b:
        lines.append(b)
    lines.append(f"fp16 HGEMM on tensor cores, M={m} N={n} K={k}, A row-major, B row-major or column-major, "
                 "fp32 accumulation")
    lines.extend(_shape_facets(m, n, k))
    f = _family_facet(family, params)
    if f:
        lines.append(f)
    atoms = [a for a in atoms if a]
    if atoms:  # the keyword search meets these names in the headers that declare them
        lines.append("the kernel's API: " + " ".join(atoms)
                     + (f" and what limits it: {_bottleneck_facet(bottleneck)}" if bottleneck else ""))
    return "\n".join(lines)
