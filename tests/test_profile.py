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


# ---- golden outputs: real ncu runs on an H200 (ncu 2025.3.1), see tests/golden/ncu/versions.txt ------------------
def _golden(name):
    import csv
    import io

    text = (GOLDEN / f"{name}.txt").read_text()
    header, units, rows = P.parse_raw_csv(text)
    kernels = [P.kernel_record(r, units) for r in rows]
    raw = list(csv.DictReader(io.StringIO(P.csv_block(text))))  # independent reading: the plain csv module
    return header, units, kernels, raw


def _sane(k):
    for key in ("sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l1_hit_rate_pct",
                "l2_hit_rate_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct", "tensor_pipe_pct",
                "issue_active_pct", "bank_conflict_pct"):
        assert k[key] is not None and 0.0 <= k[key] <= 100.0, (key, k[key])
    assert k["sm_count"] == 132  # H200
    assert k["spill_bytes"] == 0
    assert k["stalls"] and "long_scoreboard" in k["stalls"]
    assert not any(r in k["name"] for r in RUNNER_KERNELS)


@pytest.mark.parametrize("name,grid,variant", [("wmma_1024", [16, 16, 1], "wmma_hgemm<1>"),
                                               ("wmma_64", [1, 1, 1], "wmma_hgemm<1>"),
                                               ("wmma_ragged", [3, 2, 1], "wmma_hgemm<0>")])
def test_golden_wmma_profiles(name, grid, variant):
    header, units, kernels, raw = _golden(name)
    assert len(kernels) == 1  # the runner's fill/transpose kernels are outside the profile range
    k = kernels[0]
    _sane(k)
    # facts from tests/kernels/reference_wmma.cu: 128 threads, 64x64 tiles, 17408 B of static shared memory,
    # the vector path when N and K are multiples of 8 (1024, 64), the scalar one otherwise (77x130x200)
    assert variant in k["name"] and k["block"] == [128, 1, 1] and k["grid"] == grid
    assert k["block_size"] == 128 and k["grid_size"] == grid[0] * grid[1]
    assert k["smem_per_block_bytes"] == 64 * (64 + 4) * 4
    assert units["gpu__time_duration.sum"] == "ns"
    assert k["duration_us"] == pytest.approx(float(raw[1]["gpu__time_duration.sum"].replace(",", "")) / 1000)
    assert k["pid"] == int(raw[1]["Process ID"])
    assert k["tensor_pipe_pct"] > 0  # WMMA runs on the tensor pipe


def test_golden_naive_kernel_leaves_the_tensor_cores_idle():
    _, _, kernels, _ = _golden("naive_512")
    k = kernels[0]
    _sane(k)
    assert "naive_hgemm" in k["name"] and k["block"] == [32, 8, 1] and k["grid"] == [16, 64, 1]
    assert k["smem_per_block_bytes"] == 0 and k["tensor_pipe_pct"] < 1.0
    from evaluator.bottleneck import bottleneck

    b = bottleneck(P.summarize(kernels))
    assert "tensor cores are idle" in b["why"]


@pytest.mark.parametrize("name", ["baseline_cublaslt_heuristic_NN_1024", "baseline_cublas_TN_1024",
                                  "baseline_cublaslt_autotune_NN_1024"])
def test_golden_baseline_profiles(name):
    header, _, kernels, _ = _golden(name)
    assert P.missing_metrics(header, P.metric_names()) == []  # Hopper offers the whole set
    assert len(kernels) == 1
    k = kernels[0]
    _sane(k)
    # cuBLAS picks a Hopper TMA/wgmma kernel: three warpgroups, most of the 227 KiB of shared memory
    assert "sm90" in k["name"] and k["block_size"] == 384 and k["smem_per_block_bytes"] > 150_000
    assert k["tensor_pipe_pct"] > 20.0  # the hmma pipe counter covers wgmma on Hopper
    assert k["occupancy_limits"]["registers"] == 1
    rec = P.summarize(kernels)
    assert rec["main_kernel"] == P.short_name(k["name"]) and rec["duration_us"] == pytest.approx(k["duration_us"], abs=1e-3)
    assert "long_scoreboard" in rec["top_stalls"]


def test_golden_summary_is_json_and_has_what_prompts_read():
    _, _, kernels, _ = _golden("wmma_1024")
    rec = P.summarize(kernels)
    assert json.loads(json.dumps(rec)) == rec
    for key in ("duration_us", "sm_throughput_pct", "dram_throughput_pct", "l1_hit_rate_pct", "l2_hit_rate_pct",
                "achieved_occupancy_pct", "tensor_pipe_pct", "top_stalls", "registers_per_thread",
                "smem_per_block_bytes", "spill_bytes", "bank_conflict_pct"):
        assert rec[key] is not None, key
    assert rec["occupancy_limiter"] == "registers"  # 72 registers x 128 threads: 7 blocks; warps allow 16


def test_golden_unknown_metric_is_left_out_silently():
    # ncu 2025.3 answers a metric it does not know by leaving it out of the report, without an error.
    text = (GOLDEN / "unknown_metric.txt").read_text()
    assert "==ERROR==" not in text
    header, units, rows = P.parse_raw_csv(text)
    assert P.missing_metrics(header, ["gpu__time_duration.sum", "sm__no_such_metric_cudal2.sum"]) == [
        "sm__no_such_metric_cudal2.sum"]
    k = P.kernel_record(rows[0], units)
    assert k["duration_us"] > 0 and k["sm_throughput_pct"] is None and k["stalls"] == {}


def test_golden_version_and_metric_availability():
    assert P.ncu_version((GOLDEN / "versions.txt").read_text()) == "2025.3.1.0"
    avail = json.loads((GOLDEN / "metric_availability.json").read_text())
    listed = {m.split(".")[0] for m in P.metric_names()}
    # everything the set asks for is either a listed counter on Hopper or a launch attribute
    assert all(m in avail["offered"] or m.startswith("launch__") or m.startswith("sm__maximum_warps")
               or m.endswith("op_gmma") for m in listed), sorted(listed - set(avail["offered"]))


def test_golden_cli_record_puts_candidate_next_to_baseline():
    r = json.loads((GOLDEN / "cli_wmma_2048.json").read_text())
    cand, base = r["candidate"], r["baseline"]["record"]
    assert cand["available"] and base["available"] and r["baseline"]["name"].startswith("cublaslt")
    assert cand["pid"] != base["pid"]  # each profile is its own process
    assert cand["bottleneck"]["label"] in LABELS and base["bottleneck"]["label"] in LABELS


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
