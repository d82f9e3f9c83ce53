"""Profiling: ncu's real outputs parsed (golden files captured on an H100, see tests/golden/ncu/capture.py), the
unavailable paths, the CLI, and on a GPU a real profile of a reference kernel and a cuBLASLt baseline, plus the
proof that profiling leaves the timing of the same candidate alone."""
import json
import os
from pathlib import Path

import pytest

from evaluator import ncu_parse as P
from evaluator.bottleneck import LABELS

GOLDEN = Path(__file__).with_name("golden") / "ncu"
KERNELS = Path(__file__).with_name("kernels")
RUNNER_KERNELS = ("gen_normal", "transpose_h", "fill_u16", "half_to_float", "compare_k", "block_until_released")


# ---- missing ncu / unavailable counters ----------------------------------------------------------------------
def test_missing_ncu_gives_a_clear_unavailable_record(monkeypatch, tmp_path):
    from evaluator.profile import profile_baseline, profile_target

    monkeypatch.setenv("CUDAL2_NCU", str(tmp_path / "no" / "ncu"))
    monkeypatch.setenv("CUDAL2_CACHE", str(tmp_path))
    rec = profile_target("baseline:cublas-NN", (128, 128, 128), "unused.so")
    assert rec["available"] is False
    assert "ncu" in rec["reason"] and "not found" in rec["reason"] and str(tmp_path) in rec["reason"]
    rec = profile_baseline((128, 128, 128), "unused.so")
    assert rec["available"] is False and "not found" in rec["reason"]


def test_empty_ncu_setting_means_no_profiler(monkeypatch):
    from evaluator.profile import ncu_path

    monkeypatch.setenv("CUDAL2_NCU", "")
    assert ncu_path() is None


def test_bad_arguments_are_refused(monkeypatch, tmp_path):
    from evaluator.profile import profile_baseline, profile_candidate, profile_target

    monkeypatch.setenv("CUDAL2_NCU", "")
    with pytest.raises(ValueError, match="no compiled candidate"):
        profile_candidate(str(tmp_path / "missing.so"), (64, 64, 64), "n.so")
    with pytest.raises(ValueError, match="which must be one of"):
        profile_baseline((64, 64, 64), "n.so", which="cublas-XY")
    with pytest.raises(ValueError, match="acc must be"):
        profile_target("baseline:cublas-NN", (64, 64, 64), "n.so", acc="bf16")
    with pytest.raises(ValueError, match="positive"):
        profile_target("baseline:cublas-NN", (0, 64, 64), "n.so")


@pytest.mark.parametrize("text,needle", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters",
     "ERR_NVGPUCTRPERM"),
    ("==ERROR== Failed to initialize: LibraryNotLoaded", "gVisor"),
    ("==PROF== Disconnected from process 7\n==WARNING== No kernels were profiled.", "no kernel"),
])
def test_counter_failures_become_reasons(text, needle):
    assert needle in P.failure_reason(text)


def test_unavailable_paths_never_raise_through_evaluate_seam():
    # evaluate(..., ncu=True) stores whatever profile_candidate returns; an unavailable record must be plain JSON.
    from evaluator.profile import unavailable

    rec = unavailable("why", seconds=1.0)
    assert json.loads(json.dumps(rec)) == {"available": False, "reason": "why", "seconds": 1.0}


# ---- parsing details ---------------------------------------------------------------------------------------------
def test_numbers_and_units():
    assert P.number("1,234.5") == 1234.5 and P.number("n/a") is None and P.number("") is None
    assert P.number("7") == 7.0 and P.number("(1, 2, 3)") is None
    assert P.to_unit(1500.0, "nsecond", "time") == 1.5
    assert P.to_unit(2.0, "msecond", "time") == 2000.0
    assert P.to_unit(3.0, "Kbyte/block", "bytes") == 3000.0
    assert P.to_unit(1.0, "KiB", "bytes") == 1024.0
    assert P.to_unit(1.755, "Ghz", "hz") == pytest.approx(1.755e9)
    with pytest.raises(P.NcuParseError):
        P.to_unit(1.0, "parsec", "time")


def test_short_kernel_names():
    assert P.short_name("void wmma_hgemm<true>(const __half *, int)") == "void wmma_hgemm<true>"
    long = "void cutlass::Kernel2<" + "x" * 500 + ">(Params)"
    assert len(P.short_name(long)) == 120 and P.short_name(long).endswith("...")


def test_no_csv_is_a_parse_error():
    with pytest.raises(P.NcuParseError, match="no CSV header"):
        P.parse_raw_csv("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")


# ---- the CLI -----------------------------------------------------------------------------------------------------
def test_profile_subcommand_parses():
    from evaluator.profile_cli import add_subcommands
    import argparse

    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers(dest="command"))
    a = ap.parse_args(["profile", "k.cu", "--shape", "128", "256", "64", "--acc", "fp16", "--json", "o.json"])
    assert a.shape == [128, 256, 64] and a.acc == "fp16" and a.json == "o.json" and a.func.__name__ == "cmd_profile"
    with pytest.raises(SystemExit):
        ap.parse_args(["profile", "k.cu", "--shape", "128", "256"])


def test_profile_subcommand_refuses_a_missing_file(tmp_path, capsys):
    from evaluator.profile_cli import add_subcommands
    import argparse

    ap = argparse.ArgumentParser()
    add_subcommands(ap.add_subparsers(dest="command"))
    a = ap.parse_args(["profile", str(tmp_path / "nope.cu"), "--shape", "64", "64", "64"])
    assert a.func(a) == 2
    assert "no such kernel file" in capsys.readouterr().err


def test_render_shows_both_columns_and_unavailable_reasons():
    from evaluator.profile_cli import render

    cand = {"available": True, "duration_us": 12.5, "n_kernels": 1, "sm_throughput_pct": 40.0,
            "grid_size": 256, "block_size": 128, "top_stalls": "barrier 2.00",
            "bottleneck": {"label": "latency-bound", "why": "stalled on barrier"}}
    base = {"available": False, "reason": "counters not accessible"}
    text = render(cand, base, "cublaslt-heuristic-NN",
                  {"candidate_median_us": 12.0, "baseline_median_us": 9.0, "speedup": 0.75})
    assert "cublaslt-heuristic-NN" in text and "12.50" in text and "256 x 128" in text
    assert "counters not accessible" in text and "latency-bound" in text and "0.750x" in text


# ---- on the GPU --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool():
    from evaluator.pool import WorkerPool

    p = WorkerPool(gpus=[0])
    yield p
    p.close()


def _no_runner_kernels(rec):
    names = " ".join(k["name"] for k in rec["kernels"])
    assert not any(r in names for r in RUNNER_KERNELS), names


@pytest.mark.gpu
def test_profile_reference_kernel_and_cublaslt_baseline(pool):
    from evaluator import record as R
    from evaluator.api import evaluate
    from evaluator.profile import profile_baseline, profile_candidate

    shape = (1024, 1024, 1024)
    r = evaluate((KERNELS / "reference_wmma.cu").read_text(), shape, pool=pool)
    assert r.status == R.OK, r.reason
    rec = profile_candidate(r.compile.so_path, shape, pool.native_so())
    assert rec["available"], rec
    assert rec["n_kernels"] == 1 and "wmma_hgemm" in rec["main_kernel"]
    _no_runner_kernels(rec)
    assert rec["duration_us"] > 0 and rec["tensor_pipe_pct"] > 0
    assert rec["block_size"] == 128 and rec["grid_size"] == 256
    assert rec["registers_per_thread"] in {k["registers"] for k in r.compile.kernels}  # ptxas agrees
    assert rec["smem_per_block_bytes"] == 64 * (64 + 4) * 4  # the epilogue's fp32 tile is the largest use
    assert rec["bottleneck"]["label"] in LABELS
    assert json.loads(json.dumps(rec)) == rec

    base = profile_baseline(shape, pool.native_so(), which="cublaslt-heuristic-NN", use_cache=False)
    assert base["available"], base
    assert base["cached"] is False and base["n_kernels"] >= 1 and base["tensor_pipe_pct"] > 0
    _no_runner_kernels(base)
    again = profile_baseline(shape, pool.native_so(), which="cublaslt-heuristic-NN")
    assert again["cached"] is True and again["duration_us"] == base["duration_us"]
    tuned = profile_baseline(shape, pool.native_so(), which="cublaslt-autotune-NN")
    assert tuned["available"], tuned
    assert tuned["algo"] == "autotune (cached)"


@pytest.mark.gpu
def test_profiling_never_changes_the_timing(pool):
    from evaluator import record as R
    from evaluator.api import evaluate

    src = (KERNELS / "reference_wmma.cu").read_text()
    shape = (2048, 2048, 2048)
    plain = evaluate(src, shape, pool=pool, ncu=False, seed=11)
    prof = evaluate(src, shape, pool=pool, ncu=True, seed=11)
    assert plain.status == prof.status == R.OK, (plain.reason, prof.reason)
    assert plain.ncu is None and prof.ncu["available"], prof.ncu
    worker_pid = pool._workers[0].proc.pid
    assert prof.ncu["pid"] not in (worker_pid, os.getpid())  # ncu ran its own process, not the timing worker
    assert all(k["pid"] == prof.ncu["pid"] for k in prof.ncu["kernels"])
    a, b = plain.speedup("cublaslt-autotune-max"), prof.speedup("cublaslt-autotune-max")
    assert abs(a - b) / a < 0.10, (a, b)
    assert abs(plain.candidate.median_us - prof.candidate.median_us) / plain.candidate.median_us < 0.10
