"""scripts/release_adapter.py and scripts/bench_release_kernels.py: a PyTorch-extension kernel in the CUDA-L2
release's form is brought into the kernel contract, passes the screen, builds with nvcc, and (on a GPU) goes
through every check of the evaluator; an fp16 accumulator under an fp32 label is caught and timed in its own
class. The fixture is this project's own code, in the release's form."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.compile import compile_kernel
from evaluator.screen import screen
from script_module import load_script

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "kernels" / "release_style" / "naive_extension.cu"
ra = load_script("release_adapter")
bench = load_script("bench_release_kernels")


def fp16_variant() -> str:
    return FIXTURE.read_text().replace("#define ACC_T float", "#define ACC_T half")


def test_launch_configurations_get_the_callers_stream():
    s = ra.STREAM
    def launches(text):
        return ra._rewrite_groups(text, "<<<", ">>>", ra._launch_args)

    text, n = launches("k<<<grid, block>>>(a); k2<<<dim3(x, y), 128, smem>>>(b); k3<<<g, b, 0, 0>>>(c);")
    assert n == 3
    assert f"<<<grid, block, 0, {s}>>>" in text
    assert f"<<<dim3(x, y), 128, smem, {s}>>>" in text
    assert f"<<<g, b, 0, {s}>>>" in text
    templated, n = launches("kern<T, Policy<A, B>><<<grid, block>>>(x);")
    assert n == 1 and templated.startswith("kern<T, Policy<A, B>><<<grid, block, 0, ")


def test_cutlass_calls_get_the_callers_stream_and_explicit_streams_stay():
    s = ra.STREAM
    text = ("status = gemm.initialize(arguments, workspace.get());\nstatus = gemm.run();\n"
            "g2.initialize(args, ws, my_stream); g2.run(my_stream); h.initialize(args);\n"
            "cutlass::ClusterLaunchParams params = {grid, block, cluster, smem};")
    out = ra.adapt("void cuda_l2_x(torch::Tensor a, torch::Tensor b, torch::Tensor bc, torch::Tensor c) {\n"
                   + text + "\n}\n", (64, 64, 64))
    assert f"gemm.initialize(arguments, workspace.get(), {s})" in out.source
    assert f"gemm.run({s})" in out.source
    assert "g2.initialize(args, ws, my_stream); g2.run(my_stream)" in out.source
    assert f"h.initialize(args, nullptr, {s})" in out.source
    assert f"params = {{grid, block, cluster, smem, {s}}}" in out.source
    assert out.rewrites[".run() given the caller's stream"] == 1
    assert out.rewrites[".initialize() given the caller's stream"] == 2
    assert out.rewrites["ClusterLaunchParams given the caller's stream"] == 1


def test_a_file_without_one_entry_point_is_not_adaptable():
    with pytest.raises(ra.NotAdaptable, match="found none"):
        ra.adapt("__global__ void k() {}\n", (64, 64, 64))
    with pytest.raises(ra.NotAdaptable, match="PYBIND11_MODULE"):
        ra.adapt(FIXTURE.read_text() + "PYBIND11_MODULE(x, m) {}\n", (64, 64, 64))


def test_the_adapted_fixture_passes_the_screen_and_builds_for_sm90a():
    a = ra.adapt(FIXTURE.read_text(), (128, 64, 96))
    assert a.entry == "cuda_l2_h100_fp32"
    assert a.rewrites == {"torch includes dropped": 2, "launches put on the caller's stream": 1,
                          "cudaDeviceSynchronize() removed": 1}
    assert "torch/extension.h" not in a.source and "cudaDeviceSynchronize" not in a.source
    assert "if (M != 128 || N != 64 || K != 96) return 1;" in a.source
    assert screen(a.source) == []
    info = compile_kernel(a.source, "sm_90a")
    assert info.ok, info.log[-2000:]
    info16 = compile_kernel(ra.adapt(fp16_variant(), (128, 64, 96)).source, "sm_90a")
    assert info16.ok, info16.log[-2000:]


def test_what_breaks_the_contract_stays_visible_to_the_screen():
    text = FIXTURE.read_text().replace("cudaDeviceSynchronize();", "cudaStream_t s; cudaStreamCreate(&s);")
    reasons = screen(ra.adapt(text, (64, 64, 64)).source)
    assert any("cudaStreamCreate" in r for r in reasons)


def test_set_names_and_side_tables(tmp_path):
    assert bench.claimed_acc("h100_F32F16F16F32") == "fp32"
    assert bench.claimed_acc("a100_F16F16F16F16") == "fp16"
    with pytest.raises(ValueError, match="accumulator"):
        bench.claimed_acc("h100")
    (tmp_path / "eval_results").mkdir()
    (tmp_path / "eval_results" / "cuda_l2_h100_F32F16F16F32_speedup_offline.csv").write_text(
        "mnk,cuBLAS-max,cuBLASLt-auto-tuning-max\n64_64_128,1.5,1.172\n8192_4096_16384,1.0,0.981\n")
    assert bench.release_claims(tmp_path, "h100_F32F16F16F32", "offline") == {(64, 64, 128): 1.172, (8192, 4096, 16384): 0.981}
    t = tmp_path / "ours.md"
    t.write_text("# x\n\n## offline\n\n| M | N | K | speedup vs AutoTuning-max | 95% CI |\n|---|---|---|---|---|\n"
                 "| 64 | 64 | 128 | 2.114 | 2.1–2.2 |\n| 1 | 2 | 3 | – | – |\n\n## server\n\n| 64 | 64 | 128 | 1.1 | x |\n")
    assert bench.ours_from_table(t) == {(64, 64, 128): 2.114}


def _release_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    kdir = tmp_path / "release" / "kernels" / "h100_F32F16F16F32"
    kdir.mkdir(parents=True)
    for name, text in files.items():
        (kdir / name).write_text(text)
    return tmp_path / "release"


def test_compile_only_reports_built_refused_and_missing(tmp_path):
    refused = FIXTURE.read_text().replace("cudaDeviceSynchronize();", "cudaStream_t s; cudaStreamCreate(&s);")
    rel = _release_dir(tmp_path, {"128_64_96.cu": FIXTURE.read_text(), "64_64_64.cu": refused})
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("128 64 96\n64 64 64\n256 256 256\n")
    r = subprocess.run([sys.executable, "scripts/bench_release_kernels.py", "--release", str(rel), "--shapes",
                        str(shapes), "--out", str(tmp_path / "out"), "--compile-only", "--jobs", "1"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "adapted 1 of 3; built 1" in r.stdout
    assert "screen: " in r.stdout and "cudaStreamCreate" in r.stdout
    assert "the release has no kernel for this shape" in r.stdout


def test_timing_without_a_gpu_is_refused_before_anything_is_written(tmp_path):
    from evaluator.gpu import has_gpu

    if has_gpu():
        pytest.skip("this machine has a GPU")
    rel = _release_dir(tmp_path, {"128_64_96.cu": FIXTURE.read_text()})
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("128 64 96\n")
    r = subprocess.run([sys.executable, "scripts/bench_release_kernels.py", "--release", str(rel), "--shapes",
                        str(shapes), "--out", str(tmp_path / "out"), "--arch", "sm_90a"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "needs a CUDA GPU" in r.stderr and "--compile-only" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.gpu
def test_an_fp16_accumulator_under_an_fp32_label_is_caught_and_timed_in_its_class(tmp_path):
    shape = (256, 256, 1024)
    name = "_".join(map(str, shape)) + ".cu"
    rel = _release_dir(tmp_path, {name: fp16_variant()})
    rows = bench.prepare(rel, "h100_F32F16F16F32", [shape])
    for r, info in zip(rows, [compile_kernel(r["source"]) for r in rows]):
        r["built"] = info.ok
    done: dict = {}
    bench.evaluate_rows(rows, done, "fp32", ["offline"], float("inf"), lambda: None)
    [e] = done["256x256x1024/offline"]
    assert e["claimed"]["status"] == "incorrect"
    assert set(e["claimed"]["failed_checks"]) <= bench.ACCURACY_CHECKS
    assert e["fp16_class"]["status"] == "ok" and e["fp16_class"]["speedup"] > 0


@pytest.mark.gpu
def test_the_adapted_fixture_passes_every_check_and_is_timed(tmp_path):
    from evaluator.api import evaluate

    a = ra.adapt(FIXTURE.read_text(), (128, 64, 96))
    res = evaluate(a.source, (128, 64, 96), acc="fp32", mode="offline")
    assert res.status == "ok", (res.reason, [c.name for c in res.checks if not c.passed])
    assert all(c.passed for c in res.checks) and res.speedup("cublaslt-autotune-max") > 0
    other = evaluate(a.source, (64, 64, 96), acc="fp32")
    assert other.status == "unsupported_shape"
    assert json.loads(res.to_json())["status"] == "ok"


def test_table_counts_refused_and_unmeasured_shapes_as_lost():
    rows = [{"shape": [64, 64, 128], "built": True, "source": "x"},
            {"shape": [8192, 4096, 16384], "built": True, "source": "y"},
            {"shape": [4096, 1024, 12288], "refused": "screen: cudaDeviceSetLimit: changes device state"}]
    ok = {"acc": "fp32", "status": "ok", "reason": "", "failed_checks": [], "speedup": 1.25, "speedup_median": 1.2,
          "gpu": {"name": "NVIDIA H100"}, "max_abs_diff": 0.01}
    bad = {**ok, "status": "incorrect", "failed_checks": ["accumulator_honesty"], "speedup": None}
    done = {"64x64x128/offline": [{"claimed": ok}, {"claimed": {**ok, "speedup": 1.3}},
                                  {"claimed": {**ok, "speedup": 1.1}}],
            "8192x4096x16384/offline": [{"claimed": bad, "fp16_class": {**ok, "acc": "fp16", "speedup": 1.1}}]}
    meta = {"set": "h100_F32F16F16F32", "acc": "fp32", "modes": ["offline"], "shapes": "s.txt", "date": "d",
            "device": "NVIDIA H100", "release_commit": "abc", "commands": ["c1", "c2"], "ours": "ours.md"}
    md = bench.table(rows, done, meta, {"offline": {(64, 64, 128): 1.172}}, {(64, 64, 128): 2.0, (8192, 4096, 16384): 1.0})
    assert "| 64 | 64 | 128 | 1.250 (1.250 / 1.300 / 1.100) | – | ok | 1.172 | 2.000 |" in md
    assert "| 8192 | 4096 | 16384 | – | 1.100 | incorrect in 1 of 1: accumulator_honesty | – | 1.000 |" in md
    assert "- command: `c1`" in md and "- command: `c2`" in md
    assert "| 4096 | 1024 | 12288 | – | – | screen: cudaDeviceSetLimit: changes device state | – | – |" in md
    assert "1 of 3 shapes timed, 1 above 1.0" in md and "win rate 1/3" in md
    assert "On the 1 shapes timed here and in ours: release geomean 1.250, ours 2.000." in md


def test_table_has_a_head_to_head_section_when_there_is_one():
    meta = {"set": "h100_F32F16F16F32", "acc": "fp32", "modes": ["offline"], "shapes": "s.txt", "date": "d",
            "device": "x", "release_commit": "abc", "commands": ["c"], "ours_run": "/tmp/runs/h2h"}
    h2h = {"128x16384x64/offline": [
        {"ours": 1.2, "release": 1.05, "status": "ok", "reason": "", "release_refused": None, "gpu": {}},
        {"ours": 1.22, "release": 1.07, "status": "ok", "reason": "", "release_refused": None, "gpu": {}}]}
    md = bench.table([], {}, meta, {}, {}, h2h)
    assert "Our winners from `/tmp/runs/h2h`" in md
    assert "| 128 | 16384 | 64 | offline | 1.210 (1.200 / 1.220) | 1.060 (1.050 / 1.070) | ok |" in md


@pytest.mark.gpu
def test_head_to_head_times_our_winner_and_the_release_kernel_in_the_same_rounds(tmp_path):
    shape = (128, 64, 96)
    rel = _release_dir(tmp_path, {"128_64_96.cu": FIXTURE.read_text()})
    rows = bench.prepare(rel, "h100_F32F16F16F32", [shape])
    rows[0]["built"] = True
    done = {"128x64x96/offline": [{"claimed": {"status": "ok"}}]}
    ours = (REPO / "tests" / "kernels" / "reference_naive.cu").read_text()
    h2h: dict = {}
    bench.head_to_head(rows, done, h2h, {shape: ours}, "fp32", ["offline"], float("inf"), lambda: None)
    [e] = h2h["128x64x96/offline"]
    assert e["status"] == "ok" and e["ours"] > 0 and e["release"] > 0 and not e["release_refused"]
