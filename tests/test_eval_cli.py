"""`cudal2 eval` / `cudal2 baselines` end to end: compile-only runs through the real CLI process; without a GPU the
GPU paths say so and exit 2; bad input is a clear error with exit 2."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main
from evaluator.gpu import has_gpu


pytestmark = pytest.mark.usefixtures("session_build_cache")


ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"
no_gpu_only = pytest.mark.skipif(has_gpu(), reason="checks the message shown on machines without a GPU")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    # The installed console script where there is one (that is what users run), else the module.
    exe = [shutil.which("cudal2")] if shutil.which("cudal2") else [sys.executable, "-m", "agent.cli"]
    return subprocess.run([*exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, COLUMNS="120"))


def test_compile_only_end_to_end_writes_the_record(tmp_path):
    out = tmp_path / "rec" / "naive.json"
    p = run_cli("eval", str(KERNELS / "reference_naive.cu"), "--compile-only", "--arch", "sm_90a",
                "--shape", "128", "256", "64", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "compiled" in p.stdout and "naive_hgemm" in p.stdout
    rec = json.loads(out.read_text())
    assert rec["status"] == "compiled" and rec["shape"] == [128, 256, 64]
    assert rec["compile"]["ok"] and rec["compile"]["arch"] == "sm_90a" and rec["compile"]["registers"] > 0
    assert Path(rec["compile"]["so_path"]).is_file()
    assert rec["code_length"] == len((KERNELS / "reference_naive.cu").read_text())


def test_compile_only_screen_rejection_and_compile_error(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["eval", str(KERNELS / "hostile" / "extra_stream.cu"), "--compile-only", "--arch", "sm_80",
               "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 1 and "screen_rejected" in text and "cudaStreamCreateWithFlags" in text
    rec = json.loads(out.read_text())
    assert rec["status"] == "screen_rejected" and "cudaStreamCreateWithFlags" in rec["reason"]

    bad = tmp_path / "bad.cu"
    bad.write_text((KERNELS / "reference_naive.cu").read_text().replace("float acc = 0.f;", "float acc = 0.f"))
    rc = main(["eval", str(bad), "--compile-only", "--arch", "sm_80", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 1 and "compile_error" in text and "error" in text
    rec = json.loads(out.read_text())
    assert rec["status"] == "compile_error" and rec["compile"]["ok"] is False and "expected a" in rec["compile"]["log"]


@no_gpu_only
def test_eval_without_gpu_says_a_gpu_is_needed(tmp_path):
    out = tmp_path / "nogpu.json"
    p = run_cli("eval", str(KERNELS / "reference_naive.cu"), "--shape", "128", "128", "128", "--json", str(out))
    assert p.returncode == 2
    assert "a CUDA GPU is needed" in p.stderr and "--compile-only" in p.stderr
    assert json.loads(out.read_text())["status"] == "no_gpu"


@no_gpu_only
def test_baselines_without_gpu_says_a_gpu_is_needed(capsys):
    assert main(["baselines", "--shape", "64", "64", "64"]) == 2
    assert "a CUDA GPU is needed" in capsys.readouterr().err


@no_gpu_only
def test_compile_only_without_gpu_builds_for_sm_90a(tmp_path):
    out = tmp_path / "default_arch.json"
    assert main(["eval", str(KERNELS / "reference_naive.cu"), "--compile-only", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["compile"]["arch"] == "sm_90a"


@pytest.mark.parametrize("args, message", [
    (["--shape", "0", "128", "128"], "M must be positive"),
    (["--shape", "128", "-4", "128"], "N must be positive"),
    (["--shape", "128", "128", "x"], "three integers"),
    (["--shape", "128", "128", "100000"], "beyond what the evaluator supports"),
])
def test_bad_shape_is_a_clear_error(args, message, capsys):
    assert main(["eval", str(KERNELS / "reference_naive.cu"), *args]) == 2
    assert message in capsys.readouterr().err


def test_bad_files_and_arch_are_clear_errors(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "missing.cu"), "--shape", "1", "1", "1"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["eval", str(tmp_path), "--compile-only", "--arch", "sm_90a"]) == 2
    assert "not a file" in capsys.readouterr().err
    binary = tmp_path / "k.cu"
    binary.write_bytes(b"\xff\xfe\x00binary")
    assert main(["eval", str(binary), "--compile-only", "--arch", "sm_90a"]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.cu"
        locked.write_text("x")
        locked.chmod(0)
        assert main(["eval", str(locked), "--compile-only", "--arch", "sm_90a"]) == 2
        assert "cannot read" in capsys.readouterr().err
    assert main(["eval", str(KERNELS / "reference_naive.cu"), "--compile-only", "--arch", "volta"]) == 2
    assert "not a GPU architecture" in capsys.readouterr().err
    assert main(["eval", str(KERNELS / "reference_naive.cu")]) == 2
    assert "--shape M N K is required" in capsys.readouterr().err
    # an unusable --json is refused before the compile, which can take a minute
    (tmp_path / "afile").write_text("mine")
    for bad, msg in ((tmp_path / "afile" / "x.json", f"cannot create its folder ({tmp_path / 'afile'}"),
                     (tmp_path, "is a folder")):
        assert main(["eval", str(KERNELS / "reference_naive.cu"), "--compile-only", "--arch", "sm_90a", "--json",
                     str(bad)]) == 2
        r = capsys.readouterr()
        assert msg in r.err and "compile" not in r.out, (r.out, r.err)
    assert (tmp_path / "afile").read_text() == "mine"


@no_gpu_only
def test_profile_without_gpu_says_a_gpu_is_needed(tmp_path, capsys):
    assert main(["profile", str(KERNELS / "reference_naive.cu"), "--shape", "64", "64", "64"]) == 2
    err = capsys.readouterr().err
    assert "a CUDA GPU is needed" in err and "Nsight Compute" in err
    assert main(["profile", str(KERNELS / "reference_naive.cu"), "--shape", "64", "0", "64"]) == 2
    assert "N must be positive" in capsys.readouterr().err


def test_quick_and_paper_are_exclusive(capsys):
    with pytest.raises(SystemExit) as e:
        main(["eval", str(KERNELS / "reference_naive.cu"), "--shape", "1", "1", "1", "--quick", "--paper"])
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_baselines_table_says_how_each_autotuning_pick_was_made():
    from evaluator.cli import _baseline_detail

    steady = {"algos_offered": 8, "algos_valid": 7, "screening_rank": 2, "cached": True, "median_ms": 0.36,
              "steady": {"finalists": 4, "chosen_finalist": 2, "finalist_median_ms": [0.43, 0.42, 0.41, 0.44]}}
    assert _baseline_detail(steady) == ("7/8 algos valid, 4 leaders re-timed power-steady, picked screening #3, "
                                        "held/burst 1.14, cached")
    assert _baseline_detail({"algos_offered": 3, "algos_valid": 3, "screening_rank": 0}) == (
        "3/3 algos valid, screening only, picked screening #1")
    varied = {"algos_offered": 136, "algos_valid": 101, "algos_variations": 128, "variations_valid": 94,
              "chosen_variation": True, "screening_rank": 1, "steady": {"finalists": 4, "chosen_finalist": 0,
                                                                        "finalist_median_ms": [0.2]}}
    assert _baseline_detail(varied) == ("101/136 algos valid (94 of 128 variations), 4 leaders re-timed "
                                        "power-steady, picked screening #2 (a variation)")
    plain = {"algo": "heuristic top-1", "workspace_mib": 64}
    assert _baseline_detail(plain) == "algo=heuristic top-1, workspace_mib=64"
