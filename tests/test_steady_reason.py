"""When an offline measurement is timed power-steady (evaluator.timing.steady_reason), from the baselines' own
figures; the cases use cuBLASLt-AutoTuning details recorded by a campaign on the H200."""
from __future__ import annotations

from types import SimpleNamespace

from evaluator.timing import PROFILES, steady_reason

QUICK = PROFILES["quick"]


def _tuned(screening_ms: float, finalists: list[float], chosen: int) -> SimpleNamespace:
    return SimpleNamespace(detail={"median_ms": screening_ms, "steady": {
        "finalists": len(finalists), "chosen_finalist": chosen, "finalist_median_ms": finalists}})


def _callables(nn: SimpleNamespace, tn: SimpleNamespace) -> dict:
    return {"cublas-NN": SimpleNamespace(detail={}), "cublaslt-autotune-NN": nn, "cublaslt-autotune-TN": tn}


# 256x2048x16384: 36 us a call held, 32 in the screening's bursts (power-limited back to back)
LIMITED = _callables(_tuned(0.03163, [0.03624, 0.03713, 0.04054, 0.03761], 0),
                     _tuned(0.0327, [0.03685, 0.03721, 0.04044, 0.03846], 0))
# 1024x12288x256: 2% apart, within what the screening's noise does
NOT_LIMITED = _callables(_tuned(0.01484, [0.01515, 0.01662, 0.01663, 0.01686], 0),
                         _tuned(0.01534, [0.01522, 0.01582, 0.01633, 0.01647], 0))


def test_a_shape_that_slows_down_when_held_is_timed_power_steady():
    why = steady_reason("offline", [0.032, 0.033], LIMITED, QUICK)
    assert why == "cublaslt-autotune-NN ran 1.146x slower held than in bursts"


def test_a_short_shape_that_holds_its_speed_is_not():
    assert steady_reason("offline", [0.015, 0.015], NOT_LIMITED, QUICK) is None


def test_a_long_call_is_power_steady_whatever_the_autotuning_saw():
    assert steady_reason("offline", [0.31, 0.30], NOT_LIMITED, QUICK) == "the fastest baseline takes 0.300 ms a call"


def test_server_mode_and_pure_screening_picks_are_never_power_steady():
    assert steady_reason("server", [0.31], LIMITED, QUICK) is None
    one_algo = {"cublaslt-autotune-NN": SimpleNamespace(detail={"median_ms": 0.03, "algos_valid": 1})}
    assert steady_reason("offline", [0.03], one_algo, QUICK) is None
    assert steady_reason("offline", [], LIMITED, QUICK) is None


def test_the_gap_is_the_profiles():
    from dataclasses import replace

    assert steady_reason("offline", [0.015], NOT_LIMITED, replace(QUICK, steady_gap=1.02)) is not None
    assert steady_reason("offline", [0.032], LIMITED, replace(QUICK, steady_gap=1.2)) is None
