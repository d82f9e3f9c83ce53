"""The real store: chromadb + MiniLM over the notes and a subset of CUTLASS headers.

Builds one small store per session (~650 chunks) and measures recall@5 on the golden set; the benchmark
(python -m agent.retrieval.bench) does the same over all headers.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from agent.retrieval import Passage, Retriever, StoreError, build, build_query  # noqa: E402
from agent.retrieval.bench import load_golden, recall_at_k  # noqa: E402
from agent.retrieval.store import COLLECTION, stats  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GOLDEN = load_golden()
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[str]]:
    """The module's one store and the progress lines of its build, embedded in two processes whatever the core
    count, so that the parallel path is the one built and tested."""
    path = tmp_path_factory.mktemp("retrieval") / "store"
    keep = frozenset(GOLDEN["subset_headers"])
    lines: list[str] = []
    rep = build(store=path, header_filter=lambda rel: rel in keep, workers=2, log=lines.append)
    assert rep.embedded == rep.chunks > 500 and rep.by_kind["note"] >= 25 and rep.by_kind["header"] > 300
    return path, lines


@pytest.fixture(scope="module")
def store(built) -> Path:
    return built[0]


@pytest.fixture(scope="module")
def retriever(store) -> Retriever:
    return Retriever(store)


def test_recall_at_5_on_golden_set(retriever):
    assert len(GOLDEN["questions"]) >= 30
    recall, rows = recall_at_k(retriever, GOLDEN["questions"], k=5)
    misses = [(r["q"], r["got"]) for r in rows if not r["rank"]]
    assert recall >= 0.8, f"recall@5 = {recall:.2f}; misses: {misses}"


def test_passages_are_sourced_unique_and_within_budget(retriever):
    hits = retriever.query("cp.async wait_group multistage pipeline and SM80_CP_ASYNC_CACHEGLOBAL", k=6,
                           token_budget=700)
    assert hits and all(isinstance(h, Passage) for h in hits)
    assert sum(len(h.text) for h in hits) <= 700 * 4
    assert len({(h.source, h.symbol) for h in hits}) == len(hits)
    assert len({h.text for h in hits}) == len(hits)
    assert {h.kind for h in hits} <= {"note", "header"}
    assert all(h.line >= 1 and h.source for h in hits)
    assert any(h.source == "cute/arch/copy_sm80.hpp" and "CP_ASYNC" in h.symbol for h in hits)
    # notes and code are ranked apart (vectors and keywords fused in each) and alternated: each kind's passages come
    # in their ranking's order
    for kind in ("note", "header"):
        ranks = [h.rank for h in hits if h.kind == kind]
        assert ranks and None not in ranks and ranks == sorted(ranks)
    with pytest.raises(ValueError):
        retriever.query("   ")


def test_header_questions_are_answered_from_the_headers(store, retriever):
    """The header golden set's questions whose headers this small store holds: the hybrid search answers them with
    the declaring header's passage (the full-store figure is in docs/benchmarks/retrieval.md)."""
    from agent.retrieval.bench import GOLDEN_HEADERS

    held = set(GOLDEN["subset_headers"])
    qs = [{**q, "expected": [e for e in q["expected"] if e in held]} for q in load_golden(GOLDEN_HEADERS)["questions"]
          if held & set(q["expected"])]
    assert len(qs) >= 8
    recall, rows = recall_at_k(retriever, qs, k=5)
    assert recall >= 0.8, [r for r in rows if not r["rank"]]


def test_keyword_terms_and_progress_of_a_build(built):
    from agent.retrieval.hybrid import tokens

    t = tokens('asm("cp.async.bulk.tensor.2d.shared::cluster [%0]"); SM90_TMA_LOAD_MULTICAST makeTiledCopy')
    assert {"cp.async", "cp.async.bulk", "sm90_tma_load_multicast", "multicast", "tma", "tiled", "maketiledcopy"} <= set(t)
    _, lines = built
    assert "in 2 processes" in lines[0], lines
    embedded = [ln for ln in lines if ln.startswith("embedded ")]
    assert len(embedded) >= 2 and any("ETA" in ln and "% of the work" in ln for ln in embedded), lines


def test_loop_query_covers_its_facets(retriever):
    q = build_query((4096, 64, 8192), family="cute_sm80_multistage", params={"stages": 3},
                    bottleneck="smem bank conflicts")
    hits = retriever.query(q, k=5, token_budget=1500)
    sources = {h.source for h in hits}
    assert len(hits) == 5
    assert "retrieval_corpus/smem-swizzle-bank-conflicts.md" in sources or \
        "retrieval_corpus/ncu-reading-memory-hierarchy.md" in sources
    assert sources & {"retrieval_corpus/split-k.md", "retrieval_corpus/stream-k.md",
                      "retrieval_corpus/small-gemm-launch-latency.md", "retrieval_corpus/b-operand-layout-choice.md",
                      "retrieval_corpus/tile-size-wave-quantization.md"}


@pytest.mark.slow
def test_store_reopens_in_a_new_process(store):
    # Also opened with plain chromadb and no embedding function: the persisted config names the registered class.
    code = ("import json, sys, chromadb; from agent.retrieval import Retriever; "
            "from agent.retrieval.store import COLLECTION; "
            "col = chromadb.PersistentClient(sys.argv[1]).get_collection(COLLECTION); "
            "ef = col.configuration['embedding_function']; "
            "assert type(ef).__name__ == 'MiniLMEmbeddingFunction', type(ef); "
            "raw = col.query(query_texts=['ldmatrix x4 lane addresses'], n_results=3)['metadatas'][0]; "
            "assert 'retrieval_corpus/ldmatrix-fragments.md' in [m['source'] for m in raw], raw; "
            "hits = Retriever(sys.argv[1]).query('ldmatrix x4 lane addresses', k=3); "
            "print(json.dumps([[h.source, h.kind] for h in hits]))")
    out = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, env=ENV,
                         timeout=180, cwd=REPO)
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout.strip().splitlines()[-1])
    assert ["retrieval_corpus/ldmatrix-fragments.md", "note"] in hits
    cli = subprocess.run([sys.executable, "-m", "agent.cli", "corpus", "query", "TMA tensor map stride alignment",
                          "-k", "3", "--store", str(store)], capture_output=True, text=True, env=ENV, timeout=180,
                         cwd=REPO)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith("[1] ") and "retrieval_corpus/hopper-tma.md" in cli.stdout
    st = subprocess.run([sys.executable, "-m", "agent.cli", "corpus", "stats", "--json", "--store", str(store)],
                        capture_output=True, text=True, env=ENV, timeout=180, cwd=REPO)
    assert st.returncode == 0, st.stderr
    info = json.loads(st.stdout)
    assert info["collection"] == COLLECTION and info["chunks"] == info["chunks_by_kind"]["note"] + \
        info["chunks_by_kind"]["header"] and info["sources"]["header_subset"] is True


def test_missing_store_says_how_to_rebuild(tmp_path):
    with pytest.raises(StoreError, match=r"no retrieval store at .*cudal2 corpus build"):
        Retriever(tmp_path / "nothing-here")
    out = subprocess.run([sys.executable, "-m", "agent.cli", "corpus", "query", "x", "--store",
                          str(tmp_path / "nothing-here")], capture_output=True, text=True, env=ENV, timeout=120,
                         cwd=REPO)
    assert out.returncode == 2 and "cudal2 corpus build" in out.stderr
    assert not (tmp_path / "nothing-here").exists()  # asking must not create an empty store


def test_corrupt_store_says_how_to_rebuild(store, tmp_path):
    bad = tmp_path / "corrupt"
    shutil.copytree(store, bad)
    (bad / "chroma.sqlite3").write_bytes(b"this is not a sqlite database" * 100)
    with pytest.raises(StoreError, match=r"corrupt or unreadable.*cudal2 corpus build --fresh"):
        Retriever(bad)
    out = subprocess.run([sys.executable, "-m", "agent.cli", "corpus", "stats", "--store", str(bad)],
                         capture_output=True, text=True, env=ENV, timeout=120, cwd=REPO)
    assert out.returncode == 2 and "cudal2 corpus build --fresh" in out.stderr


def _write_notes(d: Path, pages: dict[str, str]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, body in pages.items():
        (d / name).write_text(body)


def test_incremental_rebuild_embeds_only_changes(tmp_path):
    notes, path = tmp_path / "notes", tmp_path / "store"
    pages = {f"p{i}.md": f"# Page {i}\n\nFact number {i} about tile shapes and pipelines.\n" for i in range(4)}
    _write_notes(notes, pages)
    first = build(store=path, notes=notes, include_headers=False)
    assert (first.chunks, first.embedded, first.deleted) == (4, 4, 0)
    again = build(store=path, notes=notes, include_headers=False)
    assert (again.embedded, again.deleted, again.files_rechunked) == (0, 0, 0)
    (notes / "p0.md").write_text("# Page 0\n\nA changed fact about swizzles.\n")
    (notes / "p3.md").unlink()
    _write_notes(notes, {"p9.md": "# Page 9\n\nA new fact about epilogues.\n"})
    third = build(store=path, notes=notes, include_headers=False)
    assert (third.chunks, third.embedded, third.deleted, third.files_rechunked) == (4, 2, 2, 2)
    hits = Retriever(path).query("swizzles", k=4)
    assert {h.source for h in hits} == {"retrieval_corpus/p0.md", "retrieval_corpus/p1.md", "retrieval_corpus/p2.md",
                                        "retrieval_corpus/p9.md"}
    assert any("changed fact" in h.text for h in hits) and not any("Fact number 0" in h.text for h in hits)
    # the manifest is only a shortcut: without it nothing is re-embedded either
    for m in path.glob("cudal2_manifest_v*.json"):
        m.unlink()
    fourth = build(store=path, notes=notes, include_headers=False)
    assert (fourth.embedded, fourth.deleted, fourth.files_rechunked) == (0, 0, 4)


@pytest.mark.slow
def test_cli_build_with_extra_dir(tmp_path):
    notes, extra, path = tmp_path / "notes", tmp_path / "mine", tmp_path / "store"
    _write_notes(notes, {"a.md": "# About occupancy\n\nRegisters limit blocks per SM.\n"})
    _write_notes(extra, {"tricks.md": "# My epilogue trick\n\nStore C with 16-byte vectors.\n"})
    (extra / "kern.cuh").write_text("// Computes one warp tile.\ntemplate <int N>\n__device__ void warp_tile_mma(float* acc) { }\n")
    (extra / "ignored.bin").write_bytes(b"\0\1")
    rep = build(store=path, notes=notes, include_headers=False, extra=extra)
    assert rep.by_kind == {"note": 1, "extra": 2}
    hits = Retriever(path).query("warp_tile_mma", k=3)
    assert hits[0].kind == "extra" and hits[0].source == "mine/kern.cuh" and hits[0].symbol == "warp_tile_mma"
    assert stats(path)["chunks_by_kind"] == {"note": 1, "extra": 2}
    out = subprocess.run([sys.executable, "-m", "agent.cli", "corpus", "build", "--no-headers", "--extra",
                          str(tmp_path / "missing"), "--store", str(path)], capture_output=True, text=True, env=ENV,
                         timeout=120, cwd=REPO)
    assert out.returncode == 2 and "is not a directory" in out.stderr
    out = subprocess.run([sys.executable, "-m", "agent.cli", "corpus", "build", "--cutlass", str(tmp_path),
                          "--store", str(path)], capture_output=True, text=True, env=ENV, timeout=120, cwd=REPO)
    assert out.returncode == 2 and "not a CUTLASS checkout" in out.stderr


def test_store_of_another_corpus_version_asks_for_a_rebuild(tmp_path):
    import chromadb

    from agent.retrieval.embedding import MiniLMEmbeddingFunction
    path = tmp_path / "old"
    chromadb.PersistentClient(str(path)).get_or_create_collection("cudal2_corpus_v0",
                                                                   embedding_function=MiniLMEmbeddingFunction())
    with pytest.raises(StoreError, match=r"no collection cudal2_corpus_v\d+ \(found: cudal2_corpus_v0\).*"
                                         r"`cudal2 corpus build --store "):
        Retriever(path)
