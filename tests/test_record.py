"""The result record survives JSON and back, built from a real compile."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator import record as R
from evaluator.compile import compile_kernel, compile_status, source_hash


pytestmark = pytest.mark.usefixtures("session_build_cache")


NAIVE = (Path(__file__).parent / "kernels" / "reference_naive.cu").read_text()


def _timing(name: str, median: float, speedup: float | None) -> R.Timing:
    return R.Timing(name=name, median_us=median, mean_us=median * 1.01, min_us=median * 0.97, samples=40,
                    speedup_mean=speedup, speedup_median=None if speedup is None else speedup * 0.99,
                    speedup_ci95=None if speedup is None else (speedup * 0.95, speedup * 1.04),
                    detail={"algo": [3, 1, 0]} if name.startswith("cublaslt") else {})


def _result() -> R.EvalResult:
    info = compile_kernel(NAIVE, "sm_90a")
    assert info.ok, info.log
    status, _ = compile_status(info)
    assert status == R.COMPILED
    return R.EvalResult(
        status=R.OK, shape=(4096, 512, 1000), acc="fp32", mode="server", profile="quick",
        source_hash=source_hash(NAIVE), code_length=len(NAIVE), compile=info,
        checks=[R.CheckOutcome("exact_binary", True, "3 draws", {"mismatches": 0}),
                R.CheckOutcome("baseline_bounded_deviation", True, "", {"max_abs_diff": 0.0625, "bound": 0.125}),
                R.CheckOutcome("deterministic", True)],
        candidate=_timing("candidate", 80.0, None),
        baselines={"cublas-NN": _timing("cublas-NN", 100.0, 1.25), "cublas-TN": _timing("cublas-TN", 96.0, 1.2),
                   "cublaslt-autotune-NN": _timing("cublaslt-autotune-NN", 90.0, 1.125),
                   "cublaslt-autotune-TN": _timing("cublaslt-autotune-TN", 88.0, 1.1)},
        gpu={"name": "NVIDIA H100 80GB HBM3", "sm_clock_mhz": 1980, "driver": "580.82"}, wall_seconds=2.5)


def test_record_round_trip_is_exact():
    res = _result()
    text = res.to_json()
    json.loads(text)  # plain JSON, no custom types
    back = R.EvalResult.from_json(text)
    assert back == res
    assert isinstance(back.compile, R.CompileInfo) and back.compile.kernels == res.compile.kernels
    assert back.baselines["cublas-NN"].speedup_ci95 == (0.95 * 1.25, 1.04 * 1.25)
    assert back.shape == (4096, 512, 1000)


def test_record_derived_values():
    res = _result()
    # '-max' picks the faster (lower median) of NN and TN.
    assert res.speedup("cublaslt-autotune-max") == 1.1
    assert res.speedup("cublas-max", "median") == 1.2 * 0.99
    assert res.max_abs_diff() == 0.0625
    assert res.rivals_refused() == {}  # no tournament
    res.candidate.detail["timing"] = {"rivals_refused": {"7": "max |C - ref| = 3.5"}}
    assert res.rivals_refused() == {"7": "max |C - ref| = 3.5"}
    assert res.reward() == 1.1 - 0.1 * 0.0625 - 1e-5 * len(NAIVE)
    res.status = R.INCORRECT
    assert res.reward() == -1.0


def test_compile_only_record_round_trip():
    info = compile_kernel(NAIVE.replace("cudaGetLastError()", "cudaDeviceSynchronize()"), "sm_90a")
    status, reason = compile_status(info)
    res = R.EvalResult(status=status, reason=reason, compile=info, code_length=len(NAIVE))
    back = R.EvalResult.from_json(res.to_json())
    assert back == res and back.status == R.SCREEN_REJECTED and "cudaDeviceSynchronize" in back.reason


def test_gpu_time_is_the_held_time_and_older_records_fall_back_to_wall_time():
    """A record keeps the seconds its evaluation held a GPU; one written before that was kept reads back with none
    and counts its wall time less the compile, as the benchmark tables did."""
    res = _result()
    old = json.loads(res.to_json())
    del old["gpu_seconds"]
    legacy = R.EvalResult.from_dict(old)
    assert legacy.gpu_seconds is None
    assert legacy.gpu_time() == pytest.approx(2.5 - res.compile.seconds)
    res.gpu_seconds = 0.75
    back = R.EvalResult.from_json(res.to_json())
    assert back.gpu_seconds == 0.75 and back.gpu_time() == 0.75
