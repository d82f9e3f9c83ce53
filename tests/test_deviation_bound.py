"""The deviation bound's rounding floor (evaluator.checks): no kernel is asked to beat a correctly rounded fp16
output, whatever luck the baselines had on one draw of inputs."""
import math

import numpy as np
import pytest

from evaluator.checks import DEVIATION_HEADROOM, accuracy_verdict, deviation_bound, rounding_floor


@pytest.mark.parametrize("x", [0.7, 1.0, 1.5, 31.9, 96.0, 511.99, 512.0, 600.0, 1023.0, 2048.0, 40000.0])
def test_floor_is_half_the_fp16_spacing_at_the_largest_reference_value(x):
    # numpy's own fp16 spacing at the binade of x (x itself rounded down into fp16 so the binade is x's)
    binade = np.float16(2.0 ** math.floor(math.log2(x)))
    assert rounding_floor(x) == float(np.spacing(binade)) / 2


def test_floor_of_degenerate_references_is_zero():
    assert rounding_floor(0.0) == 0.0
    assert rounding_floor(float("nan")) == 0.0
    assert rounding_floor(float("inf")) == 0.0
    assert rounding_floor(1e9) == rounding_floor(65504.0)  # beyond fp16's range, its last binade


def test_lucky_baselines_do_not_refuse_a_kernel_that_rounds_one_element_the_other_way():
    # measured on the H200 (256x2048x16384, normal inputs): cuBLAS 0.2402, the wmma reference kernel 0.2598, with
    # outputs in [512, 1024) where half an ulp is 0.25; the old bound was 0.2402 * 1.05 = 0.2522
    devs = {"cublas-NN": 0.2402, "cublaslt-autotune-NN": 0.2389}
    assert 0.2598 > max(devs.values()) * DEVIATION_HEADROOM
    assert 0.2598 <= deviation_bound(devs, 600.0) * DEVIATION_HEADROOM


def test_the_floor_changes_nothing_where_the_baselines_are_already_past_it():
    devs = {"cublas-NN": 0.31}
    assert deviation_bound(devs, 600.0) == 0.31
    # an fp16 accumulator at K=16384 is off by whole units there; the floor does not come near letting it through
    assert 2.0 > deviation_bound(devs, 600.0) * DEVIATION_HEADROOM


def test_the_floor_covers_fp32_summation_at_long_k():
    # measured on an H200 (1024x1024x32768, normal inputs, docs/benchmarks/data/fp32_summation_error_h200_2026-11-28_
    # 6048a7c.json): every CUTLASS and hand-written kernel 0.279 at max |C| 975.1, cuBLAS 0.2559; half an ulp is 0.25,
    # so half an ulp alone refused them wherever no cuBLASLt variant happened to sum as they did
    devs, k = {"cublas-NN": 0.2559}, 32768
    assert 0.279 > deviation_bound(devs, 975.1) * DEVIATION_HEADROOM
    assert 0.279 <= deviation_bound(devs, 975.1, k) * DEVIATION_HEADROOM
    # and K = 16384, where a persistent CUTLASS kernel read 0.263 once against half an ulp of 0.25
    assert 0.263 <= deviation_bound({"cublas-NN": 0.2465}, 681.6, 16384) * DEVIATION_HEADROOM


@pytest.mark.parametrize("k, ref", [(1024, 180.0), (4096, 366.4), (16384, 700.8), (32768, 975.1)])
def test_the_summation_slack_stays_well_inside_an_ulp(k, ref):
    # an fp16 accumulator is off by whole ulps at these sizes, and one extra rounding of an fp16 partial sum by up to
    # half an ulp: the slack added to the floor is a small part of half an ulp wherever normal inputs reach
    half_ulp = rounding_floor(ref)
    assert 0.0 < rounding_floor(ref, k) - half_ulp < 0.5 * half_ulp
    assert rounding_floor(ref, 0) == half_ulp


def test_no_baseline_no_bound():
    assert math.isnan(deviation_bound({}, 600.0))


def _cmp(mx, rms, ref=600.0, nonfinite=0):
    return {"max_abs_diff": mx, "rms_diff": rms, "max_abs_ref": ref, "nonfinite": nonfinite}


# a sweep (H100, 256x2048x16384, normal inputs, draw 2 of 12): all six fp16 cuBLAS kernels 2.0472 max / 0.30294 RMS
R55_BASE = {name: _cmp(2.0472, 0.30294) for name in ("cublas-NN", "cublaslt-autotune-TN")}


def test_fp16_class_accepts_a_kernel_as_accurate_as_cublas_whatever_its_largest_element_does():
    # a split-K campaign winner: RMS 0.995 of cuBLAS's on every draw, max 0.954-1.031 (1.06 in a final evaluation,
    # which the max rule refused)
    ok, detail, m = accuracy_verdict(_cmp(2.0472 * 1.031, 0.30294 * 0.995), R55_BASE, acc16=True)
    assert ok and "RMS" in detail and m["rms_bound"] == 0.30294
    assert accuracy_verdict(_cmp(2.0472 * 1.07, 0.30294 * 0.995), R55_BASE, acc16=True)[0]
    # the max rule of the fp32 class refuses that same output
    assert not accuracy_verdict(_cmp(2.0472 * 1.07, 0.30294 * 0.995), R55_BASE, acc16=False)[0]


def test_fp16_class_refuses_a_coarser_accumulation_order_on_every_draw():
    # 64x2048x4096: 4 slices of 1024 in fp16 read RMS 1.244-1.258 of cuBLAS's; unsplit, 2.435-2.457
    base = {"cublas-NN": _cmp(0.4266, 0.06136)}
    assert not accuracy_verdict(_cmp(0.4266 * 1.163, 0.06136 * 1.244), base, acc16=True)[0]
    assert not accuracy_verdict(_cmp(0.4266 * 3.174, 0.06136 * 2.435), base, acc16=True)[0]


def test_fp16_class_keeps_a_max_backstop_for_a_few_wild_elements():
    # an RMS no worse than cuBLAS's but one element off by twice the worst baseline element: refused
    ok, _, m = accuracy_verdict(_cmp(2.0472 * 2.0, 0.30294), R55_BASE, acc16=True)
    assert not ok and m["max_abs_diff"] > m["bound"] * 1.5


def test_non_finite_output_or_no_baseline_is_refused():
    assert not accuracy_verdict(_cmp(0.1, 0.01, nonfinite=3), R55_BASE, acc16=True)[0]
    assert not accuracy_verdict(_cmp(0.1, 0.01, nonfinite=3), R55_BASE, acc16=False)[0]
    assert not accuracy_verdict(_cmp(0.1, 0.01), {}, acc16=True)[0]
    assert not accuracy_verdict(_cmp(0.1, 0.01), {}, acc16=False)[0]
