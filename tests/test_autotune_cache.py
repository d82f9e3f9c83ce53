"""The AutoTuning pick cache (evaluator.baselines.autotune_cache_entry), shared by the timing and the profiler: only
a pick of this key made by the current method, with enough rounds, counts; anything else is tuned again."""
from __future__ import annotations

import json

import pytest

from evaluator.baselines import AUTOTUNE_METHOD, autotune_cache_entry

SHAPE = (4096, 1024, 12288)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAL2_CACHE", str(tmp_path))


def _write(rec) -> None:
    key, path, _ = autotune_cache_entry("NVIDIA H200", 130100, SHAPE, False, "TN")
    path.write_text(json.dumps(rec(key)) if callable(rec) else rec)


def test_a_current_pick_is_found_and_keyed_by_everything_it_depends_on():
    _write(lambda key: {"key": key, "algo": "ab01", "rounds": 3, "method": AUTOTUNE_METHOD, "detail": {}})
    key, path, rec = autotune_cache_entry("NVIDIA H200", 130100, SHAPE, False, "TN", min_rounds=3)
    assert key == "NVIDIA H200|lt130100|4096x1024x12288|fp32|TN" and path.name.endswith(".json")
    assert rec is not None and bytes.fromhex(rec["algo"]) == b"\xab\x01"
    for other in (("NVIDIA H100", 130100, SHAPE, False, "TN"), ("NVIDIA H200", 130100, SHAPE, True, "TN"),
                  ("NVIDIA H200", 130100, SHAPE, False, "NN")):
        assert autotune_cache_entry(*other)[2] is None


@pytest.mark.parametrize("rec", [
    lambda key: {"key": key, "algo": "ab01", "rounds": 3, "detail": {}},  # the screening-only method: no tag
    lambda key: {"key": key, "algo": "ab01", "rounds": 3, "method": "steady-1", "detail": {}},  # big shapes only
    lambda key: {"key": key, "algo": "ab01", "rounds": 3, "method": "steady-3", "detail": {}},  # no variations
    lambda key: {"key": key, "algo": "ab01", "rounds": 3, "method": "screening", "detail": {}},  # finalists < 2
    lambda key: {"key": key, "algo": "ab01", "rounds": 2, "method": AUTOTUNE_METHOD, "detail": {}},
    lambda key: {"key": key + "x", "algo": "ab01", "rounds": 3, "method": AUTOTUNE_METHOD},
    lambda key: {"key": key, "algo": "not hex", "rounds": 3, "method": AUTOTUNE_METHOD},
    "{damaged", "[1, 2]",
])
def test_anything_else_is_not_a_pick(rec):
    _write(rec)
    assert autotune_cache_entry("NVIDIA H200", 130100, SHAPE, False, "TN", min_rounds=3)[2] is None
