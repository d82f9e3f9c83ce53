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


def test_gpu_time_counts_the_request_not_the_wait_for_a_busy_gpu(pool):
    """Two requests for one GPU: the second waits for the first, and its held time leaves the wait out (a campaign
    runs several shapes' lanes over one GPU; their wall times summed several times the machine's time)."""
    import threading

    pid_of(pool)  # a started worker, so neither request pays for the start
    out, began = {}, time.monotonic()

    def ask(name):
        out[name] = (pool.run({"op": "slow_but_alive"}, inactivity_timeout=10), time.monotonic() - began)

    threads = [threading.Thread(target=ask, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
        time.sleep(0.2)
    for t in threads:
        t.join()
    (first, _), (second, second_wall) = sorted(out.values(), key=lambda x: x[1])
    assert first["status"] == second["status"] == "ok"
    assert second_wall >= 2.8  # five 0.3 s steps each, one after the other
    for res in (first, second):
        assert 1.4 <= res["held_s"] <= 2.4


def test_holding_a_gpu_keeps_evaluations_off_it(pool):
    """A profiler or sanitizer run takes the GPU's lane: a request that arrives meanwhile starts only after it."""
    import threading

    pid_of(pool)
    released = {}

    def hold():
        with pool.holding(0) as g:
            assert g == 0
            time.sleep(1.0)
            released["at"] = time.monotonic()

    t = threading.Thread(target=hold)
    t.start()
    time.sleep(0.2)
    res = pool.run({"op": "ok"}, inactivity_timeout=10)
    done = time.monotonic()
    t.join()
    assert res["status"] == "ok" and done >= released["at"]
    assert res["held_s"] < 0.5  # the wait for the held GPU is not the request's GPU time
    with pytest.raises(ValueError, match="not in this pool"):
        with pool.holding(3):
            pass
