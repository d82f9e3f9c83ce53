"""Screening on good and bad sources (text only: no compiler needed)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator import contract
from evaluator.screen import screen, strip_source

KERNELS = Path(__file__).parent / "kernels"
HOSTILE = KERNELS / "hostile"
NAIVE = (KERNELS / "reference_naive.cu").read_text()
HEAD = "#include <cuda_fp16.h>\n#include <cuda_runtime.h>\n"
SIG = ('extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C, int M, int N, int K, '
       "cudaStream_t stream)")


def with_body(body: str, prelude: str = "") -> str:
    """A contract kernel whose hgemm body is `body`."""
    return f"{HEAD}{prelude}\n{SIG} {{\n{body}\n  return 0;\n}}\n"


@pytest.mark.parametrize("name", ["reference_naive.cu", "reference_wmma.cu"])
def test_reference_kernels_are_accepted(name):
    assert screen((KERNELS / name).read_text()) == []


GOOD = {
    "forbidden words in comments and strings": with_body(
        '  // cudaDeviceSynchronize(); std::thread t; #include <thread>\n'
        '  /* cudaStreamCreate(&s); fopen("x", "w"); system("ls"); */\n'
        '  const char* msg = "cudaDeviceReset getenv(HOME) exit(1)";\n  (void)msg;'),
    "extern C block": HEAD + 'extern "C" {\nint hgemm(const half* A, const half* B, const half* Bc, half* C, '
                             "int M, int N, int K, cudaStream_t s) { return 0; }\n}\n",
    "attributes between extern C and int": HEAD + 'extern "C" __attribute__((visibility("default"))) int '
                                                  "hgemm(const half* A, const half* B, const half* Bc, half* C, "
                                                  "int M, int N, int K, cudaStream_t s) { return 0; }\n",
    "CuTe, CUTLASS, libcu++, cooperative groups, pipelines, std headers": (
        "#include <cute/tensor.hpp>\n#include <cutlass/numeric_types.h>\n#include <cuda/barrier>\n"
        "#include <cuda/std/cstdint>\n#include <cooperative_groups.h>\n#include <cooperative_groups/memcpy_async.h>\n"
        "#include <cuda_pipeline.h>\n#include <mma.h>\n#include <cstdint>\n#include <algorithm>\n#include <cstdio>\n"
        "#include <iostream>\n"
        '#include "cuda_bf16.h"\n' + NAIVE),
    "allowed runtime calls": with_body(
        "  float* ws = nullptr;\n  cudaMallocAsync((void**)&ws, 1024, stream);\n"
        "  cudaMemsetAsync(ws, 0, 1024, stream);\n  cudaMemcpyAsync(ws, ws, 4, cudaMemcpyDeviceToDevice, stream);\n"
        "  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000);\n"
        "  cudaFreeAsync(ws, stream);\n  cudaEvent_t unused_type_only; (void)unused_type_only;",
        prelude="__global__ void k() {}"),
    "device asm with exit and trap, helpers named signal/kill": with_body(
        "  k<<<1, 1, 0, stream>>>(nullptr);",
        prelude='__device__ void signal(int* f) { atomicExch(f, 1); }\n'
                '__device__ int kill_count(int x) { return x; }\n'
                '__global__ void k(int* f) { if (!f) asm volatile("exit;"); if (*f < 0) asm("trap;"); signal(f); }'),
    "extern C declaration, then the definition": (
        HEAD + SIG + ";\n\nint hgemm(const half* A, const half* B, const half* Bc, half* C, int M, int N, int K, "
               "cudaStream_t s) { return 0; }\n"),
    "digit separators and raw strings": with_body(
        '  const char* doc = R"x(cudaDeviceSynchronize(); "quoted" )x";\n  (void)doc;\n'
        "  int big = 1'000'000; char c = '\"'; (void)big; (void)c;"),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_sources_are_accepted(name):
    assert screen(GOOD[name]) == []


BAD = {
    "stream create": (with_body("  cudaStream_t s2; cudaStreamCreate(&s2);"), "cudaStreamCreate"),
    "stream with priority": (with_body("  cudaStream_t s2; cudaStreamCreateWithPriority(&s2, 0, -1);"),
                             "creates no streams"),
    "driver stream": ('#include <cuda.h>\n' + with_body("  CUstream s2; cuStreamCreate(&s2, 0);"), "cuStreamCreate"),
    "event": (with_body("  cudaEvent_t e; cudaEventCreate(&e);"), "cudaEventCreate"),
    "event record": (with_body("  cudaEventRecord(nullptr, stream);"), "cudaEventRecord"),
    "graph capture": (with_body("  cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);"),
                      "cudaStreamBeginCapture"),
    "graph launch": (with_body("  cudaGraphLaunch(nullptr, stream);"), "cudaGraphLaunch"),
    "host callback": (with_body("  cudaLaunchHostFunc(stream, nullptr, nullptr);"), "cudaLaunchHostFunc"),
    "per-thread stream": (with_body("  k<<<1, 1, 0, cudaStreamPerThread>>>();", "__global__ void k() {}"),
                          "names a stream other than"),
    "device synchronize": (with_body("  cudaDeviceSynchronize();"), "cudaDeviceSynchronize"),
    "stream synchronize": (with_body("  cudaStreamSynchronize(stream);"), "synchronizes the host"),
    "thread synchronize": (with_body("  cudaThreadSynchronize();"), "cudaThreadSynchronize"),
    "device reset": (with_body("  cudaDeviceReset();"), "cudaDeviceReset"),
    "set device": (with_body("  cudaSetDevice(1);"), "cudaSetDevice"),
    "device limit": (with_body("  cudaDeviceSetLimit(cudaLimitStackSize, 1 << 20);"), "cudaDeviceSetLimit"),
    "blocking memcpy": (with_body("  cudaMemcpy(C, A, 2, cudaMemcpyDeviceToDevice);"), "*Async variant"),
    "blocking memset": (with_body("  cudaMemset(C, 0, 2);"), "cudaMemset"),
    "driver entry point": (with_body("  void* f; cudaGetDriverEntryPoint(\"cuStreamCreate\", &f, 0);"),
                           "cudaGetDriverEntryPoint"),
    "std::thread": (with_body("  std::thread t([] {}); t.join();"), "std::thread"),
    "std::async": (with_body("  auto f = std::async([] { return 1; });"), "std::async"),
    "pthread": (with_body("  pthread_t t; pthread_create(&t, nullptr, nullptr, nullptr);"), "pthread_create"),
    "openmp pragma": (with_body("  #pragma omp parallel for\n  for (int i = 0; i < 2; ++i) {}"), "#pragma omp"),
    "fork": (with_body("  fork();"), "threads or processes"),
    "fopen": (with_body('  FILE* f = fopen("/tmp/x", "w");', "#include <cstdio>"), "fopen"),
    "system": (with_body('  system("nvidia-smi");', "#include <cstdlib>"), "system"),
    "popen": (with_body('  popen("ls", "r");'), "popen"),
    "getenv": (with_body('  const char* v = getenv("X"); (void)v;'), "getenv"),
    "dlsym": (with_body('  dlsym(nullptr, "cublasGemmEx");'), "dlsym"),
    "exit": (with_body("  if (M < 0) exit(3);"), "exits or signals"),
    "std::abort": (with_body("  if (M < 0) std::abort();"), "exits or signals"),
    "syscall asm": (with_body('  asm volatile("mov $60, %%rax\\n\\tsyscall" ::: "rax");'), "system call"),
    "<thread>": ("#include <thread>\n" + NAIVE, "must not create threads"),
    "<future>": ("#include <future>\n" + NAIVE, "must not create threads"),
    "<mutex>": ("#include <mutex>\n" + NAIVE, "must not create threads"),
    "<omp.h>": ("#include <omp.h>\n" + NAIVE, "must not create threads"),
    "<fstream>": ("#include <fstream>\n" + NAIVE, "I/O"),
    "std::cin": (with_body("  int x; std::cin >> x;", "#include <iostream>"), "reads the process's input"),
    "fread stdin": (with_body("  char b[4]; fread(b, 1, 4, stdin);", "#include <cstdio>"), "reads the process's input"),
    "<csignal>": ("#include <csignal>\n" + NAIVE, "signal handling"),
    "<unistd.h>": ("#include <unistd.h>\n" + NAIVE, "not on the allow-list"),
    "<dlfcn.h>": ("#include <dlfcn.h>\n" + NAIVE, "not on the allow-list"),
    "<sys/mman.h>": ("#include <sys/mman.h>\n" + NAIVE, "not on the allow-list"),
    "<cublas_v2.h>": ("#include <cublas_v2.h>\n" + NAIVE, "no cuBLAS"),
    "<cublasLt.h>": ("#include <cublasLt.h>\n" + NAIVE, "no cuBLAS"),
    "<thrust/device_vector.h>": ("#include <thrust/device_vector.h>\n" + NAIVE, "Thrust"),
    "<curand.h>": ("#include <curand.h>\n" + NAIVE, "NVIDIA libraries"),
    "relative include": ('#include "tiles.cuh"\n' + NAIVE, "self-contained"),
    "parent include": ('#include "../kernels/reference_naive.cu"\n' + NAIVE, "outside the toolkits"),
    "absolute include": ("#include </etc/passwd>\n" + NAIVE, "outside the toolkits"),
    "computed include": ("#define HDR <thread>\n#include HDR\n" + NAIVE, "computed #include"),
    "include_next": ("#include_next <cuda_fp16.h>\n" + NAIVE, "#include_next"),
    "no hgemm": (NAIVE.replace("hgemm(const half* A", "my_gemm(const half* A"), "no definition"),
    "declaration only": (HEAD + SIG + ";\n", "no definition"),
    "C++ linkage": (NAIVE.replace('extern "C" ', ""), 'without extern "C"'),
    "wrong return type": (NAIVE.replace('extern "C" int hgemm', 'extern "C" void hgemm'), "must return int"),
    "missing stream parameter": (NAIVE.replace(", cudaStream_t stream)", ")").replace(", stream>>>", ">>>"),
                                 "8 parameters"),
    "too large": (NAIVE + "//" + "x" * contract.MAX_SOURCE_BYTES, "over the limit"),
    "NUL byte": (NAIVE + "\x00", "NUL"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_sources_are_refused_with_the_reason(name):
    source, expected = BAD[name]
    reasons = screen(source)
    assert reasons, f"{name}: accepted"
    assert any(expected in r for r in reasons), reasons


def test_reasons_carry_line_numbers():
    reasons = screen(with_body("  int x = 0;\n  cudaDeviceSynchronize();"))
    assert reasons == ["line 6: cudaDeviceSynchronize: synchronizes the host with the device; a candidate only "
                       "enqueues work on `stream` and returns"]


def test_hostile_screen_cases_are_refused_by_the_text_screen():
    expected = json.loads((HOSTILE / "expected.json").read_text())
    for name, e in sorted(expected.items()):
        reasons = screen((HOSTILE / name).read_text())
        if e["status"] == "screen_rejected" and name != "macro_stream.cu":
            assert reasons, f"{name} was accepted"
        else:
            # Run-time failures must get through to the GPU checks; macro_stream.cu is the symbol screen's case.
            assert reasons == [], f"{name}: {reasons}"


def test_strip_source_keeps_offsets_and_lines():
    src = ('int a; // cudaDeviceSynchronize()\n/* multi\nline */ const char* s = "fopen(\\"x\\")";\n'
           "char c = '\\''; int n = 1'000;\n")
    nc, code = strip_source(src)
    assert len(nc) == len(code) == len(src)
    assert nc.count("\n") == code.count("\n") == src.count("\n")
    assert "cudaDeviceSynchronize" not in nc and "multi" not in nc
    assert 'fopen(\\"x\\")' in nc and "fopen" not in code
    assert "int n = 1'000;" in code
