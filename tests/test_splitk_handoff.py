"""The split-K hand-off of `small` and `ampere_cute` as nvcc builds it: one thread's acq_rel add after the CTA
barrier publishes the partials, and no thread runs a __threadfence. Two such fences in every thread cost 8% back to
back and 5% in server mode over 28 split-K kernels of `small` (docs/benchmarks/big_shapes_and_server.md, "The split-K
hand-off"). PTX is what nvcc alone can show here; the SASS of each fence is a MEMBAR."""
from __future__ import annotations

import pytest

from agent.families import render
from evaluator.code_size import ptx_text

SPLIT = {
    "small": ({"pdl": True, "bm": 16, "bn": 32, "bk": 64, "wm": 1, "wn": 2, "stages": 2, "split_k": 2},
              (64, 64, 256)),
    "ampere_cute": ({"pdl": True, "bm": 32, "bn": 32, "bk": 64, "wm": 2, "wn": 2, "stages": 3, "prefetch": 2,
                     "sw_b": 3, "sw_m": 3, "sw_s": 3, "block_swizzle": 1, "reg_pipeline": True, "epilogue": "smem",
                     "split_k": 2, "acc": "fp32"}, (64, 128, 1024)),
}


def fences(text: str) -> dict[str, int]:
    return {"membar.gl": text.count("membar.gl"), "fence.sc.gpu": text.count("fence.sc.gpu"),
            "atom.acq_rel.gpu": text.count("atom.acq_rel.gpu")}


@pytest.mark.parametrize("family", sorted(SPLIT))
def test_split_k_hand_off_is_one_acq_rel_add_and_no_thread_fence(family):
    params, shape = SPLIT[family]
    src = render(family, params, shape, "sm_90a")
    assert "g_arrivals" in src, "the params no longer render a split-K kernel"
    got = fences(ptx_text(src))
    assert got == {"membar.gl": 0, "fence.sc.gpu": 0, "atom.acq_rel.gpu": 1}, got
    # the check sees a fence where there is one: a __threadfence put back into the hand-off
    fenced = src.replace("__shared__ unsigned s_last;", "__threadfence();\n__shared__ unsigned s_last;", 1)
    assert fenced != src
    old = fences(ptx_text(fenced))
    assert old["membar.gl"] + old["fence.sc.gpu"] >= 1, old
