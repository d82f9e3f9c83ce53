"""Progress on slow nvcc builds: real builds report elapsed time against the median of earlier builds of the same
kind (the report intervals are shortened so that a plain kernel's ~2 s build is 'slow')."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from evaluator import build_progress as BP
from evaluator import compile as C

KERNELS = Path(__file__).resolve().parent / "kernels"
NAIVE = (KERNELS / "reference_naive.cu").read_text()


@pytest.fixture
def fast_reports(monkeypatch):
    monkeypatch.setattr(BP, "FIRST_REPORT_S", 0.2)
    monkeypatch.setattr(BP, "REPORT_EVERY_S", 0.3)


def test_kind_of_names_the_family_or_the_library():
    assert BP.kind_of('// cuda-l2 family "hopper_wgmma": sm_90a ...\n') == "hopper_wgmma"
    assert BP.kind_of("// cuda-l2 candidate: family hopper_raw, params {}\n") == "hopper_raw"
    assert BP.kind_of('#include <cute/tensor.hpp>\n') == "CUTLASS/CuTe"
    assert BP.kind_of(NAIVE) == "plain CUDA"


def test_builds_report_progress_and_later_ones_an_expected_time(tmp_path, fast_reports):
    seen: list[BP.BuildProgress] = []
    first = C.compile_kernel(NAIVE, "sm_90a", cache_dir=tmp_path, progress=seen.append)
    assert first.ok and seen and seen[0].expected is None and "no earlier build" in seen[0].line()
    assert [r["kind"] for r in BP._read(tmp_path)] == ["plain CUDA"]

    seen.clear()
    second = C.compile_kernel(NAIVE + "\n// another source\n", "sm_90a", cache_dir=tmp_path, progress=seen.append)
    assert second.ok and seen
    assert seen[-1].earlier == 1 and seen[-1].expected == pytest.approx(first.build_seconds, abs=0.01)
    assert "expected" in seen[-1].line() and "median of 1 earlier builds" in seen[-1].line()
    assert all(b.elapsed >= a.elapsed for a, b in zip(seen, seen[1:]))

    seen.clear()
    assert C.compile_kernel(NAIVE, "sm_90a", cache_dir=tmp_path, progress=seen.append).cached and not seen


def test_a_damaged_log_costs_only_the_estimate(tmp_path):
    (tmp_path / BP.LOG_NAME).write_text('{"kind": "plain CUDA", "seconds": 4}\nnot json\n{"kind": "plain CUDA", "sec')
    assert BP.expected_seconds(tmp_path, "plain CUDA") == (4, 1)
    assert BP.expected_seconds(tmp_path / "missing", "plain CUDA") == (None, 0)


def test_eval_compile_only_prints_the_progress(tmp_path, fast_reports, monkeypatch, capsys):
    monkeypatch.setenv("CUDAL2_CACHE", str(tmp_path))
    out = tmp_path / "rec.json"
    assert main(["eval", str(KERNELS / "reference_naive.cu"), "--compile-only", "--json", str(out)]) == 0
    assert "cudal2 eval: building plain CUDA kernel: " in capsys.readouterr().err
    assert json.loads(out.read_text())["compile"]["cached"] is False
