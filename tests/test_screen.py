"""Screening on good and bad sources: the text layer (no compiler needed) and, for cross-call state, the object
layer after a real `nvcc -c` (a macro that spells `static`, the project's families, the CLI's refusal)."""
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


OBJECT_LAYER_CASES = {"macro_stream.cu", "macro_static_memo.cu"}


def test_hostile_screen_cases_are_refused_by_the_text_screen():
    expected = json.loads((HOSTILE / "expected.json").read_text())
    for name, e in sorted(expected.items()):
        reasons = screen((HOSTILE / name).read_text())
        if e["status"] == "screen_rejected" and name not in OBJECT_LAYER_CASES:
            assert reasons, f"{name} was accepted"
        else:
            # Run-time failures must get through to the GPU checks; macro tricks are the object screen's cases.
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


# ---------------------------------------------------------------------------------------------------- cross-call state

NAIVE_KERNEL = ("__global__ void k(const half* A, half* C) { C[threadIdx.x] = A[threadIdx.x]; }\n")

STATE_GOOD = {
    "constant and const device tables, read-only device table": with_body(
        "  k<<<1, 32, 0, stream>>>(A, C);",
        prelude="__constant__ float c_scale[4];\n__device__ const float d_lut[2] = {1.f, 2.f};\n"
                "__device__ float d_read_only[2] = {1.f, 2.f};\n"
                "__global__ void k(const half* A, half* C) { C[0] = A[0] * c_scale[0] * d_lut[1] * d_read_only[0]; }"),
    "constants at every scope": with_body(
        "  static constexpr int kTile = 64;\n  static const int kWarps = 4;\n  const int local = kTile * kWarps;\n"
        "  static_assert(kTile == 64, \"tile\");\n  (void)static_cast<int>(local);\n"
        "  int statistics = 0; (void)statistics;",
        prelude="constexpr int kBlock = 128;\nconst float kAlpha = 1.0f;\nconst half* const kNull = nullptr;\n"
                "static const int kTable[3] = {1, 2, 3};\n"
                "struct Cfg { static constexpr int kStages = 3; static const int kN = 2; int per_object = 0; };\n"
                "namespace { constexpr int kInner = 2; }\n"),
    "functions, declarations and types at namespace scope": with_body(
        "  helper(M);",
        prelude="static void helper(int m);\nstatic __device__ __forceinline__ float twice(float x) { return 2 * x; }\n"
                "static void helper(int m) { (void)m; }\nstruct Entry { int ready = 0; };\n"
                "enum class Mode : int { kA = 1, kB = 2 };\ntemplate <class T> struct Box { T value; };\n"
                "using BoxF = Box<float>;\ntypedef float real;\n"),
    "shared memory": with_body(
        "  k<<<1, 32, 1024, stream>>>(A, C);",
        prelude="extern __shared__ float dyn_smem[];\n__global__ void k(const half* A, half* C) {\n"
                "  __shared__ float tile[32];\n  static __shared__ int flag;\n  tile[threadIdx.x] = 0; flag = 1;\n"
                "  dyn_smem[0] = tile[0] + flag;\n  C[0] = A[0];\n}"),
    "const local statics built by a constructor": with_body(
        "  static const dim3 block(256);\n  static constexpr float kScale(1.0f);\n  (void)block; (void)kScale;"),
    "an extern declaration": with_body("  (void)n;", "extern int n;"),
    "annotated split-K scratch": with_body(
        "  k<<<1, 32, 0, stream>>>(A, C);",
        prelude="__device__ float4 g_partials[1024];  // cudal2: scratch\n"
                "__device__ unsigned int g_arrivals[64];  //cudal2:scratch (the last CTA resets its tile)\n"
                "__device__ volatile int g_flag;  // cudal2: scratch\n"
                "__global__ void k(const half* A, half* C) { atomicAdd(&g_arrivals[0], 1u); g_partials[0].x = 1; "
                "g_flag = 0; C[0] = A[0]; }"),
    "workspace freed by its owner's destructor": with_body(
        "  Buffer ws(4096, stream);",
        prelude="struct Buffer {\n  Buffer(size_t n, cudaStream_t s) : s_(s) { cudaMallocAsync(&p_, n, s_); }\n"
                "  ~Buffer() { if (p_) cudaFreeAsync(p_, s_); }\n  void* p_ = nullptr;\n  cudaStream_t s_;\n};"),
    "workspace allocated and freed in the call": with_body(
        "  float* ws = nullptr;\n  if (cudaMallocAsync(reinterpret_cast<void**>(&ws), 4096, stream) != cudaSuccess) "
        "return 1;\n  void* raw;\n  cudaMallocAsync(&raw, 16, stream);\n  cudaFreeAsync(raw, stream);\n"
        "  if (ws) cudaFreeAsync(ws, stream);"),
}


@pytest.mark.parametrize("name", sorted(STATE_GOOD))
def test_stateless_sources_are_accepted(name):
    assert screen(STATE_GOOD[name]) == []


STATE_BAD = {
    # name: (source, the line refused, a phrase of the reason)
    "function-local static pointer": (with_body("  static const half* last_A = nullptr;\n  last_A = A;"), 5,
                                      "`static const half* last_A = nullptr`: a function-local static is host state"),
    "call counter": (with_body("  static int calls;\n  if (calls++ % 2) return 0;"), 5, "function-local static"),
    "static in a lambda": (with_body("  auto f = [] { static int n = 0; return ++n; };\n  (void)f;"), 5,
                           "function-local static"),
    "namespace-scope variable": (with_body("  last = A;", "const half* last = nullptr;"), 3,
                                 "`const half* last = nullptr`: a namespace-scope variable"),
    "static namespace-scope variable": (with_body("  ++n;", "static int n;"), 3, "namespace-scope variable"),
    "anonymous namespace": (with_body("  ++n;", "namespace {\nint n = 0;\n}"), 4, "namespace-scope variable"),
    "second declarator": (with_body("  ++b;", "const int a = 1, *p = nullptr;\nint c = 0, b = 0;"), 4,
                          "namespace-scope variable"),
    "struct variable": (with_body("  memo.a = A;", "struct { const half* a; } memo;"), 3, "namespace-scope variable"),
    "inline variable": (with_body("  ++hits;", "inline int hits = 0;"), 3, "namespace-scope variable"),
    "function pointer": (with_body("  (void)fp;", "int (*fp)(int) = nullptr;"), 3, "`int (*fp)(int) = nullptr`: a "
                         "namespace-scope variable"),
    "static class member": (with_body("  ++Memo::calls;", "struct Memo { static int calls; };\nint Memo::calls = 0;"),
                            3, "static class member"),
    "static inline member": (with_body("  ++Memo::calls;", "struct Memo {\n  static inline int calls = 0;\n};"), 4,
                             "static class member"),
    "thread_local": (with_body("  thread_local int n = 0;\n  ++n;"), 5, "thread_local"),
    "thread_local global": (with_body("  ++n;", "thread_local int n;"), 3, "thread_local"),
    "static thread_local": (with_body("  static thread_local int n;\n  ++n;"), 5, "thread_local state outlives"),
    "managed": (with_body("  (void)m;", "__managed__ int m;"), 3, "__managed__"),
    "written device global": (with_body("  k<<<1, 1, 0, stream>>>(C);",
                                        "__device__ half g_c[64];\n__global__ void k(half* C) { g_c[0] = C[0]; }"),
                              3, "writable __device__ global"),
    "device counter": (with_body("  k<<<1, 1, 0, stream>>>();",
                                 "__device__ int g_n;\n__global__ void k() { atomicAdd(&g_n, 1); }"),
                       3, "(written at line 4)"),
    "device global passed as a pointer": (
        with_body("  k<<<1, 1, 0, stream>>>();", "__device__ float g_v[8];\n__device__ void f(float* p) { p[0] = 1; }\n"
                  "__global__ void k() { f(g_v); }"), 3, "writable __device__"),
    "device global written from inline PTX": (
        with_body("  k<<<1, 1, 0, stream>>>();", "__device__ unsigned int g_calls;\n"
                  "__global__ void k() { asm volatile(\"red.global.add.u32 [g_calls], 1;\"); }"), 3,
        "writable __device__ global"),
    "static in a kernel": (with_body("  k<<<1, 1, 0, stream>>>();",
                                     "__global__ void k() {\n  static int seen;\n  ++seen;\n}"), 4,
                           "a static in device code is a __device__ global"),
    "device global written by the host": (with_body("  cudaMemcpyToSymbolAsync(g_v, A, 16, 0, "
                                                    "cudaMemcpyDeviceToDevice, stream);", "__device__ float g_v[8];"),
                                          3, "writable __device__"),
    "pointer to memory kept between calls": (
        with_body("  if (!ws) cudaMallocAsync(reinterpret_cast<void**>(&ws), 1 << 20, stream);", "float* ws;"), 3,
        "memory kept from one call to the next"),
    "malloc without a free": (with_body("  float* ws;\n  cudaMalloc(&ws, 64);"), 6,
                              "cudaMalloc(ws) has no matching free"),
    "scratch annotation on a host static": (with_body("  ++n;", "static int n;  // cudal2: scratch"), 3,
                                            "only for a namespace-scope __device__ variable"),
    "scratch annotation on a device pointer": (with_body("  (void)g_p;", "__device__ float* g_p;  // cudal2: scratch"),
                                               3, "no pointer"),
    "scratch annotation on an initialized global": (
        with_body("  (void)g_v;", "__device__ int g_v[2] = {1, 2};  // cudal2: scratch"), 3, "no initializer"),
    "scratch annotation on a struct": (
        with_body("  (void)g_s;", "struct Memo { int a; };\n__device__ Memo g_s;  // cudal2: scratch"), 4,
        "plain numbers"),
    "scratch annotation on a function-local static": (
        with_body("  static float keep[4];  // cudal2: scratch\n  (void)keep;"), 5, "function-local static"),
    "redefined keyword": (with_body("", "#define static\n"), 3, "redefine storage keywords"),
    "extern definition": (with_body("  ++n;", "extern int n = 0;"), 3, "namespace-scope variable"),
    "constant the host writes": (with_body("  cudaMemcpyToSymbolAsync(c_prev, A, 8, 0, cudaMemcpyDeviceToDevice, "
                                           "stream);", "__constant__ unsigned long long c_prev;"),
                                 3, "a __constant__ the code writes persists"),
    "local static built by a constructor": (with_body("  static Memo memo(A);\n  (void)memo;",
                                                      "struct Memo { explicit Memo(const half* p) : p(p) {} "
                                                      "const half* p; };"), 5, "function-local static"),
}


@pytest.mark.parametrize("name", sorted(STATE_BAD))
def test_cross_call_state_is_refused_with_its_line(name):
    source, line, phrase = STATE_BAD[name]
    reasons = screen(source)
    assert any(r.startswith(f"line {line}: ") and phrase in r for r in reasons), reasons


def test_the_refusal_reads_as_documented():
    src = with_body("  static const half* last_A;\n  last_A = A;")
    assert screen(src) == ["line 5: `static const half* last_A`: a function-local static is host state kept between "
                           "calls (a memo, call counter or cached buffer): a candidate keeps no state from one call to "
                           "the next"]


PER_DEVICE = (Path(__file__).parent.parent / "agent" / "families" / "per_device.cu.j2").read_text()
PER_DEVICE_USE = ("struct PerDevice {\n  int ready = 0;\n  int sms = 0;\n};\n"
                  "bool fill_device(int device, PerDevice& d) {\n"
                  "  return cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device)\n"
                  "         == cudaSuccess;\n}\n")
PER_DEVICE_CALL = ("  int device = 0;\n  cudaGetDevice(&device);\n  PerDevice dev;\n"
                   "  if (!per_device(device, dev, FILL)) return 3;")


def test_the_per_device_cache_is_allowed_only_as_the_template_wrote_it():
    """The allowance is the project's template, byte for byte up to whitespace and comments, with a named fill
    function that takes only (int device, Entry&)."""
    from evaluator import screen_state

    good = with_body(PER_DEVICE_CALL.replace("FILL", "fill_device"),
                     "namespace {\n" + PER_DEVICE + PER_DEVICE_USE + "}")
    assert screen(good) == []
    assert "per_device" in screen_state.ALLOWED and "scratch" in screen_state.ALLOWED
    # a lambda could capture the operands
    lam = with_body(PER_DEVICE_CALL.replace("FILL", "[&](int, PerDevice& d) { d.sms = A != nullptr; return true; }"),
                    "namespace {\n" + PER_DEVICE + PER_DEVICE_USE + "}")
    assert any("named function" in r and "static Entry known[64]" in r for r in screen(lam)), screen(lam)
    # a fill that sees more than the device
    wide = with_body(PER_DEVICE_CALL.replace("FILL", "fill_wide"),
                     "namespace {\n" + PER_DEVICE + PER_DEVICE_USE.replace("fill_device(int device, PerDevice& d)",
                                                                           "fill_wide(int device, PerDevice& d, int x)")
                     + "}")
    assert any("must be a function `bool fill_wide(int device, Entry&)`" in r for r in screen(wide)), screen(wide)
    # the same name with another body: a memo that returns what the last call stored
    edited = PER_DEVICE.replace("if (!fill(device, fresh)) return false;", "fill(device, fresh);")
    bad = with_body(PER_DEVICE_CALL.replace("FILL", "fill_device"), "namespace {\n" + edited + PER_DEVICE_USE + "}")
    assert any("not the project's template" in r for r in screen(bad)), screen(bad)


RELEASE_SLOT = "namespace cl2_release {\nstatic cudaStream_t stream = nullptr;\nEXTRA}\n"


def test_the_release_adapters_stream_slot_is_allowed_only_as_the_adapter_writes_it():
    good = with_body("  cl2_release::stream = stream;", RELEASE_SLOT.replace("EXTRA", ""))
    assert screen(good) == []
    twice = with_body("  cl2_release::stream = stream;\n  cl2_release::stream = (cudaStream_t)C;",
                      RELEASE_SLOT.replace("EXTRA", ""))
    assert any(r.startswith("line 4: `static cudaStream_t stream = nullptr`") for r in screen(twice)), screen(twice)
    inside = with_body("  cl2_release::stream = stream;",
                       RELEASE_SLOT.replace("EXTRA", "inline void keep(cudaStream_t s) { stream = s; }\n"))
    assert screen(inside), "a write inside the namespace"
    elsewhere = with_body("  cl2_release::stream = stream;", RELEASE_SLOT.replace("EXTRA", "").replace(
        "cl2_release", "my_memo"))
    assert screen(elsewhere), "another namespace"


def test_per_device_fingerprint_matches_the_template():
    from evaluator import screen_state

    _, code = strip_source(PER_DEVICE)
    code = screen_state._blank_preprocessor(code)
    _, funcs, _ = screen_state._scan(code)
    assert [f.name for f in funcs] == ["per_device"]
    assert screen_state.per_device_fingerprint(code, funcs[0]) == screen_state.PER_DEVICE_SHA, (
        "agent/families/per_device.cu.j2 changed: update PER_DEVICE_SHA in evaluator/screen_state.py after review")


def test_the_allowances_are_documented():
    from evaluator import screen_state

    doc = (Path(__file__).parent.parent / "docs" / "evaluator.md").read_text()
    for name in screen_state.ALLOWED:
        assert f"`{name}`" in doc, name


# ---------------------------------------------------------------------------------------------------- hostile suite


def test_hostile_state_kernels_are_refused_at_their_line():
    expected = json.loads((HOSTILE / "expected.json").read_text())
    text_layer = {n: e for n, e in expected.items() if "screen_line" in e and e.get("screen_layer") != "object"}
    assert {"content_memo.cu", "pointer_value_memo.cu", "skip_every_second.cu", "lazy_after_n.cu",
            "device_global_result.cu", "pointer_cache.cu"} <= set(text_layer)
    for name, e in sorted(text_layer.items()):
        reasons = screen((HOSTILE / name).read_text())
        assert reasons and reasons[0].startswith(f"line {e['screen_line']}: "), (name, reasons)
        assert e["screen_reason"] in reasons[0], (name, reasons[0])


# ---------------------------------------------------------------------------------------------------- families


def _family_sources() -> dict[str, str]:
    import random

    from agent import families
    from tests.test_families import (AMPERE_OK, HOPPER_EXTENDED, HOPPER_OK, HOPPER_SLICED, RAW_OK, SMALL_CLUSTER,
                                     SMALL_OK)
    out = {"small": families.get("small").render(SMALL_OK),
           "small-cluster": families.get("small").render(SMALL_CLUSTER),
           "ampere_cute": families.get("ampere_cute").render(AMPERE_OK),
           "hopper_wgmma": families.get("hopper_wgmma").render(HOPPER_OK),
           "hopper_wgmma-extended": families.get("hopper_wgmma").render(HOPPER_EXTENDED),
           "hopper_wgmma-sliced": families.get("hopper_wgmma").render(HOPPER_SLICED),
           "hopper_raw": families.get("hopper_raw").render(RAW_OK)}
    rng = random.Random(7)
    for shape in [(64, 8192, 4096), (4096, 4096, 4096)]:
        for name, mod in families.families().items():
            for i, p in enumerate(rng.sample(mod.space(shape, "fp32", "sm_90a"), 4)):
                out[f"{name}-{shape[0]}x{shape[1]}x{shape[2]}-{i}"] = mod.render(p)
    return out


def test_every_family_passes_the_text_screen():
    sources = _family_sources()
    assert {"small", "ampere_cute", "hopper_wgmma", "hopper_raw"} <= set(sources)
    refused = {name: screen(src) for name, src in sources.items() if screen(src)}
    assert refused == {}
    # the families do keep these, each under its allowance
    joined = "\n".join(sources.values())
    assert "static Entry known[64]" in joined and joined.count("// cudal2: scratch") >= 3


# ---------------------------------------------------------------------------------------------------- object layer


def _build(source: str):
    from evaluator import compile as C

    return C.compile_kernel(source, "sm_90a")


@pytest.mark.usefixtures("session_build_cache")
def test_object_layer_finds_a_static_spelled_by_a_macro():
    from evaluator import compile as C

    src = (HOSTILE / "macro_static_memo.cu").read_text()
    assert screen(src) == []  # the text shows no static
    info = _build(src)
    status, reason = C.compile_status(info)
    assert status == "screen_rejected" and not info.ok, info.log[-2000:]
    assert reason.startswith("line 24: `last_A` (hgemm::last_A in the compiled object)"), reason
    refusal = info.log.split("\n$ ")[0]
    for name in ("last_B", "last_C", "last_shape"):
        assert f"hgemm::{name}" in refusal, refusal


@pytest.mark.usefixtures("session_build_cache")
def test_object_layer_names_state_the_source_never_spells():
    from evaluator import compile as C

    src = with_body("  KEEP(calls);\n  if (calls_count++ % 2) return 0;", "#define KEEP(n) static int n##_count")
    src = src.replace("calls_count++", "PASTE(calls, _count)++").replace(
        "#define KEEP", "#define PASTE(a, b) a##b\n#define KEEP")
    assert screen(src) == []
    status, reason = C.compile_status(_build(src))
    assert status == "screen_rejected" and "calls_count" in reason and "never spells" in reason, reason


@pytest.mark.usefixtures("session_build_cache")
def test_object_layer_ignores_the_toolkits_symbols_and_the_allowances():
    """Headers with writable symbols of their own (iostream's init object, libcu++'s CPO objects, the launch
    stubs' handles), a constant table, a read-only device table, annotated scratch and the per_device cache."""
    src = ("#include <cuda_fp16.h>\n#include <cuda_runtime.h>\n#include <cooperative_groups.h>\n"
           "#include <cuda/barrier>\n#include <cuda_pipeline.h>\n#include <mma.h>\n#include <iostream>\n"
           "#include <vector>\n"
           "__constant__ float c_scale[4];\n__device__ float d_table[2] = {1.f, 2.f};\n"
           "__device__ float g_partials[256];  // cudal2: scratch\n"
           "__global__ void k(const half* A, half* C) {\n  g_partials[threadIdx.x] = __half2float(A[threadIdx.x]);\n"
           "  C[threadIdx.x] = __float2half(g_partials[threadIdx.x] * c_scale[0] * d_table[1]);\n}\n"
           "namespace {\n" + PER_DEVICE + PER_DEVICE_USE + "}\n" + SIG + " {\n"
           + PER_DEVICE_CALL.replace("FILL", "fill_device") +
           "\n  k<<<1, 32, 0, stream>>>(A, C);\n  return cudaGetLastError() == cudaSuccess ? 0 : 1;\n}\n")
    assert screen(src) == []
    info = _build(src)
    assert info.ok, info.log[-3000:]


@pytest.mark.usefixtures("session_build_cache")
@pytest.mark.parametrize("name,line", [("skip_every_second.cu", 21), ("macro_static_memo.cu", 24)])
def test_compile_only_refuses_cross_call_state_with_its_line(name, line, tmp_path, capsys):
    """`cudal2 eval --compile-only` on a machine without a GPU: refused, the line printed and recorded."""
    from agent.cli import main

    out = tmp_path / "r.json"
    rc = main(["eval", str(HOSTILE / name), "--compile-only", "--arch", "sm_90a", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 1 and "screen_rejected" in text and f"line {line}:" in text, text
    rec = json.loads(out.read_text())
    assert rec["status"] == "screen_rejected" and rec["reason"].startswith(f"line {line}:"), rec["reason"]
