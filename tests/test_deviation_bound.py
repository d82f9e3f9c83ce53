"""The deviation bound's rounding floor (evaluator.checks): no kernel is asked to beat a correctly rounded fp16
output, whatever luck the baselines had on one draw of inputs."""
import math

import numpy as np
import pytest

from evaluator.checks import DEVIATION_HEADROOM, deviation_bound, rounding_floor


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


def test_no_baseline_no_bound():
    assert math.isnan(deviation_bound({}, 600.0))
