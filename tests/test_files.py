"""agent/files.py: files that the campaign's lanes (threads) and other processes use at once."""
from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from agent.files import to_wal


def _open_together(path, lanes: int) -> list[str]:
    """`lanes` threads open the fresh SQLite file `path` at the same moment, as the campaign's lanes open a new run's
    checkpoint file, and set up langgraph's SqliteSaver on it after `to_wal`; the errors they met."""
    errors: list[str] = []
    start = threading.Barrier(lanes)

    def lane() -> None:
        conn = sqlite3.connect(path, check_same_thread=False, timeout=120)
        try:
            start.wait()
            to_wal(conn)
            SqliteSaver(conn).setup()
        except sqlite3.OperationalError as e:
            errors.append(str(e))
        finally:
            conn.close()

    threads = [threading.Thread(target=lane) for _ in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_lanes_that_open_a_fresh_checkpoint_file_together_all_get_it(tmp_path):
    """SQLite refuses a fresh file's switch to WAL at once, without waiting out the busy timeout, where another
    connection is making it; SqliteSaver makes it on first use, so two lanes starting a new run together lost a shape
    ("database is locked": 1 campaign of 12 in the two-lane campaign test on a loaded 2-core machine, and 16-24 of 300
    fresh files raced by four connections). With `to_wal` first, every lane gets the file, in WAL mode."""
    errors = [e for i in range(150) for e in _open_together(tmp_path / f"{i}.sqlite", 4)]
    assert not errors, errors[:3]
    for i in (0, 149):
        conn = sqlite3.connect(tmp_path / f"{i}.sqlite")
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {"checkpoints"}
        conn.close()


def _writing(path) -> sqlite3.Connection:
    """A connection in the middle of making the fresh file `path`, as the first lane's SqliteSaver is."""
    conn = sqlite3.connect(path, timeout=5, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE t(x)")
    return conn


def test_without_the_switch_first_a_fresh_file_refuses_at_once(tmp_path):
    """The failure `to_wal` removes, made deterministic (the four-lane race hits it only some of the time): while
    another connection is making the fresh file, the switch fails at once, not after the 5 s busy timeout. (If a
    SQLite release ever waits there, this test fails and `to_wal` can go.)"""
    writer = _writing(tmp_path / "f.sqlite")
    other = sqlite3.connect(tmp_path / "f.sqlite", timeout=5, isolation_level=None)
    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        other.execute("PRAGMA journal_mode=WAL")
    assert time.monotonic() - t0 < 1.0
    writer.execute("COMMIT")
    other.close()
    writer.close()


def test_to_wal_waits_for_the_lane_making_the_file(tmp_path):
    """The same refusal under `to_wal`: it waits until the other connection is done, then switches."""
    writer = _writing(tmp_path / "f.sqlite")
    threading.Timer(0.3, lambda: writer.execute("COMMIT")).start()
    other = sqlite3.connect(tmp_path / "f.sqlite", timeout=5, isolation_level=None)
    t0 = time.monotonic()
    to_wal(other)
    assert time.monotonic() - t0 >= 0.25
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    writer.close()
