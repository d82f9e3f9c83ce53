"""The parent survives and classifies every way a worker can fail; the worker is replaced and the next request
is served. Real subprocesses speaking the real protocol (tests/fake_worker.py), no GPU needed."""
import sys
import time
from pathlib import Path

import pytest

from evaluator import record as R
from evaluator.pool import WorkerPool

FAKE = [sys.executable, str(Path(__file__).with_name("fake_worker.py"))]


@pytest.fixture
def pool():
    p = WorkerPool(gpus=[0], native_so="unused", worker_argv=FAKE)
    yield p
    p.close()


def pid_of(pool):
    return pool.run({"op": "ok"}, inactivity_timeout=20)["pid"]


@pytest.mark.parametrize("op,status,words", [
    ("segfault", R.CRASH, "SIGSEGV"),
    ("abort", R.CRASH, "SIGABRT"),
    ("poison", R.CRASH, "illegal address"),
])
def test_crashes_are_classified_and_worker_replaced(pool, op, status, words):
    before = pid_of(pool)
    res = pool.run({"op": op}, inactivity_timeout=20)
    assert res["status"] == status
    assert words in res["reason"]
    after = pid_of(pool)
    assert after != before, "a crashed worker must be replaced"


def test_abort_keeps_candidate_output_out_of_the_protocol(pool):
    res = pool.run({"op": "abort"}, inactivity_timeout=20)
    assert "about to abort" in res["reason"]  # the stderr tail is attached to the reason


def test_hang_is_a_timeout_and_the_worker_is_killed(pool):
    before = pid_of(pool)
    t0 = time.monotonic()
    res = pool.run({"op": "hang"}, inactivity_timeout=1.5)
    assert res["status"] == R.TIMEOUT
    assert time.monotonic() - t0 < 10
    assert pid_of(pool) != before


def test_progress_keeps_a_slow_worker_alive(pool):
    res = pool.run({"op": "slow_but_alive"}, inactivity_timeout=1.0)
    assert res["status"] == "ok"


def test_garbage_and_printf_do_not_break_the_protocol(pool):
    before = pid_of(pool)
    res = pool.run({"op": "noisy"}, inactivity_timeout=20)
    assert res["status"] == "ok" and res["pid"] == before


def test_worker_that_cannot_start_is_reported():
    p = WorkerPool(gpus=[0], native_so="unused", worker_argv=[sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(Exception, match="exited with code 3"):
        p.run({"op": "ok"}, inactivity_timeout=5)
    p.close()
