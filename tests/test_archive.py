"""The SQLite kernel archive, the JSONL transcript and secret scrubbing."""
from __future__ import annotations

import json
import multiprocessing as mp
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import RecordedEvaluator, kernel_source, scaled_result  # noqa: E402

from agent.campaign.archive import Archive, ShapeKey, source_hash  # noqa: E402
from agent.secrets import REDACTED, register_env, scrub, scrub_obj  # noqa: E402
from agent.transcript import Transcript  # noqa: E402
from evaluator.record import EvalResult  # noqa: E402

EV = RecordedEvaluator()


def add(a: Archive, tag: str, shape=(4096, 4096, 4096), gpu="H200", acc="fp32", **kw) -> int:
    src = kernel_source(tag)
    return a.add("run1", gpu, acc, shape, src, "builtin", EV(src, shape), **kw)


def test_add_find_history_best(tmp_path):
    a = Archive(tmp_path / "arch" / "archive.sqlite")
    ids = [add(a, t, step=i) for i, t in enumerate(["naive", "broken", "tile128", "wgmma", "wrong"])]
    assert ids == [1, 2, 3, 4, 5]
    # the same source again: the same id, no second row, no second file
    assert add(a, "tile128") == 3 and a.count() == 5
    src = kernel_source("tile128")
    v = a.find_by_hash("H200", "fp32", (4096, 4096, 4096), source_hash(src))
    assert v.id == 3 and v.read_source() == src and Path(v.kernel_path).name == f"{source_hash(src)}.cu"
    assert a.find_by_hash("H100", "fp32", (4096, 4096, 4096), source_hash(src)) is None  # keyed per gpu
    assert a.find_by_hash("H200", "fp16", (4096, 4096, 4096), source_hash(src)) is None  # ... and accumulator
    hist = a.history("H200", "fp32", (4096, 4096, 4096))
    assert [h.status for h in hist] == ["ok", "compile_error", "ok", "ok", "incorrect"]
    assert isinstance(hist[0].result, EvalResult) and hist[1].reason.startswith("nvcc: error")
    assert hist[4].speedup is None and hist[4].reward == -1.0
    best = a.best("H200", "fp32", (4096, 4096, 4096))
    assert best.id == 4 and best.speedup == pytest.approx(1.0886, abs=1e-4)
    # against another baseline the ranking is computed from the stored result
    assert a.best("H200", "fp32", (4096, 4096, 4096), baseline="cublas-NN").id == 4
    assert [v.id for v in a.ranked("H200", "fp32", (4096, 4096, 4096))] == [4, 3, 1]
    h = best.as_history(with_source=True)
    assert h["speedups"]["cublaslt-autotune-max"] == pytest.approx(1.0886, abs=1e-4)
    assert set(h["speedups"]) == {"cublas-max", "cublaslt-heuristic-max", "cublaslt-autotune-max"}
    assert h["resources"]["registers"] == 168 and "hgemm" in h["source"]
    json.dumps(h)  # plain data
    # profiles attach later
    a.set_ncu(3, {"bottleneck": "memory", "dram": 80.0})
    assert a.get(3).as_history()["bottleneck"] == "memory"
    assert a.best("H200", "fp32", (1, 2, 3)) is None and a.get(999) is None
    with pytest.raises(KeyError):
        a.source(999)


def test_remeasures_pool_into_the_ranking(tmp_path):
    """A leader whose second measurement is slower falls behind one that held up; one that fails a check when
    re-evaluated leaves the ranking; the first measurement itself is never rewritten."""
    a = Archive(tmp_path / "archive.sqlite")
    shape = (4096, 4096, 4096)
    for t in ["naive", "tile128", "wgmma"]:
        add(a, t)
    assert [v.id for v in a.ranked("H200", "fp32", shape)] == [3, 2, 1]
    first = {v.id: v.speedup for v in a.ranked("H200", "fp32", shape)}
    assert all(v.extra["measurements"] == 1 for v in a.ranked("H200", "fp32", shape))
    a.add_remeasure(3, scaled_result(a.get(3).result, 0.4))
    a.add_remeasure(2, scaled_result(a.get(2).result, 1.0))
    ranked = a.ranked("H200", "fp32", shape)
    assert [v.id for v in ranked][:2] == [2, 3]
    lead = ranked[1]
    assert lead.extra["measurements"] == 2
    assert lead.extra["pooled_speedup"] == pytest.approx(first[3] * 0.4 ** 0.5, rel=1e-6)
    assert a.get(3).speedup == first[3] and len(a.remeasures(3)) == 1 and a.remeasures(1) == []
    assert a.best("H200", "fp32", shape).id == 2
    broken = EV(kernel_source("wrong"), shape)
    assert broken.status == "incorrect"
    a.add_remeasure(2, broken)
    assert [v.id for v in a.ranked("H200", "fp32", shape)] == [3, 1]


def test_the_latest_tournament_orders_the_ranking_until_a_variant_that_did_not_play_leads(tmp_path):
    a = Archive(tmp_path / "archive.sqlite")
    shape = (4096, 4096, 4096)
    for t in ["naive", "tile128", "wgmma"]:
        add(a, t)
    assert [v.id for v in a.ranked("H200", "fp32", shape)] == [3, 2, 1] and a.tournament("H200", "fp32", shape) is None
    played = EV(kernel_source("wgmma"), shape)
    a.add_tournament("H200", "fp32", shape, {3: 1.001, 2: 1.012}, played)
    ranked = a.ranked("H200", "fp32", shape)
    assert [v.id for v in ranked] == [2, 3, 1] and a.best("H200", "fp32", shape).id == 2
    assert [v.extra.get("tournament") for v in ranked] == [1.012, 1.001, None]
    t = a.tournament("H200", "fp32", shape)
    assert t["figures"] == [(2, 1.012), (3, 1.001)] and t["result"] == played
    assert a.tournament("H200", "fp32", shape, baseline="cublas-max") is None  # figures are against one baseline
    assert [v.id for v in a.ranked("H200", "fp32", shape, baseline="cublas-NN")] == [3, 2, 1]
    # a later tournament replaces it
    a.add_tournament("H200", "fp32", shape, {3: 1.02, 2: 1.01, 1: 0.5}, played)
    assert [v.id for v in a.ranked("H200", "fp32", shape)] == [3, 2, 1]
    # a player that fails a check afterwards leaves; one that never played and outranks every player sets it aside
    a.add_remeasure(3, EV(kernel_source("wrong"), shape))
    assert [v.id for v in a.ranked("H200", "fp32", shape)] == [2, 1]
    fast = a.add("run1", "H200", "fp32", shape, kernel_source("wgmma", extra="// faster\n"), "builtin",
                 scaled_result(played, 1.5))
    assert [v.id for v in a.ranked("H200", "fp32", shape)] == [fast, 2, 1]
    assert "tournament" not in a.best("H200", "fp32", shape).extra


def test_shapes_and_neighbours_in_log2_space(tmp_path):
    a = Archive(tmp_path / "a.sqlite")
    add(a, "tile128", shape=(4096, 4096, 4096))
    add(a, "wgmma", shape=(4096, 4096, 2048))
    add(a, "pipelined", shape=(4096, 4096, 2048))
    add(a, "naive", shape=(512, 512, 512))
    add(a, "broken", shape=(8192, 8192, 8192))  # no correct variant: not a neighbour
    add(a, "tile128x256", shape=(4096, 4096, 4096), gpu="H100")  # other GPU: not a neighbour
    assert a.shapes() == [ShapeKey("H100", "fp32", (4096, 4096, 4096)), ShapeKey("H200", "fp32", (512, 512, 512)),
                          ShapeKey("H200", "fp32", (4096, 4096, 2048)), ShapeKey("H200", "fp32", (4096, 4096, 4096)),
                          ShapeKey("H200", "fp32", (8192, 8192, 8192))]
    nb = a.neighbours("H200", "fp32", (4096, 4096, 2500), k=4)
    assert [v.shape for v in nb] == [(4096, 4096, 2048), (4096, 4096, 4096), (512, 512, 512)]
    assert "variant: wgmma" in nb[0].read_source()  # the best of that shape
    assert [v.shape for v in a.neighbours("H200", "fp32", (4096, 4096, 4096), k=1)] == [(4096, 4096, 2048)]


def _reader(db: str, q) -> None:
    a = Archive(db)
    seen = 0
    for _ in range(200):
        seen = max(seen, len(a.history("H200", "fp32", (256, 256, 256))))
    q.put(seen)


def test_one_writer_and_concurrent_readers(tmp_path):
    db = tmp_path / "wal.sqlite"
    a = Archive(db)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    readers = [ctx.Process(target=_reader, args=(str(db), q)) for _ in range(1)]
    for r in readers:
        r.start()
    for i in range(40):
        add(a, f"v{i}", shape=(256, 256, 256))
    for r in readers:
        r.join(60)
        assert r.exitcode == 0
    assert all(0 <= q.get(timeout=5) <= 40 for _ in readers)
    assert len(a.history("H200", "fp32", (256, 256, 256))) == 40
    with __import__("sqlite3").connect(db) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_transcript_events_and_scrubbing(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_VLLM_API_KEY", "supersecretvalue-123456")
    monkeypatch.setenv("ODDLY_NAMED", "hunter2hunter2")
    register_env("ODDLY_NAMED")
    t = Transcript(tmp_path / "t" / "transcript.jsonl", run="r")
    t.append(thread="H200|fp32|1x2x3", shape=(1, 2, 3), step=0, node="propose",
             input={"prompt": "hello", "headers": {"Authorization": "Bearer supersecretvalue-123456"}},
             output={"error": "HTTP 401: Incorrect API key provided: sk-proj-abcdefghijklmnop0123456789 "
                              "(hunter2hunter2)"})
    t.append(thread="H200|fp32|1x2x3", shape=(1, 2, 3), step=1, node="decide", output={"stop_reason": None})
    with open(t.path, "a") as f:
        f.write('{"torn": ')  # a kill in the middle of a write
    raw = t.path.read_text()
    assert "supersecretvalue" not in raw and "sk-proj-abc" not in raw and "hunter2" not in raw
    evs = list(t.read())
    assert len(evs) == 2 and evs[0]["run"] == "r" and evs[0]["shape"] == [1, 2, 3] and evs[0]["ts"] > 0
    assert set(evs[0]) == {"ts", "run", "thread", "shape", "step", "node", "input", "output"}
    assert [e["node"] for e in t.read(node="decide")] == ["decide"]
    assert REDACTED in evs[0]["output"]["error"]


def test_scrub_patterns_and_what_it_leaves_alone():
    assert scrub("key sk-ant-api03-AbCdEf012345_xyz here") == f"key {REDACTED} here"
    assert scrub("token hf_abcdefghijklmnopqrstuvwx") == f"token {REDACTED}"
    assert scrub("AKIAABCDEFGHIJKLMNOP") == REDACTED
    assert scrub('{"api_key": "abcdefgh12345"}') == '{"api_key": "' + REDACTED + '"}'
    assert scrub("use sk-shortish", extra=["sk-shortish"]) == f"use {REDACTED}"
    # words that merely contain a key prefix are left alone
    assert scrub("warp-mask-lane-index-0123456789abcdef shf_abcdefghijklmnopqrstuvwxyz") == \
        "warp-mask-lane-index-0123456789abcdef shf_abcdefghijklmnopqrstuvwxyz"
    code = kernel_source("t")  # kernels, shapes and numbers pass through untouched
    assert scrub(code) == code and scrub("max_tokens=8192 speedup 1.23x") == "max_tokens=8192 speedup 1.23x"
    assert scrub_obj({"a": ["Bearer abcdefghijklmnop"], "n": 3}) == {"a": [f"Bearer {REDACTED}"], "n": 3}


def test_archive_scrubs_reasons_but_keeps_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-0123456789-secret")
    a = Archive(tmp_path / "a.sqlite")
    src = kernel_source("x")
    r = EvalResult(status="compile_error", reason="nvcc failed with env SOME_SERVICE_TOKEN=tok-0123456789-secret",
                   shape=(64, 64, 64))
    vid = a.add("r", "H200", "fp32", (64, 64, 64), src, "m", r)
    assert "tok-0123456789" not in a.get(vid).reason and a.source(vid) == src
    assert b"tok-0123456789" not in (tmp_path / "a.sqlite").read_bytes()


def test_lanes_storing_one_kernel_at_once_all_succeed(tmp_path):
    """The campaign's lanes are threads of one process: two shapes proposed the same shape-independent hopper_raw
    source at once, and the second rename of a temporary file they shared by name failed that shape."""
    import threading

    archive = Archive(tmp_path / "archive.sqlite")
    source = kernel_source("shared")
    start, errors = threading.Barrier(16), []

    def store():
        start.wait()
        try:
            for _ in range(20):
                archive.store_source(source)
        except OSError as e:  # noqa: PERF203
            errors.append(e)

    threads = [threading.Thread(target=store) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    h = source_hash(source)
    assert archive.kernel_path(h).read_text() == source
    assert sorted(p.name for p in archive.kernels_dir.iterdir()) == [f"{h}.cu"]  # no temporary file left behind
