"""A campaign run's own bookkeeping beside its archive: the final measurements of each shape's best kernel, and
which kernel won each final mode's tournament."""
from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from agent.files import to_wal
from agent.secrets import scrub
from evaluator.record import EvalResult

RUN_RECORD = "campaign.json"  # the run's settings, shapes and model, written by the driver (_check_run_params)


def run_record(run_dir: Path) -> dict[str, Any]:
    """What a run folder recorded of its campaign (RUN_RECORD); {} for a folder without one. A file that is not JSON
    raises json.JSONDecodeError, for each caller to report in its own terms."""
    path = Path(run_dir) / RUN_RECORD
    return json.loads(path.read_text()) if path.is_file() else {}


# campaign.json's first "commits" entry for a run resumed after starts that predate that record
UNRECORDED = "unrecorded"


def recorded_commits(record: dict[str, Any]) -> tuple[list[str], bool]:
    """(the commits a run record names, whether earlier starts of the run recorded none)."""
    commits = record.get("commits", [])
    return [c for c in commits if c != UNRECORDED], UNRECORDED in commits


class CampaignDB:
    """runs/<run>/campaign.sqlite: the final measurements of each shape's best kernel in each mode, `rep` 0, 1, ...
    Each is its own evaluation (fresh operand buffers): one evaluation's CI covers its rounds only, and a big
    near-parity shape moved by up to 5% between evaluations (docs/benchmarks/data/sweeps/recheck_*)."""

    def __init__(self, path: Path):
        self.path = path
        with self._conn() as c:
            to_wal(c)
            c.execute("CREATE TABLE IF NOT EXISTS final_runs (gpu TEXT, acc TEXT, m INT, n INT, k INT, mode TEXT, "
                      "rep INT, variant_id INT, source_hash TEXT, result TEXT, created_at REAL, "
                      "PRIMARY KEY (gpu, acc, m, n, k, mode, source_hash, rep))")
            # runs made before repeats kept one final per mode in `finals`: it becomes repeat 0
            if c.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='finals'").fetchone():
                c.execute("INSERT OR IGNORE INTO final_runs SELECT gpu, acc, m, n, k, mode, 0, variant_id, "
                          "source_hash, result, created_at FROM finals")
                c.execute("DROP TABLE finals")
            c.execute("CREATE TABLE IF NOT EXISTS mode_winners (gpu TEXT, acc TEXT, m INT, n INT, k INT, mode TEXT, "
                      "variant_id INT, figures TEXT, created_at REAL, PRIMARY KEY (gpu, acc, m, n, k, mode))")
            # each mode tournament's whole evaluation (every player's round-by-round times, keyed by variant id):
            # the figures alone cannot tell a clear win from a tie that one round decided
            c.execute("CREATE TABLE IF NOT EXISTS mode_tournaments (gpu TEXT, acc TEXT, m INT, n INT, k INT, "
                      "mode TEXT, players TEXT, result TEXT, created_at REAL, PRIMARY KEY (gpu, acc, m, n, k, mode))")

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        c = sqlite3.connect(self.path, timeout=60)
        try:
            with c:
                yield c
        finally:
            c.close()

    def get_final(self, gpu, acc, shape, mode, source_hash, rep: int = 0) -> EvalResult | None:
        with self._conn() as c:
            r = c.execute("SELECT result FROM final_runs WHERE gpu=? AND acc=? AND m=? AND n=? AND k=? AND mode=? AND "
                          "source_hash=? AND rep=?", (gpu, acc, *shape, mode, source_hash, rep)).fetchone()
        return EvalResult.from_json(r[0]) if r else None

    def put_final(self, gpu, acc, shape, mode, variant_id, source_hash, res: EvalResult, rep: int = 0) -> None:
        with self._conn() as c:
            c.execute("INSERT OR REPLACE INTO final_runs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                      (gpu, acc, *shape, mode, rep, variant_id, source_hash, scrub(res.to_json()), time.time()))

    def get_mode_winner(self, gpu, acc, shape, mode) -> dict[str, Any] | None:
        """{"variant_id", "figures": {variant id: its figure in the mode's tournament}} or None (not played)."""
        with self._conn() as c:
            r = c.execute("SELECT variant_id, figures FROM mode_winners WHERE gpu=? AND acc=? AND m=? AND n=? AND k=? "
                          "AND mode=?", (gpu, acc, *shape, mode)).fetchone()
        return {"variant_id": r[0], "figures": {int(i): f for i, f in json.loads(r[1]).items()}} if r else None

    def put_mode_winner(self, gpu, acc, shape, mode, variant_id: int, figures: dict[int, float]) -> None:
        with self._conn() as c:
            c.execute("INSERT OR REPLACE INTO mode_winners VALUES (?,?,?,?,?,?,?,?,?)",
                      (gpu, acc, *shape, mode, variant_id, json.dumps({str(i): f for i, f in figures.items()}),
                       time.time()))

    def put_mode_tournament(self, gpu, acc, shape, mode, players: list[int], res: EvalResult) -> None:
        """`players`: the variant ids in the evaluation's order (the candidate first, then its rivals)."""
        with self._conn() as c:
            c.execute("INSERT OR REPLACE INTO mode_tournaments VALUES (?,?,?,?,?,?,?,?,?)",
                      (gpu, acc, *shape, mode, json.dumps(players), scrub(res.to_json()), time.time()))

    def get_mode_tournament(self, gpu, acc, shape, mode) -> tuple[list[int], EvalResult] | None:
        with self._conn() as c:
            r = c.execute("SELECT players, result FROM mode_tournaments WHERE gpu=? AND acc=? AND m=? AND n=? AND "
                          "k=? AND mode=?", (gpu, acc, *shape, mode)).fetchone()
        return (json.loads(r[0]), EvalResult.from_json(r[1])) if r else None

    def mode_winners(self) -> dict[tuple, dict[str, int]]:
        """(gpu, acc, shape) -> {mode: variant id} for every mode whose tournament was played."""
        with self._conn() as c:
            rows = c.execute("SELECT gpu, acc, m, n, k, mode, variant_id FROM mode_winners").fetchall()
        out: dict[tuple, dict[str, int]] = {}
        for r in rows:
            out.setdefault((r[0], r[1], (r[2], r[3], r[4])), {})[r[5]] = r[6]
        return out

    def finals(self) -> list[dict[str, Any]]:
        with self._conn() as c:
            rows = c.execute("SELECT gpu, acc, m, n, k, mode, variant_id, source_hash, result, rep FROM final_runs "
                             "ORDER BY rep").fetchall()
        return [{"gpu": r[0], "acc": r[1], "shape": (r[2], r[3], r[4]), "mode": r[5], "variant_id": r[6],
                 "source_hash": r[7], "result": EvalResult.from_json(r[8]), "rep": r[9]} for r in rows]
