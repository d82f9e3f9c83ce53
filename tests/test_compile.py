"""Real nvcc builds on the CPU machine: resources, the content-hash cache, timeouts, errors, the parallel pool, and
every hostile kernel that screening lets through."""
from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path

import pytest

from evaluator import compile as C
from evaluator import record as R
from evaluator.screen import screen


pytestmark = pytest.mark.usefixtures("session_build_cache")


KERNELS = Path(__file__).parent / "kernels"
HOSTILE = KERNELS / "hostile"
NAIVE = (KERNELS / "reference_naive.cu").read_text()


def fresh(source: str) -> str:
    """The same kernel with a different content hash: a guaranteed cache miss."""
    return f"// nonce {uuid.uuid4().hex}\n{source}"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", ["reference_naive.cu", "reference_wmma.cu"])
def test_reference_kernels_compile_with_resources(name, arch):
    info = C.compile_kernel((KERNELS / name).read_text(), arch)
    assert info.ok, info.log
    assert info.arch == arch
    assert Path(info.so_path).is_file()
    assert f"-gencode=arch={arch.replace('sm_', 'compute_')},code={arch}" in info.flags
    assert info.kernels and all(k["registers"] > 0 and k["arch"] == arch for k in info.kernels)
    assert info.registers == max(k["registers"] for k in info.kernels)
    assert info.spill_stores == 0 and info.spill_loads == 0
    if name == "reference_wmma.cu":
        # Static shared memory of the 64x64 tiles; both template instances (vector and scalar loads) reported.
        assert info.smem_bytes and info.smem_bytes >= 64 * 68 * 4
        assert sorted(k["name"] for k in info.kernels) == ["wmma_hgemm<false>", "wmma_hgemm<true>"]
    else:
        assert [k["name"] for k in info.kernels] == ["naive_hgemm"]
    assert "ptxas info" in info.log
    assert C.compile_status(info) == (R.COMPILED, "")


def _build_dirs_in_flight(key: str) -> list[str]:
    """Processes whose command line still mentions this key's temporary build directory."""
    hits = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if f"tmp-{key[:12]}" in cmd or f"tmp-{key[:12]}" in cwd:
            hits.append(cmd)
    return hits


def test_cache_concurrent_builds_then_hit_then_misses(tmp_path):
    src = fresh(NAIVE)
    cache = tmp_path / "cache"
    # Two builds of the same source at once: both succeed, one entry wins, no temporary directory is left.
    results: list[R.CompileInfo] = []
    threads = [threading.Thread(target=lambda: results.append(C.compile_kernel(src, "sm_90a", cache_dir=cache)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.ok for r in results), [r.log for r in results]
    so = Path(results[0].so_path)
    assert so.is_file() and all(r.so_path == str(so) for r in results)
    assert not [p for p in cache.rglob("tmp-*")]
    mtime = so.stat().st_mtime_ns

    started = time.monotonic()
    hit = C.compile_kernel(src, "sm_90a", cache_dir=cache)
    elapsed = time.monotonic() - started
    assert hit.ok and hit.cached and hit.so_path == str(so)
    assert elapsed < 1.5, f"a cache hit took {elapsed:.2f} s"
    assert so.stat().st_mtime_ns == mtime  # nvcc did not run again
    assert hit.kernels == results[0].kernels and hit.registers == results[0].registers

    so.unlink()  # a damaged entry is rebuilt, not served
    rebuilt = C.compile_kernel(src, "sm_90a", cache_dir=cache)
    assert rebuilt.ok and not rebuilt.cached and Path(rebuilt.so_path).is_file()

    other_flags = C.compile_kernel(src, "sm_90a", cache_dir=cache, extra_flags=["-DCUDAL2_TEST_VARIANT=1"])
    assert other_flags.ok and not other_flags.cached and other_flags.cache_key != hit.cache_key
    other_arch = C.compile_kernel(src, "sm_80", cache_dir=cache)
    assert other_arch.ok and not other_arch.cached and other_arch.so_path != hit.so_path
    assert other_arch.source_hash == hit.source_hash


def test_compile_timeout_kills_nvcc_and_is_not_cached(tmp_path):
    heavy = fresh('#include <cute/tensor.hpp>\n#include <cutlass/gemm/device/gemm_universal.h>\n' + NAIVE)
    info = C.compile_kernel(heavy, "sm_90a", timeout=1.0, cache_dir=tmp_path)
    assert not info.ok
    assert info.log.startswith(C.TIMEOUT_PREFIX) and "1 s" in info.log.splitlines()[0]
    status, reason = C.compile_status(info)
    assert status == R.COMPILE_TIMEOUT and "did not finish" in reason
    assert info.seconds < 20
    time.sleep(0.5)
    assert _build_dirs_in_flight(info.cache_key) == []  # the whole process group is gone
    assert not list(tmp_path.rglob("info.json"))  # a timeout is never cached


def test_compile_error_keeps_the_nvcc_message_and_is_cached(tmp_path):
    bad = fresh(NAIVE.replace("acc += ", "acc += undeclared_scale * "))
    info = C.compile_kernel(bad, "sm_80", cache_dir=tmp_path)
    assert not info.ok and info.so_path is None
    assert 'identifier "undeclared_scale" is undefined' in info.log
    status, reason = C.compile_status(info)
    assert status == R.COMPILE_ERROR and "undeclared_scale" in reason
    again = C.compile_kernel(bad, "sm_80", cache_dir=tmp_path)
    assert again.cached and not again.ok and "undeclared_scale" in again.log


def test_screen_refusal_never_reaches_nvcc(tmp_path):
    src = (HOSTILE / "device_sync.cu").read_text()
    info = C.compile_kernel(src, "sm_90a", cache_dir=tmp_path)
    assert not info.ok and info.log.startswith(C.SCREEN_PREFIX)
    assert C.compile_status(info)[0] == R.SCREEN_REJECTED and "cudaDeviceSynchronize" in info.log
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_compile_many_keeps_order_and_builds_duplicates_once():
    a = fresh(NAIVE)
    b = fresh(NAIVE.replace("dim3 block(32, 8)", "dim3 block(32, 4)"))
    bad = fresh(NAIVE.replace("return cudaGetLastError()", "return cudaGetLastErr()"))
    infos = C.compile_many([a, b, a, bad], "sm_90a", jobs=2)
    assert [i.ok for i in infos] == [True, True, True, False]
    assert infos[0].so_path == infos[2].so_path != infos[1].so_path
    assert [i.source_hash for i in infos] == [C.source_hash(s) for s in (a, b, a, bad)]
    assert "cudaGetLastErr" in infos[3].log


def _hostile_expectations() -> dict[str, dict]:
    return json.loads((HOSTILE / "expected.json").read_text())


def test_every_hostile_kernel_has_an_expectation_and_valid_fields():
    expected = _hostile_expectations()
    files = sorted(p.name for p in HOSTILE.glob("*.cu"))
    assert sorted(expected) == files and len(files) >= 14
    checks = {"exact_binary", "baseline_bounded_deviation", "accumulator_honesty", "guard_bands",
              "output_fully_written", "inputs_unchanged", "pointer_independence", "deterministic",
              "work_completes_on_stream", "waits_for_predecessor", "sanitizer_memcheck", "sanitizer_racecheck",
              # the verdicts on timing: the last timed batch's output, every timed output, repeated vs changing inputs
              "timed_output_correct", "timed_outputs_verified", "stateless_timing"}
    for name, e in expected.items():
        for verdict in (e, e.get("runtime")) if "runtime" in e else (e,):
            assert verdict["status"] in R.STATUSES, name
            assert verdict["check"] is None or verdict["check"] in checks, name
            assert (verdict["status"] == R.INCORRECT) <= (verdict["check"] is not None), name
            assert set(verdict.get("also", [])) <= checks, name
        assert e["why"] and len(e["shape"]) == 3, name
        if "screen_line" in e:
            assert e["status"] == R.SCREEN_REJECTED and e["screen_reason"] and "runtime" in e, name


@pytest.mark.slow
def test_hostile_kernels_compile_unless_screened():
    """Kernels meant to fail at run time must build (so they reach the GPU checks); kernels meant to be screened
    must be refused by the text screen or, for macro tricks, by the object-symbol screen."""
    expected = _hostile_expectations()
    to_build = {n: (HOSTILE / n).read_text() for n in sorted(expected) if not screen((HOSTILE / n).read_text())}
    for name, e in expected.items():
        if name not in to_build:
            assert e["status"] == R.SCREEN_REJECTED, f"{name} was refused by the text screen"
    infos = dict(zip(to_build, C.compile_many(list(to_build.values()), "sm_90a")))
    for name, info in infos.items():
        status, reason = C.compile_status(info)
        want = R.SCREEN_REJECTED if expected[name]["status"] == R.SCREEN_REJECTED else R.COMPILED
        assert status == want, f"{name}: {status}: {reason}\n{info.log[-2000:]}"
    assert "cudaStreamCreateWithFlags" in infos["macro_stream.cu"].log
    again = C.compile_kernel(to_build["macro_stream.cu"], "sm_90a")  # the symbol-screen refusal is cached
    assert again.cached and C.compile_status(again)[0] == R.SCREEN_REJECTED and again.so_path is None


def test_resolve_arch_and_gencode():
    assert C.resolve_arch("sm_90a") == "sm_90a"
    assert C.resolve_arch("90a") == "sm_90a"
    assert C.resolve_arch("80") == "sm_80"
    assert C.resolve_arch("SM_80") == "sm_80"
    assert C.gencode_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert C.gencode_flags("80") == ["-gencode=arch=compute_80,code=sm_80"]
    for bad in ("hopper", "sm_9", "sm_90x", ""):
        with pytest.raises(ValueError, match="architecture"):
            C.resolve_arch(bad)
    with pytest.raises(ValueError, match="cannot build for sm_12"):
        C.resolve_arch("sm_12")


def test_resolve_arch_defaults_to_the_gpu_or_sm_90a():
    from evaluator.gpu import has_gpu, native_arch

    assert C.resolve_arch(None) == (native_arch() if has_gpu() else "sm_90a")
    assert "sm_90a" in C.ARCH_HELP


def test_toolchain_facts():
    assert C.nvcc_version().count(".") == 2
    dirs = C.cutlass_include_dirs()
    assert (dirs[0] / "cutlass" / "cutlass.h").is_file() and (dirs[0] / "cute" / "tensor.hpp").is_file()
    assert "--use_fast_math" not in C.BASE_FLAGS and "-O3" in C.BASE_FLAGS


def test_parse_ptxas_report_with_spills_and_smem():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6kernelPfi' for 'sm_90a'
ptxas info    : Function properties for _Z6kernelPfi
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 49152 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function '_Z5smallv' for 'sm_90a'
ptxas info    : Function properties for _Z5smallv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 352 bytes cmem[0]
"""
    ks = C.parse_ptxas(log)
    assert [k["name"] for k in ks] == ["kernel", "small"]
    big = ks[0]
    assert (big["registers"], big["smem_bytes"], big["spill_stores"], big["spill_loads"], big["stack_bytes"],
            big["barriers"]) == (255, 49152, 40, 36, 48, 1)
    assert big["signature"] == "kernel(float*, int)" and big["mangled"] == "_Z6kernelPfi"
    assert ks[1]["registers"] == 8 and ks[1]["smem_bytes"] == 0
    # Deep CUTLASS template names that c++filt gives up on still get a readable short name.
    assert C._short_name("_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock") == "cutlass::Kernel<...>"


def test_cache_hit_keeps_the_build_cost():
    src = (KERNELS / "reference_naive.cu").read_text() + "\n// build-cost probe\n"
    first = C.compile_kernel(src, "sm_80")
    again = C.compile_kernel(src, "sm_80")
    assert first.ok and again.ok and again.cached and not first.cached
    assert first.build_seconds > 0 and again.build_seconds == first.build_seconds
    assert again.seconds < first.build_seconds
