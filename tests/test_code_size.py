"""evaluator/code_size.py: a kernel's machine-code bytes from a real nvcc build (cubin), read from its ELF headers."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.families import render
from evaluator.code_size import elf_text_sizes, ptx_text, text_bytes

TWO_KERNELS = """
#include <cuda_fp16.h>
__global__ void small_one(float* x) { x[threadIdx.x] += 1.0f; }
__global__ void bigger_one(float* x, int n) {
  #pragma unroll 16
  for (int i = 0; i < n; ++i) x[threadIdx.x + i] = x[threadIdx.x + i] * 2.0f + 1.0f;
}
"""


def test_each_kernel_has_its_bytes_and_an_unrolled_loop_has_more():
    sizes = text_bytes(TWO_KERNELS, "sm_90a")
    assert len(sizes) == 2 and all(v > 0 and v % 16 == 0 for v in sizes.values())  # 16-byte SASS instructions
    small = next(v for k, v in sizes.items() if "small_one" in k)
    bigger = next(v for k, v in sizes.items() if "bigger_one" in k)
    assert bigger > 4 * small


def test_hopper_raw_rolled_k_loops_halve_the_code_ping_pong_kernels_keep_theirs():
    """K_LOOPS: the cooperative 128x128's k-block loops rolled (its source with K_LOOPS defined empty is what nvcc
    made of it before), the ping-pong 64x64's left to the compiler."""
    coop = render("hopper_raw", {"epi": "tma", "pdl": True, "tile_m": 128, "tile_n": 128, "group": 1, "acc": "fp32",
                                 "stages": 2}, (1024, 2048, 64), "sm_90a")
    unrolled = coop.replace('#define K_LOOPS _Pragma("unroll 1")', "#define K_LOOPS")
    assert unrolled != coop
    rolled_bytes, unrolled_bytes = sum(text_bytes(coop).values()), sum(text_bytes(unrolled).values())
    assert rolled_bytes < 0.7 * unrolled_bytes
    pingpong = render("hopper_raw", {"epi": "tma", "k_order": "alternate", "schedule": "pingpong", "pdl": True,
                                     "tile_m": 64, "tile_n": 64, "group": 1, "acc": "fp32", "stages": 8},
                      (1024, 256, 512), "sm_90a")
    assert '#define K_LOOPS _Pragma' not in pingpong and "#define K_LOOPS\n" in pingpong


def test_a_build_error_and_a_file_that_is_no_elf_say_so():
    with pytest.raises(RuntimeError, match="nvcc failed building a cubin"):
        text_bytes("__global__ void k() { not_declared(); }")
    with pytest.raises(RuntimeError, match="nvcc failed building a ptx"):
        ptx_text("__global__ void k() { not_declared(); }")
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        elf_text_sizes(b"PK\x03\x04 a zip, not a cubin")


def test_small_counted_copy_loops_take_under_half_the_code_of_tid_started_ones():
    """small's load_tile: loops started at the thread's index have no trip count nvcc knows, and it unrolled a guarded
    copy per possible trip (the source with those loops put back is what the template was before)."""
    src = render("small", {"pdl": True, "bm": 16, "bn": 32, "bk": 32, "wm": 1, "wn": 2, "stages": 2, "split_k": 1},
                 (64, 64, 128), "sm_90a")
    started = src
    for n in ("ACH", "BCH"):
        counted = (f"  for (int j = 0; j < ({n} + THREADS - 1) / THREADS; ++j) {{\n"
                   f"    const int c = tid + j * THREADS;\n"
                   f"    if ({n} % THREADS != 0 && c >= {n}) break;\n")
        assert counted in started
        started = started.replace(counted, f"  for (int c = tid; c < {n}; c += THREADS) {{\n")
    assert sum(text_bytes(src).values()) < 0.5 * sum(text_bytes(started).values())


UNROLL = re.compile(r"^\s*(#pragma unroll\s*$|CUTE_UNROLL\s*$)")
THREAD_STARTED = re.compile(r"for \(int \w+ = [^;]*\b(tid|threadIdx\.x|lane)\b[^;]*;[^;]*;\s*\w+ \+= ")


def unrolled_thread_started_loops(text: str) -> list[int]:
    """Lines of fully unrolled loops that start at the thread's index: nvcc cannot know their trip count."""
    lines = text.splitlines()
    return [i + 2 for i, line in enumerate(lines[:-1]) if UNROLL.match(line) and THREAD_STARTED.search(lines[i + 1])]


def test_no_template_fully_unrolls_a_loop_started_at_the_thread_index():
    assert unrolled_thread_started_loops("#pragma unroll\n  for (int c = tid; c < ACH; c += THREADS) {\n") == [2]
    assert unrolled_thread_started_loops("  CUTE_UNROLL\n  for (int j = 0; j < (N + T - 1) / T; ++j) {\n") == []
    found = {f.name: lines for f in (Path(__file__).resolve().parents[1] / "agent" / "families").glob("*.j2")
             if (lines := unrolled_thread_started_loops(f.read_text()))}
    assert not found, f"count these loops' trips instead (see small.cu.j2's load_tile): {found}"
