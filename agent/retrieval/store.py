"""The persistent chromadb store: where it lives, what goes in, and incremental (re-)ingestion.

One collection per corpus version (`cudal2_corpus_v<N>`): a change to chunking or to the embedded text bumps N, so a
store never mixes chunks cut two ways. Chunk ids are content hashes; a rebuild embeds only ids the collection lacks
and deletes ids no source produces any more. A manifest of per-file hashes lets an unchanged file skip re-chunking.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from agent.resources import data_dir
from .chunking import Chunk, chunk_cpp, chunk_markdown
from .embedding import EmbedPool, MiniLMEmbeddingFunction

CORPUS_VERSION = 1
COLLECTION = f"cudal2_corpus_v{CORPUS_VERSION}"
ENV_STORE = "CUDAL2_RETRIEVAL_STORE"
REBUILD_HINT = "build it with `cudal2 corpus build{flag}`"
# Code chunks embed a digest (path, symbol, comment, signature; see chunking._code_embed_text) cut at 96 tokens:
# that keeps the full header build within minutes on 2 cores. Notes and extra text use the model's 256.
TOKENS = {"header": 96, "extra": 256, "note": 256}
CPP_SUFFIXES = (".h", ".hpp", ".cuh", ".inl", ".cu", ".cpp", ".cc")
TEXT_SUFFIXES = (".md", ".markdown", ".txt", ".rst")
REPO_ROOT = Path(__file__).resolve().parents[2]


class StoreError(RuntimeError):
    """The store is missing, corrupt or of another corpus version; the message says how to rebuild."""


def default_store_path() -> Path:
    env = os.environ.get(ENV_STORE)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cuda-l2" / "retrieval"


def resolve_store_path(path: str | os.PathLike | None) -> Path:
    return Path(path).expanduser().resolve() if path else default_store_path().resolve()


def notes_dir() -> Path:
    return data_dir("retrieval_corpus")


def installed_cutlass_include() -> Path:
    try:
        import cutlass_library
    except ImportError as e:
        raise StoreError("the nvidia-cutlass package is not installed (pip install --no-deps nvidia-cutlass), "
                         "or pass --cutlass PATH to a CUTLASS checkout") from e
    p = Path(cutlass_library.__file__).resolve().parent / "source" / "include"
    if not (p / "cute").is_dir():
        raise StoreError(f"no CuTe headers under {p}; reinstall nvidia-cutlass or pass --cutlass PATH")
    return p


def resolve_cutlass_include(path: str | os.PathLike | None) -> Path:
    """The include/ directory of a CUTLASS tree: accepts the checkout root or include/ itself."""
    if path is None:
        return installed_cutlass_include()
    p = Path(path).expanduser().resolve()
    for cand in (p / "include", p):
        if (cand / "cute").is_dir() or (cand / "cutlass").is_dir():
            return cand
    raise StoreError(f"{p} is not a CUTLASS checkout: expected {p}/include/cute or {p}/cute")


# ------------------------------------------------------------------ sources ------------------------------------------

@dataclass
class SourceFile:
    kind: str  # note | header | extra
    path: Path
    name: str  # how passages cite it

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"

    def chunks(self, text: str) -> list[Chunk]:
        if self.path.suffix.lower() in TEXT_SUFFIXES:
            return chunk_markdown(text, self.name, kind=self.kind)
        return chunk_cpp(text, self.name, kind=self.kind)


def collect_sources(cutlass: str | os.PathLike | None = None, extra: str | os.PathLike | None = None,
                    header_filter: Callable[[str], bool] | None = None, notes: str | os.PathLike | None = None,
                    include_headers: bool = True) -> list[SourceFile]:
    files: list[SourceFile] = []
    ndir = Path(notes) if notes else notes_dir()
    if not ndir.is_dir():
        raise StoreError(f"the notes directory {ndir} does not exist")
    for p in sorted(ndir.glob("*.md")):
        if p.name.lower() != "readme.md":
            files.append(SourceFile("note", p, f"retrieval_corpus/{p.name}"))
    if include_headers:
        inc = resolve_cutlass_include(cutlass)
        for p in sorted(inc.rglob("*")):
            rel = p.relative_to(inc).as_posix()
            if p.is_file() and p.suffix in (".h", ".hpp", ".cuh", ".inl") and (header_filter is None or header_filter(rel)):
                files.append(SourceFile("header", p, rel))
    if extra:
        ed = Path(extra).expanduser().resolve()
        if not ed.is_dir():
            raise StoreError(f"--extra {ed} is not a directory")
        for p in sorted(ed.rglob("*")):
            if p.is_file() and p.suffix.lower() in CPP_SUFFIXES + TEXT_SUFFIXES:
                files.append(SourceFile("extra", p, f"{ed.name}/{p.relative_to(ed).as_posix()}"))
    return files


def chunk_id(c: Chunk, seen: dict[str, int]) -> str:
    h = hashlib.sha1(f"{c.kind}\0{c.source}\0{c.symbol}\0{c.text}".encode()).hexdigest()[:24]
    n = seen.get(h, 0)
    seen[h] = n + 1
    return h if n == 0 else f"{h}-{n}"


def chunk_metadata(c: Chunk) -> dict:
    # `name` is the symbol without template arguments: exact-name lookups for identifiers a query mentions.
    name = c.symbol.split("<", 1)[0].strip() if c.kind != "note" else ""
    return {"source": c.source, "symbol": c.symbol[:300], "name": name, "line": int(c.line), "kind": c.kind,
            "decl": c.decl}


# ------------------------------------------------------------------- client ------------------------------------------

def _client(path: Path):
    import chromadb
    from chromadb.config import Settings
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False,
                                                                       allow_reset=False))


def _looks_like_store(path: Path) -> bool:
    return (path / "chroma.sqlite3").is_file()


def open_collection(store: str | os.PathLike | None = None):
    """The current corpus collection of an existing store; StoreError with a rebuild hint otherwise."""
    path = resolve_store_path(store)
    flag = f" --store {path}" if store else ""  # $CUDAL2_RETRIEVAL_STORE is seen by the build as well
    if not path.exists() or not _looks_like_store(path):
        raise StoreError(f"no retrieval store at {path}; {REBUILD_HINT.format(flag=flag)}")
    try:
        client = _client(path)
        names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
    except Exception as e:  # sqlite "file is not a database", missing tables, bad segments ...
        raise StoreError(f"the retrieval store at {path} is corrupt or unreadable ({type(e).__name__}: {e}); "
                         f"rebuild it with `cudal2 corpus build --fresh{flag}`") from e
    if COLLECTION not in names:
        found = ", ".join(names) or "none"
        raise StoreError(f"the retrieval store at {path} has no collection {COLLECTION} (found: {found}); "
                         f"{REBUILD_HINT.format(flag=flag)}")
    try:
        col = client.get_collection(COLLECTION, embedding_function=MiniLMEmbeddingFunction())
        col.count()
    except Exception as e:
        raise StoreError(f"the retrieval store at {path} is corrupt or unreadable ({type(e).__name__}: {e}); "
                         f"rebuild it with `cudal2 corpus build --fresh{flag}`") from e
    return col


def manifest_path(store: Path) -> Path:
    return store / f"cudal2_manifest_v{CORPUS_VERSION}.json"


def load_manifest(store: Path) -> dict:
    try:
        return json.loads(manifest_path(store).read_text())
    except (OSError, ValueError):
        return {}


# ------------------------------------------------------------------ building -----------------------------------------

@dataclass
class BuildReport:
    store: str
    files: int = 0
    files_rechunked: int = 0
    chunks: int = 0
    embedded: int = 0
    deleted: int = 0
    metadata_updated: int = 0
    seconds: float = 0.0
    chunk_seconds: float = 0.0
    embed_seconds: float = 0.0
    by_kind: dict = field(default_factory=dict)

    def summary(self) -> str:
        return (f"{self.chunks} chunks from {self.files} files ({self.files_rechunked} re-chunked); "
                f"embedded {self.embedded}, deleted {self.deleted}, metadata updated {self.metadata_updated}; "
                f"{self.seconds:.1f} s (chunking {self.chunk_seconds:.1f} s, embedding {self.embed_seconds:.1f} s) "
                f"-> {self.store}")


_OTHER_ARCH = re.compile(r"sm1[0-2]\d")  # Blackwell headers (sm100/103/120...): no kernel here targets them


# Debug instrumentation that mirrors every barrier and fence by name (synclog_emit_cluster_barrier_arrive, ...):
# no kernel uses it, and its names outrank the real operations in every synchronisation query.
_NOISE = frozenset({"cutlass/arch/synclog.hpp"})


def targeted_headers(rel: str) -> bool:
    """Headers for the architectures this project builds for (sm_80 families, sm_90a): ~15% fewer chunks."""
    return not _OTHER_ARCH.search(rel) and rel not in _NOISE


def build(store: str | os.PathLike | None = None, cutlass: str | os.PathLike | None = None,
          extra: str | os.PathLike | None = None, header_filter: Callable[[str], bool] | None = targeted_headers,
          notes: str | os.PathLike | None = None, include_headers: bool = True, fresh: bool = False,
          batch: int = 512, log: Callable[[str], None] | None = None, workers: int | None = None) -> BuildReport:
    """Bring the store in line with the sources: embed new chunks, delete vanished ones, fix moved line numbers.
    header_filter=None ingests every header, Blackwell's included. The embedding runs in `workers` processes
    (default: one per core); progress lines carry the share done and an ETA."""
    t0 = time.perf_counter()
    say = log or (lambda s: None)
    path = resolve_store_path(store)
    sources = collect_sources(cutlass, extra, header_filter, notes, include_headers)
    if fresh and path.exists():
        if _looks_like_store(path) or not any(path.iterdir()):
            shutil.rmtree(path)
        else:
            raise StoreError(f"--fresh refuses to delete {path}: it does not look like a retrieval store")
    path.mkdir(parents=True, exist_ok=True)
    try:
        client = _client(path)
        ef = MiniLMEmbeddingFunction()
        col = client.get_or_create_collection(COLLECTION, embedding_function=ef,
                                              configuration={"hnsw": {"space": "cosine"}},
                                              metadata={"corpus_version": CORPUS_VERSION})
        existing = set(col.get(include=[])["ids"])
    except Exception as e:
        raise StoreError(f"cannot open the retrieval store at {path} ({type(e).__name__}: {e}); "
                         f"rebuild it with `cudal2 corpus build --fresh --store {path}`") from e
    old = load_manifest(path).get("files", {})
    report = BuildReport(store=str(path), files=len(sources))
    wanted: dict[str, None] = {}
    new_chunks: list[tuple[str, Chunk]] = []
    rechunked_meta: dict[str, dict] = {}
    manifest_files: dict[str, dict] = {}
    tc = time.perf_counter()
    for sf in sources:
        data = sf.path.read_bytes()
        sha = hashlib.sha1(data).hexdigest()
        prev = old.get(sf.key)
        if prev and prev.get("sha") == sha and all(i in existing for i in prev["ids"]):
            ids = prev["ids"]
        else:
            report.files_rechunked += 1
            seen: dict[str, int] = {}
            ids = []
            for c in sf.chunks(data.decode("utf-8", errors="replace")):
                cid = chunk_id(c, seen)
                ids.append(cid)
                if cid in existing:
                    rechunked_meta[cid] = chunk_metadata(c)
                else:
                    new_chunks.append((cid, c))
        manifest_files[sf.key] = {"sha": sha, "ids": ids}
        report.by_kind[sf.kind] = report.by_kind.get(sf.kind, 0) + len(ids)
        for i in ids:
            wanted[i] = None
    report.chunk_seconds = time.perf_counter() - tc
    report.chunks = len(wanted)
    n_workers = max(1, workers or os.cpu_count() or 1)
    say(f"{len(sources)} files, {report.chunks} chunks: {len(new_chunks)} to embed"
        + (f" in {n_workers} processes" if new_chunks else ""))

    stale = [i for i in existing if i not in wanted]
    max_batch = max(1, min(batch, client.get_max_batch_size()))
    for s in range(0, len(stale), 5000):
        col.delete(ids=stale[s:s + 5000])
    report.deleted = len(stale)
    if rechunked_meta:  # chunks that survived an edit of their file may have moved: refresh line numbers
        ids = list(rechunked_meta)
        for s in range(0, len(ids), 5000):
            got = col.get(ids=ids[s:s + 5000], include=["metadatas"])
            upd = [(i, rechunked_meta[i]) for i, m in zip(got["ids"], got["metadatas"]) if m != rechunked_meta[i]]
            if upd:
                col.update(ids=[i for i, _ in upd], metadatas=[m for _, m in upd])
                report.metadata_updated += len(upd)

    te = time.perf_counter()
    # Embed like-kinded chunks together: each kind has its own token cut, and sorting by length keeps padding low.
    new_chunks.sort(key=lambda t: (t[1].kind, len(t[1].embed_text)))
    done = 0
    batches = []  # one kind per batch, so each batch has one token cut
    for kind in sorted({c.kind for _, c in new_chunks}):
        of_kind = [t for t in new_chunks if t[1].kind == kind]
        batches += [of_kind[s:s + max_batch] for s in range(0, len(of_kind), max_batch)]
    eta = _Eta(sum(_cost(c) for _, c in new_chunks))
    jobs = [([c.embed_text for _, c in part], TOKENS[part[0][1].kind]) for part in batches]
    with EmbedPool(ef, n_workers if len(batches) > 1 else 1) as pool:
        for part, vecs in zip(batches, pool.map(jobs)):
            col.add(ids=[cid for cid, _ in part], documents=[c.text for _, c in part], embeddings=vecs,
                    metadatas=[chunk_metadata(c) for _, c in part])
            done += len(part)
            say(f"embedded {done}/{len(new_chunks)} chunks, {eta.line(sum(_cost(c) for _, c in part))}")
    report.embedded = len(new_chunks)
    report.embed_seconds = time.perf_counter() - te
    report.seconds = time.perf_counter() - t0
    roots = sorted({str(sf.path.parent) if sf.kind == "note" else "" for sf in sources} - {""})
    manifest = {"corpus_version": CORPUS_VERSION, "collection": COLLECTION, "built_at": time.time(),
                "build_seconds": report.seconds, "by_kind": report.by_kind, "chunks": report.chunks,
                "sources": {"notes": roots, "cutlass": str(resolve_cutlass_include(cutlass)) if include_headers else None,
                            "extra": str(Path(extra).resolve()) if extra else None,
                            "header_subset": header_filter not in (None, targeted_headers)},
                "files": manifest_files}
    tmp = manifest_path(path).with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest))
    os.replace(tmp, manifest_path(path))
    return report


def _cost(c: Chunk) -> int:
    """Work of embedding one chunk, in tokens as the model sees them (cut at its kind's limit)."""
    return min(TOKENS[c.kind], len(c.embed_text) // 4 + 2)


class _Eta:
    """Share of the embedding work done and the time left, from the rate since the first batch came back (the
    first one carries the worker processes' start). Work is counted in tokens: the chunks go shortest first, and
    a count of chunks would promise too early an end."""

    def __init__(self, total: int):
        self.total, self.done, self.t0 = max(1, total), 0, time.perf_counter()
        self.first: tuple[float, int] | None = None

    def line(self, work: int) -> str:
        self.done += work
        now = time.perf_counter()
        head = f"{100 * self.done / self.total:.0f}% of the work, {_clock(now - self.t0)} so far"
        if self.first is None:
            self.first = (now, self.done)
            return head
        t1, d1 = self.first
        rate = (self.done - d1) / max(1e-9, now - t1)
        return f"{head}, ETA {_clock((self.total - self.done) / max(rate, 1e-9))}"


def _clock(s: float) -> str:
    s = int(round(s))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def stats(store: str | os.PathLike | None = None) -> dict:
    col = open_collection(store)
    path = resolve_store_path(store)
    man = load_manifest(path)
    metas = col.get(include=["metadatas"])["metadatas"]
    by_kind: dict[str, int] = {}
    files: dict[str, set] = {}
    for m in metas:
        by_kind[m["kind"]] = by_kind.get(m["kind"], 0) + 1
        files.setdefault(m["kind"], set()).add(m["source"])
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return {"store": str(path), "collection": COLLECTION, "corpus_version": CORPUS_VERSION, "chunks": len(metas),
            "chunks_by_kind": by_kind, "files_by_kind": {k: len(v) for k, v in files.items()},
            "disk_mb": round(size / 2**20, 1), "built_at": man.get("built_at"),
            "build_seconds": man.get("build_seconds"), "sources": man.get("sources")}


def print_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def iter_notes(notes: str | os.PathLike | None = None) -> Iterable[Path]:
    d = Path(notes) if notes else notes_dir()
    return sorted(p for p in d.glob("*.md") if p.name.lower() != "readme.md")
