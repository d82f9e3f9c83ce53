"""The parts of state-proof timing that need no GPU: the verdict on spot-checked timed outputs, the operand pool's
size, the composite baselines (best NVIDIA, '-max' with AutoTuning's runners-up) and the regimes table."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import record as R
from evaluator.buffers import POOL_BYTES, pool_size, set_bytes
from evaluator.timing import REGIMES, verify_outputs

ROOT = Path(__file__).resolve().parents[1]


def _batch(err, nonfinite=0, ref=40.0, sets=8):
    return {"max_abs_diff": err, "nonfinite": nonfinite, "max_abs_ref": ref, "sets": sets}


def test_honest_outputs_pass_and_the_tolerance_follows_the_baselines():
    out = verify_outputs({"candidate": [_batch(0.03)] * 5, "cublas-NN": [_batch(0.031)] * 5}, ["candidate"])
    v = out["candidate"]
    assert v["passed"] and v["calls_checked"] == 40 and v["detail"] == ""
    assert v["tolerance"] == pytest.approx(max(2 * 0.031, 4 * 2 ** (5 - 11)))


def test_a_skipped_call_and_a_stale_product_are_named():
    skipped = verify_outputs({"candidate": [_batch(0.0, nonfinite=64)] + [_batch(0.03)] * 3,
                              "cublas-NN": [_batch(0.03)] * 4}, ["candidate"])["candidate"]
    assert not skipped["passed"] and skipped["failed_batches"] == 1 and "skipped work" in skipped["detail"]
    stale = verify_outputs({"candidate": [_batch(55.0)] * 2, "cublas-NN": [_batch(0.03)] * 2},
                           ["candidate", "rival:x"])
    assert not stale["candidate"]["passed"] and stale["candidate"]["failed_batches"] == 2
    assert stale["rival:x"]["batches"] == 0 and stale["rival:x"]["passed"]  # nothing timed: nothing to refuse


def test_the_pool_gives_every_call_of_a_batch_its_own_set_within_its_budget():
    assert pool_size(64, 64, 64) == 200  # tiny: as many sets as a held batch has calls
    per = set_bytes(4096, 4096, 4096)
    assert pool_size(4096, 4096, 4096) == POOL_BYTES // per
    assert pool_size(16384, 16384, 16384) == 2  # huge: two, so a lead-in never runs on the timed contents


def _result(medians: dict[str, float], cand_us: float = 10.0) -> R.EvalResult:
    base = {n: R.Timing(name=n, median_us=m, mean_us=m, min_us=m, samples=10, speedup_mean=m / cand_us,
                        speedup_median=m / cand_us) for n, m in medians.items()}
    return R.EvalResult(status=R.OK, reason="", shape=(1, 1, 1), acc="fp32", baselines=base,
                        candidate=R.Timing(name="candidate", median_us=cand_us, mean_us=cand_us, min_us=cand_us,
                                           samples=10))


def test_best_nvidia_and_max_take_the_fastest_in_the_same_rounds():
    r = _result({"torch": 12.0, "cublas-NN": 11.0, "cublaslt-autotune-NN": 11.5, "cublaslt-autotune-NN#2": 10.5,
                 "cublaslt-autotune-TN": 13.0})
    assert r.speedup("cublaslt-autotune-max") == pytest.approx(1.05)  # the runner-up was faster in these rounds
    assert r.speedup(R.BEST_NVIDIA) == pytest.approx(1.05)
    assert r.speedup("cublas-max") == pytest.approx(1.1)
    assert _result({}).speedup(R.BEST_NVIDIA) is None


def test_every_regime_is_a_mode_of_the_contract():
    from evaluator.contract import MODES

    assert set(REGIMES) == set(MODES)
    assert not REGIMES["back-to-back"]["separator"] and REGIMES["separated"]["separator"]


def test_the_regimes_table_regenerates_from_its_data(tmp_path):
    data = ROOT / "docs/benchmarks/data/regimes_fp32_h100.json"
    out = tmp_path / "t.md"
    p = subprocess.run([sys.executable, "scripts/regimes_table.py", "--data", str(data), "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == (ROOT / "docs/benchmarks/regimes_fp32.md").read_text()
    shapes = json.loads(data.read_text())["shapes"]
    assert len(shapes) == 24 and all({"back-to-back", "separated", "server"} <= set(e) for e in shapes.values())
    bad = subprocess.run([sys.executable, "scripts/regimes_table.py", "--data", str(tmp_path / "none.json"),
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "--run" in bad.stderr
