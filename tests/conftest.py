import os
import shutil
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


_SHARED_GPU = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)  # after -m/-k have deselected: only the GPU tests that will run count
def pytest_collection_modifyitems(config, items):
    from evaluator.gpu import has_gpu

    if has_gpu():
        # xdist workers would share the one GPU: each builds every selected family sample (gpu_samples) and times
        # beside the others, so checks fail that pass alone (a run with -n 4 failed one of 61 samples that all pass
        # serially). Each such test fails at once saying so (a UsageError would only crash the worker, its message
        # lost in xdist's internal error)
        if os.environ.get("PYTEST_XDIST_WORKER"):
            for item in items:
                if "gpu" in item.keywords:
                    item.stash[_SHARED_GPU] = True
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device with: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item):
    if item.stash.get(_SHARED_GPU, False):
        pytest.fail("GPU tests share the one GPU under pytest-xdist (each worker builds every family sample and times "
                    "beside the others): run `pytest -m gpu` without -n", pytrace=False)


_MADE_HERE: list[str] = []  # the session's build cache, removed when the session ends


def pytest_sessionfinish(session, exitstatus):
    for d in _MADE_HERE:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def session_build_cache(monkeypatch):
    """One temporary build cache per test session, shared by the modules that use it and the CLI processes they
    start; set only while those tests run, so the GPU tests keep their persistent CUDAL2_CACHE (autotune choices)."""
    if "CUDAL2_TEST_CACHE" not in os.environ:
        os.environ["CUDAL2_TEST_CACHE"] = tempfile.mkdtemp(prefix="cudal2-test-cache-")
        _MADE_HERE.append(os.environ["CUDAL2_TEST_CACHE"])
    monkeypatch.setenv("CUDAL2_CACHE", os.environ["CUDAL2_TEST_CACHE"])
