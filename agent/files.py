"""Files that several threads or processes use at once: writing one so that readers never see half of it, and
putting a SQLite database in WAL mode."""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    """Writes `text` to a temporary file beside `path`, then renames it over `path`. The temporary name carries the
    process and the thread: the campaign's lanes are threads of one process, and two of them storing the same kernel
    (a source that does not depend on the shape, proposed for two shapes at once) shared one name, so the second
    rename found its file gone."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def to_wal(conn: sqlite3.Connection, wait_s: float = 120.0) -> None:
    """Puts the database of `conn` in WAL mode (readers and one writer at once). A fresh file's switch needs the file
    to itself, and SQLite refuses it at once ("database is locked") instead of waiting out the busy timeout: the
    campaign's lanes opening a new run's checkpoint file together failed a shape that way (langgraph's SqliteSaver
    sets the mode on first use). So the switch is retried until `wait_s`; once made it stays with the file, and the
    pragma is a no-op from then on."""
    deadline, delay = time.monotonic() + wait_s, 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(0.5, 2 * delay)
