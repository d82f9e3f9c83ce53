"""Prompt rendering against golden files (regenerate with UPDATE_GOLDEN=1 after an intended template change)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import RecordedEvaluator, kernel_source  # noqa: E402

from agent.campaign.archive import Archive  # noqa: E402
from agent.loop.shape_loop import build_context  # noqa: E402
from agent.proposers.base import ProposalContext  # noqa: E402
from agent.proposers.prompt import estimate_tokens, render_step, render_system  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"
SHAPE = (4096, 4096, 4096)
FACTS = {"sm_count": 132, "smem_per_block_optin_kb": 227, "l2_mb": 60, "max_sm_clock_mhz": 1980,
         "mem_bandwidth_gbs": 4800}
PASSAGES = [
    {"text": "SM90 GMMA atoms: 64xNx16 warpgroup MMA, A and B from shared memory descriptors.",
     "source": "cutlass/include/cute/atom/mma_traits_sm90_gmma.hpp", "symbol": "SM90_64x128x16_F32F16F16_SS",
     "line": 412, "score": 0.81},
    {"text": "Swizzle<3,4,3> removes bank conflicts for 64-element-wide fp16 tiles.",
     "source": "cutlass/include/cute/swizzle.hpp", "symbol": "Swizzle", "line": 40, "score": 0.7},
    {"text": "Multistage pipelines overlap cp.async copies of stage s+1 with the MMAs of stage s.",
     "source": "retrieval_corpus/notes/pipelining.md", "symbol": None, "line": 3, "score": 0.52},
]


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path} (run with UPDATE_GOLDEN=1 to create it)"
    assert text == path.read_text(), f"{name} differs from its golden file (UPDATE_GOLDEN=1 after checking)"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """A small archive made the way the loop makes it: recorded results of six variants, one an edit."""
    a = Archive(tmp_path_factory.mktemp("prompts") / "archive.sqlite")
    ev = RecordedEvaluator()
    parent = None
    for step, tag in enumerate(["naive", "broken", "tile128", "tile128x256", "wrong", "pipelined"]):
        src = kernel_source(tag)
        vid = a.add("golden", "H200", "fp32", SHAPE, src, "cuda-l2-test", ev(src, SHAPE), step=step, parent=parent)
        if tag == "tile128x256":
            parent = vid
    wg = kernel_source("wgmma")
    a.add("golden", "H200", "fp32", (4096, 4096, 2048), wg, "builtin", ev(wg, (4096, 4096, 2048)),
          family="wgmma_tma", params={"BM": 128, "BN": 256, "BK": 64, "stages": 4})
    return a


def full_context(archive) -> ProposalContext:
    return build_context(archive, gpu_name="H200", acc="fp32", shape=SHAPE, arch="sm_90a", gpu_facts=FACTS,
                         step=6, passages=PASSAGES)


def test_system_prompts():
    fp32, fp16 = render_system("fp32"), render_system("fp16")
    check_golden("system_fp32.txt", fp32)
    check_golden("system_fp16.txt", fp16)
    for text in (fp32, fp16):
        assert 'extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C' in text
        assert "Create no streams" in text and "Keep no state from one call to the next" in text
        assert "cudal2: scratch" in text and "<<<<<<< SEARCH" in text
    assert "Accumulate in fp32" in fp32 and "Accumulate in fp32" not in fp16


def test_first_step_prompt():
    ctx = ProposalContext(shape=(1024, 8192, 512), acc="fp16", arch="sm_90a", gpu_name="NVIDIA H100", gpu_facts=FACTS,
                          retrieval_note="no retriever configured")
    text = render_step(ctx)
    check_golden("step_first.txt", text)
    assert "None yet: this is the first attempt" in text and "(No reference material: no retriever configured.)" in text
    assert "Timing: calls back to back in one stream" in text


def test_the_prompt_says_how_the_search_is_timed():
    """An LLM searching in graph mode is told the launch gaps are short and PDL measured slower there, as the
    built-in policy knows; each mode has its own line."""
    lines = {}
    for mode in ("offline", "server", "graph"):
        ctx = ProposalContext(shape=(128, 16384, 64), acc="fp32", arch="sm_90a", retrieval_note="none", mode=mode)
        lines[mode] = next(ln for ln in render_step(ctx).splitlines() if ln.startswith("Timing: "))
    assert len(set(lines.values())) == 3
    assert "CUDA graph" in lines["graph"] and "PDL measured up to 8% slower" in lines["graph"]
    assert "idle gap" in lines["server"]


def test_full_step_prompt(archive):
    text = render_step(full_context(archive))
    check_golden("step_full.txt", text)
    # the contrastive parts: speedups against each baseline, failures with reasons, resources, NCU, best code, diff
    for s in ("| #6 | 5 | top | ok | 1.036x | 1.087x | 1.069x | 255 | 144K | 48 | edit of #4 (+1/-1 lines)",
              "compile_error", "wgmma_fence", "exceeds the bound", "bottleneck: memory-bound",
              "dram_throughput_pct=81.5", "## The best kernel so far: #6 (1.036x",
              "-// variant: tile128x256\n+// variant: pipelined", "[3] retrieval_corpus/notes/pipelining.md:3",
              "4096x4096x2048: 1.089x vs cublaslt-autotune-max, wgmma_tma BM=128 BN=256 BK=64 stages=4"):
        assert s in text, s


def test_prompt_budget_drops_lowest_value_parts_first(archive):
    ctx = full_context(archive)
    full = render_step(ctx)
    assert render_step(ctx, token_budget=estimate_tokens(full)) == full
    one_less = render_step(ctx, token_budget=estimate_tokens(full) - 5)
    assert "pipelining.md" not in one_less and "swizzle.hpp" in one_less  # the lowest-scored passage went first
    assert "left out 1 retrieved passage(s)" in one_less
    tight = render_step(ctx, token_budget=800)
    check_golden("step_budget_800.txt", tight)
    assert estimate_tokens(tight) <= 800
    assert "Reference material" not in tight and "## What distinguishes it from the runner-up" not in tight
    assert "## The best kernel so far: #6" in tight and "| #6 |" in tight  # the core stays
    # a budget that cannot be met still yields the core (best kernel, shape), not an empty prompt
    tiny = render_step(ctx, token_budget=50)
    assert "M=4096, N=4096, K=4096" in tiny and 'extern "C" int hgemm' in tiny
