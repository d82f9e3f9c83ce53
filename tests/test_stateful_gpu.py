"""Kernels that keep state between calls (the red team's entries with a `runtime` verdict), with the source screen
bypassed: the run-time defences alone refuse each one for what it did, and none of their timings reaches a record.
An honest kernel passes the same checks."""
import json
from pathlib import Path

import pytest

from evaluator import record as R
from evaluator.api import evaluate
from evaluator.pool import WorkerPool

pytestmark = pytest.mark.gpu
KERNELS = Path(__file__).with_name("kernels")
RUNTIME = {n: e for n, e in json.loads((KERNELS / "hostile" / "expected.json").read_text()).items()
           if "runtime" in e}


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(gpus=[0])
    yield p
    p.close()


@pytest.mark.parametrize("name", sorted(RUNTIME))
def test_with_the_screen_bypassed_the_run_time_refuses_each_state_kernel(pool, name):
    exp = RUNTIME[name]["runtime"]
    r = evaluate((KERNELS / "hostile" / name).read_text(), tuple(RUNTIME[name]["shape"]), pool=pool, screen=False,
                 inactivity_timeout=60)
    assert r.status == exp["status"], (r.status, r.reason)
    failed = {c.name for c in r.checks if not c.passed}
    assert exp["check"] in failed, (failed, r.reason)
    assert r.candidate is None and not r.baselines, "a refused kernel's timings must not reach the record"


def test_an_honest_kernel_passes_the_state_checks(pool):
    r = evaluate((KERNELS / "reference_wmma.cu").read_text(), (256, 256, 512), pool=pool)
    assert r.status == R.OK, r.reason
    checks = {c.name: c for c in r.checks}
    assert checks["timed_outputs_verified"].passed and checks["stateless_timing"].passed
    timing = r.candidate.detail["timing"]
    assert timing["outputs"]["candidate"]["calls_checked"] >= timing["rounds"]
    fastest = min(r.baselines.values(), key=lambda t: t.median_us)
    assert r.speedup(R.BEST_NVIDIA) == fastest.speedup_mean
