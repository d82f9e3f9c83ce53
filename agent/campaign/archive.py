"""The kernel archive: every evaluated variant per (GPU model, accumulator, M, N, K), in SQLite, with its source.

Layout: `<dir>/archive.sqlite` (any name you pass) and `<dir>/kernels/<sha256>.cu` beside it. A variant is keyed
by the sha256 of its source text within its (gpu, acc, shape): adding the same source twice returns the first id,
so the loop looks up a hash before evaluating and never evaluates the same kernel twice for the same key.
The database runs in WAL mode: one writer and any number of readers (reports, `inspect`) at once.

Stable interface (the campaign, export/import, inspect and report build on it; see docs/loop.md):
    Archive(db_path)
    add(run, gpu, acc, shape, source, proposer, result, family=None, params=None, step=None, parent=None) -> id
    get(id) -> Variant | None
    find_by_hash(gpu, acc, shape, source_hash) -> Variant | None
    history(gpu, acc, shape) -> list[Variant]                     # oldest first
    best(gpu, acc, shape, baseline="cublaslt-autotune-max") -> Variant | None
    ranked(gpu, acc, shape, baseline=...) -> list[Variant]          # by the geometric mean of all measurements
    add_remeasure(id, result); remeasures(id) -> list[EvalResult]  # later measurements of a variant
    add_tournament(gpu, acc, shape, figures, result); tournament(gpu, acc, shape) -> dict | None  # leaders timed
                                                                   # head to head in one evaluation (ranked() obeys)
    neighbours(gpu, acc, shape, k=4) -> list[Variant]              # best of the nearest other shapes (log2 space)
    shapes() -> list[ShapeKey]                                     # (gpu, acc, (m, n, k)) with any variant
    set_ncu(id, ncu)                                               # attach a profile later
    source(variant_or_id) -> str
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from evaluator.record import NOT_ABOUT_THE_KERNEL, EvalResult
from agent.files import replace_text, to_wal
from agent.secrets import scrub

DEFAULT_BASELINE = "cublaslt-autotune-max"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS variants (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run TEXT NOT NULL,
    gpu TEXT NOT NULL,
    acc TEXT NOT NULL,
    m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
    source_hash TEXT NOT NULL,
    code_length INTEGER NOT NULL,
    proposer TEXT NOT NULL,
    family TEXT,
    params TEXT,
    step INTEGER,
    parent INTEGER,
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    speedup REAL,
    reward REAL NOT NULL,
    result TEXT NOT NULL,
    ncu TEXT,
    created_at REAL NOT NULL,
    UNIQUE (gpu, acc, m, n, k, source_hash)
);
CREATE INDEX IF NOT EXISTS variants_key ON variants (gpu, acc, m, n, k, status, speedup);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS remeasures (
    variant_id INTEGER NOT NULL REFERENCES variants(id),
    result TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS remeasures_variant ON remeasures (variant_id);
CREATE TABLE IF NOT EXISTS tournaments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    gpu TEXT NOT NULL,
    acc TEXT NOT NULL,
    m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
    baseline TEXT NOT NULL,
    figures TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tournaments_key ON tournaments (gpu, acc, m, n, k);
"""
SCHEMA_VERSION = "1"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


class ShapeKey(NamedTuple):
    gpu: str
    acc: str
    shape: tuple[int, int, int]


@dataclass
class Variant:
    id: int
    run: str
    gpu: str
    acc: str
    shape: tuple[int, int, int]
    source_hash: str
    code_length: int
    proposer: str
    family: str | None
    params: dict[str, Any] | None
    step: int | None
    parent: int | None
    status: str
    reason: str
    speedup: float | None  # against DEFAULT_BASELINE, mean over rounds
    reward: float
    result: EvalResult
    ncu: dict[str, Any] | None
    created_at: float
    kernel_path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    summary: str = ""  # the model's one-line description (its reply's Summary line)

    def read_source(self) -> str:
        return Path(self.kernel_path).read_text()

    def speedups(self) -> dict[str, float | None]:
        """Speedup against every baseline the result has; NN/TN pairs folded into '<stem>-max'."""
        out: dict[str, float | None] = {}
        names = list(self.result.baselines)
        for name in names:
            if name.endswith(("-NN", "-TN")):
                stem = name[:-3]
                out[f"{stem}-max"] = self.result.speedup(f"{stem}-max")
            else:
                out[name] = self.result.speedup(name)
        return out

    def resources(self) -> dict[str, Any]:
        c = self.result.compile
        if c is None:
            return {}
        return {"registers": c.registers, "smem_bytes": c.smem_bytes, "spill_stores": c.spill_stores,
                "spill_loads": c.spill_loads, "stack_bytes": c.stack_bytes}

    def as_history(self, with_source: bool = False) -> dict[str, Any]:
        """The plain-dict view the proposers and the built-in policy read."""
        ncu = self.ncu or self.result.ncu
        d = {"id": self.id, "step": self.step, "proposer": self.proposer, "family": self.family,
             "params": self.params, "parent": self.parent, "status": self.status, "reason": self.reason,
             "speedup": self.speedup, "speedups": self.speedups(), "resources": self.resources(), "ncu": ncu,
             "bottleneck": (ncu or {}).get("bottleneck"), "source_hash": self.source_hash,
             "shape": list(self.shape), "summary": self.summary}
        if with_source:
            d["source"] = self.read_source()
        return d


class Archive:
    def __init__(self, db_path: str | os.PathLike):
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.kernels_dir = self.db_path.parent / "kernels"
        self.kernels_dir.mkdir(exist_ok=True)
        with self._conn() as c:
            to_wal(c)
            c.executescript(_SCHEMA)
            c.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            if "summary" not in {r["name"] for r in c.execute("PRAGMA table_info(variants)")}:
                # the model's one-line description of its variant (archives made before it have none)
                c.execute("ALTER TABLE variants ADD COLUMN summary TEXT")

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        # A connection per operation: safe across the graph's worker threads and other processes.
        c = sqlite3.connect(self.db_path, timeout=60)
        c.row_factory = sqlite3.Row
        try:
            c.execute("PRAGMA busy_timeout=60000")
            with c:
                yield c
        finally:
            c.close()

    # ---- writing ----
    def kernel_path(self, h: str) -> Path:
        return self.kernels_dir / f"{h}.cu"

    def store_source(self, source: str) -> str:
        """Keep a kernel's source in the kernels folder (once per content); returns its hash."""
        return self._store_source(source)

    def _store_source(self, source: str) -> str:
        h = source_hash(source)
        p = self.kernel_path(h)
        if not p.exists():
            replace_text(p, source)
        return h

    def add(self, run: str, gpu: str, acc: str, shape, source: str, proposer: str, result: EvalResult,
            family: str | None = None, params: dict[str, Any] | None = None, step: int | None = None,
            parent: int | None = None, summary: str = "") -> int:
        """Archive one evaluated variant; returns its id (the existing one when the source is already there)."""
        m, n, k = (int(x) for x in shape)
        h = self._store_source(source)
        speedup = result.speedup(DEFAULT_BASELINE) if result.ok else None
        result_json = scrub(result.to_json())  # compile logs may echo environment; keys never land on disk
        with self._conn() as c:
            c.execute(
                "INSERT OR IGNORE INTO variants (run, gpu, acc, m, n, k, source_hash, code_length, proposer, family,"
                " params, step, parent, status, reason, speedup, reward, result, ncu, created_at, summary)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run, gpu, acc, m, n, k, h, len(source), proposer, family,
                 json.dumps(params) if params is not None else None, step, parent, result.status,
                 scrub(result.reason or ""), speedup, result.reward(DEFAULT_BASELINE), result_json,
                 json.dumps(result.ncu) if result.ncu is not None else None, time.time(), scrub(summary or "")))
            row = c.execute("SELECT id FROM variants WHERE gpu=? AND acc=? AND m=? AND n=? AND k=? AND source_hash=?",
                            (gpu, acc, m, n, k, h)).fetchone()
        return int(row["id"])

    def add_remeasure(self, variant_id: int, result: EvalResult) -> None:
        """Another evaluation of an archived variant (same source, same mode): ranked() pools it with the first."""
        with self._conn() as c:
            c.execute("INSERT INTO remeasures VALUES (?,?,?)", (variant_id, scrub(result.to_json()), time.time()))

    def add_tournament(self, gpu: str, acc: str, shape, figures: dict[int, float], result: EvalResult,
                       baseline: str = DEFAULT_BASELINE) -> None:
        """Leaders timed in the same rounds of one evaluation: `figures` maps variant id -> its median per-round speedup
        over `baseline` (EvalResult.head_to_head). The latest tournament of a key orders ranked()'s head."""
        m, n, k = (int(x) for x in shape)
        order = sorted(((int(i), float(f)) for i, f in figures.items()), key=lambda x: (-x[1], x[0]))
        with self._conn() as c:
            c.execute("INSERT INTO tournaments (gpu, acc, m, n, k, baseline, figures, result, created_at) "
                      "VALUES (?,?,?,?,?,?,?,?,?)", (gpu, acc, m, n, k, baseline, json.dumps(order),
                                                    scrub(result.to_json()), time.time()))

    def tournament(self, gpu: str, acc: str, shape, baseline: str = DEFAULT_BASELINE) -> dict[str, Any] | None:
        """The latest tournament of a key: {"figures": [(variant id, figure), ...] fastest first, "result",
        "created_at"}."""
        m, n, k = (int(x) for x in shape)
        with self._conn() as c:
            r = c.execute("SELECT * FROM tournaments WHERE gpu=? AND acc=? AND m=? AND n=? AND k=? AND baseline=? "
                          "ORDER BY id DESC LIMIT 1", (gpu, acc, m, n, k, baseline)).fetchone()
        if r is None:
            return None
        return {"figures": [(int(i), f) for i, f in json.loads(r["figures"])],
                "result": EvalResult.from_json(r["result"]), "created_at": r["created_at"]}

    def remeasures(self, variant_id: int) -> list[EvalResult]:
        return self._remeasures([variant_id]).get(variant_id, [])

    def _remeasures(self, ids: list[int]) -> dict[int, list[EvalResult]]:
        out: dict[int, list[EvalResult]] = {}
        if not ids:
            return out
        with self._conn() as c:
            rows = c.execute(f"SELECT variant_id, result FROM remeasures WHERE variant_id IN "
                             f"({','.join('?' * len(ids))}) ORDER BY rowid", ids).fetchall()
        for r in rows:
            out.setdefault(int(r["variant_id"]), []).append(EvalResult.from_json(r["result"]))
        return out

    def set_ncu(self, variant_id: int, ncu: dict[str, Any] | None) -> None:
        with self._conn() as c:
            c.execute("UPDATE variants SET ncu=? WHERE id=?", (json.dumps(ncu) if ncu is not None else None,
                                                               variant_id))

    # ---- reading ----
    def _variant(self, r: sqlite3.Row) -> Variant:
        return Variant(
            id=r["id"], run=r["run"], gpu=r["gpu"], acc=r["acc"], shape=(r["m"], r["n"], r["k"]),
            source_hash=r["source_hash"], code_length=r["code_length"], proposer=r["proposer"], family=r["family"],
            params=json.loads(r["params"]) if r["params"] else None, step=r["step"], parent=r["parent"],
            status=r["status"], reason=r["reason"], speedup=r["speedup"], reward=r["reward"],
            result=EvalResult.from_json(r["result"]), ncu=json.loads(r["ncu"]) if r["ncu"] else None,
            created_at=r["created_at"], kernel_path=str(self.kernel_path(r["source_hash"])),
            summary=r["summary"] or "")

    def get(self, variant_id: int) -> Variant | None:
        with self._conn() as c:
            r = c.execute("SELECT * FROM variants WHERE id=?", (variant_id,)).fetchone()
        return self._variant(r) if r else None

    def source(self, v: "Variant | int") -> str:
        if isinstance(v, int):
            got = self.get(v)
            if got is None:
                raise KeyError(f"no variant #{v} in {self.db_path}")
            v = got
        return v.read_source()

    def find_by_hash(self, gpu: str, acc: str, shape, source_hash: str) -> Variant | None:
        m, n, k = (int(x) for x in shape)
        with self._conn() as c:
            r = c.execute("SELECT * FROM variants WHERE gpu=? AND acc=? AND m=? AND n=? AND k=? AND source_hash=?",
                          (gpu, acc, m, n, k, source_hash)).fetchone()
        return self._variant(r) if r else None

    def history(self, gpu: str, acc: str, shape) -> list[Variant]:
        m, n, k = (int(x) for x in shape)
        with self._conn() as c:
            rows = c.execute("SELECT * FROM variants WHERE gpu=? AND acc=? AND m=? AND n=? AND k=? ORDER BY id",
                             (gpu, acc, m, n, k)).fetchall()
        return [self._variant(r) for r in rows]

    def best(self, gpu: str, acc: str, shape, baseline: str = DEFAULT_BASELINE) -> Variant | None:
        ranked = self.ranked(gpu, acc, shape, baseline)
        return ranked[0] if ranked else None

    def ranked(self, gpu: str, acc: str, shape, baseline: str = DEFAULT_BASELINE) -> list[Variant]:
        """Correct, timed variants, fastest first against `baseline` (ties: the earlier one first). A variant measured
        more than once ranks by the geometric mean of its speedups (`extra["pooled_speedup"]`, `extra["measurements"]`);
        one that failed a check when re-evaluated is dropped. Where the latest tournament played the variant that ranks
        first that way, its players lead in the tournament's order (`extra["tournament"]`: each one's figure): they
        were timed in the same rounds, which separate them better than separate evaluations do. A variant that
        outranks every player and did not play sets the tournament aside until another is played."""
        ok = [v for v in self.history(gpu, acc, shape) if v.status == "ok"]
        later = self._remeasures([v.id for v in ok])
        scored = []
        for v in ok:
            again = later.get(v.id, [])
            if any(not r.ok for r in again if r.status not in NOT_ABOUT_THE_KERNEL):
                continue
            first = v.result.speedup(baseline)
            if not first:
                continue
            sp = [first, *(x for x in (r.speedup(baseline) for r in again if r.ok) if x)]
            v.extra["pooled_speedup"] = statistics.geometric_mean(sp)
            v.extra["measurements"] = len(sp)
            scored.append((v.extra["pooled_speedup"], v))
        scored.sort(key=lambda sv: (-sv[0], sv[1].id))
        out = [v for _, v in scored]
        t = self.tournament(gpu, acc, shape, baseline) if out else None
        if t is not None:
            figure = dict(t["figures"])
            if out[0].id in figure:
                players = sorted((v for v in out if v.id in figure), key=lambda v: (-figure[v.id], v.id))
                for v in players:
                    v.extra["tournament"] = figure[v.id]
                out = players + [v for v in out if v.id not in figure]
        return out

    def shapes(self) -> list[ShapeKey]:
        with self._conn() as c:
            rows = c.execute("SELECT DISTINCT gpu, acc, m, n, k FROM variants ORDER BY gpu, acc, m, n, k").fetchall()
        return [ShapeKey(r["gpu"], r["acc"], (r["m"], r["n"], r["k"])) for r in rows]

    def neighbours(self, gpu: str, acc: str, shape, k: int = 4) -> list[Variant]:
        """The best variant of each of the k nearest other shapes (Euclidean distance of log2 M, N, K)."""
        me = [math.log2(int(x)) for x in shape]
        others = [s.shape for s in self.shapes() if s.gpu == gpu and s.acc == acc and tuple(s.shape) != tuple(shape)]
        others.sort(key=lambda s: (math.dist(me, [math.log2(x) for x in s]), s))
        out = []
        for s in others:
            b = self.best(gpu, acc, s)
            if b is not None:
                out.append(b)
            if len(out) >= k:
                break
        return out

    def count(self) -> int:
        with self._conn() as c:
            return int(c.execute("SELECT COUNT(*) FROM variants").fetchone()[0])
