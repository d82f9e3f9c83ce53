// The outside harness's own NVIDIA baselines and stream control (scripts/outside_harness.py calls it through
// ctypes). It shares nothing with evaluator/: an independent check must not inherit the evaluator's mistakes.
//
//   nvcc -shared -Xcompiler -fPIC -O2 -std=c++17 -arch=sm_90a outside_native.cu -o liboutside.so -lcublasLt -lcublas
//
// Row-major C (M x N) is column-major C^T (N x M), so every product here is C^T = B^T A^T in cuBLAS's view:
// layout 0 "NN" reads B row-major (column-major B^T, ld N), layout 1 "TN" reads B_col_major (column-major B,
// transposed, ld K). A row-major is column-major A^T with ld K in both.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr int kMaxAlgos = 1024;
constexpr unsigned long long kHoldLimitNs = 1000ull * 1000 * 1000;

struct Layout {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t b = nullptr, a = nullptr, c = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;
};

struct State {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* ws_blas = nullptr;
  void* ws_lt = nullptr;
  int* scratch = nullptr;
  volatile int* go = nullptr;  // mapped host memory: the host releases the hold through it
  int* go_dev = nullptr;
  volatile int* expired = nullptr;
  int* expired_dev = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  bool fp16 = false;
  int m = 0, n = 0, k = 0;
  Layout lay[2];
};

State g;
char g_err[512] = "";

int fail(const char* what, int code) {
  std::snprintf(g_err, sizeof g_err, "%s failed (%d)", what, code);
  return code ? code : -1;
}

#define CUDA_OK(x)                                         \
  do {                                                     \
    cudaError_t e_ = (x);                                  \
    if (e_ != cudaSuccess) return fail(#x, int(e_));       \
  } while (0)
#define BLAS_OK(x)                                         \
  do {                                                     \
    cublasStatus_t s_ = (x);                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) return fail(#x, int(s_)); \
  } while (0)

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until the host has queued a whole batch, so the events time the GPU alone, never the host's launch pace.
// It gives up after a limit (a callable that synchronises inside its call would otherwise wait on it forever)
// and says so through `expired`.
__global__ void hold_kernel(const volatile int* go, int* expired, unsigned long long limit_ns) {
  const unsigned long long t0 = now_ns();
  while (*go == 0) {
    if (now_ns() - t0 > limit_ns) {
      *expired = 1;
      return;
    }
    __nanosleep(1000);
  }
}

// The ordinary kernel of the separated regime: it turns what precedes each call into a plain kernel boundary.
__global__ void separator_kernel(int* scratch) { scratch[threadIdx.x] += 1; }

void drop_layouts() {
  for (Layout& l : g.lay) {
    if (l.desc) cublasLtMatmulDescDestroy(l.desc);
    for (cublasLtMatrixLayout_t* p : {&l.b, &l.a, &l.c})
      if (*p) cublasLtMatrixLayoutDestroy(*p);
    l = Layout();
  }
}

const void* one() {
  static const float f = 1.0f;
  static const __half h = __float2half(1.0f);
  return g.fp16 ? static_cast<const void*>(&h) : static_cast<const void*>(&f);
}

const void* zero() {
  static const float f = 0.0f;
  static const __half h = __float2half(0.0f);
  return g.fp16 ? static_cast<const void*>(&h) : static_cast<const void*>(&f);
}

}  // namespace

extern "C" {

const char* oh_error() { return g_err; }

size_t oh_cublaslt_version() { return cublasLtGetVersion(); }

int oh_init() {
  if (g.stream) return 0;
  // non-blocking: work a callable sends to the legacy default stream does not slip into the timed interval
  CUDA_OK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  BLAS_OK(cublasCreate(&g.blas));
  BLAS_OK(cublasSetStream(g.blas, g.stream));
  CUDA_OK(cudaMalloc(&g.ws_blas, kWorkspaceBytes));
  BLAS_OK(cublasSetWorkspace(g.blas, g.ws_blas, kWorkspaceBytes));
  BLAS_OK(cublasLtCreate(&g.lt));
  CUDA_OK(cudaMalloc(&g.ws_lt, kWorkspaceBytes));
  CUDA_OK(cudaMalloc(&g.scratch, 32 * sizeof(int)));
  CUDA_OK(cudaMemset(g.scratch, 0, 32 * sizeof(int)));
  void* host = nullptr;
  CUDA_OK(cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped));
  g.go = static_cast<volatile int*>(host);
  g.expired = g.go + 1;
  void* dev = nullptr;
  CUDA_OK(cudaHostGetDevicePointer(&dev, host, 0));
  g.go_dev = static_cast<int*>(dev);
  g.expired_dev = g.go_dev + 1;
  CUDA_OK(cudaEventCreate(&g.e0));
  CUDA_OK(cudaEventCreate(&g.e1));
  return 0;
}

void* oh_stream() { return g.stream; }

// Descriptors for one shape and accumulator, and the heuristic's algorithms (up to kMaxAlgos) for each layout.
int oh_shape(int m, int n, int k, int fp16_acc) {
  drop_layouts();
  g.m = m, g.n = n, g.k = k, g.fp16 = fp16_acc != 0;
  const cublasComputeType_t compute = g.fp16 ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale = g.fp16 ? CUDA_R_16F : CUDA_R_32F;
  cublasLtMatmulPreference_t pref = nullptr;
  BLAS_OK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  BLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  std::vector<cublasLtMatmulHeuristicResult_t> found(kMaxAlgos);
  for (int l = 0; l < 2; ++l) {
    Layout& L = g.lay[l];
    const cublasOperation_t ta = l ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    BLAS_OK(cublasLtMatmulDescCreate(&L.desc, compute, scale));
    BLAS_OK(cublasLtMatmulDescSetAttribute(L.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    BLAS_OK(cublasLtMatmulDescSetAttribute(L.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (l)
      BLAS_OK(cublasLtMatrixLayoutCreate(&L.b, CUDA_R_16F, k, n, k));
    else
      BLAS_OK(cublasLtMatrixLayoutCreate(&L.b, CUDA_R_16F, n, k, n));
    BLAS_OK(cublasLtMatrixLayoutCreate(&L.a, CUDA_R_16F, k, m, k));
    BLAS_OK(cublasLtMatrixLayoutCreate(&L.c, CUDA_R_16F, n, m, n));
    int got = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g.lt, L.desc, L.b, L.a, L.c, L.c, pref, kMaxAlgos,
                                                            found.data(), &got);
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) {
      cublasLtMatmulPreferenceDestroy(pref);
      return fail("cublasLtMatmulAlgoGetHeuristic", int(s));
    }
    for (int i = 0; i < got; ++i)
      if (found[i].state == CUBLAS_STATUS_SUCCESS) L.algos.push_back(found[i]);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  return 0;
}

int oh_algo_count(int layout) { return int(g.lay[layout & 1].algos.size()); }

// "id tile stages splitk workspace" of one algorithm, for the report.
int oh_algo_describe(int layout, int i, char* buf, int len) {
  const Layout& L = g.lay[layout & 1];
  if (i < 0 || i >= int(L.algos.size())) return fail("oh_algo_describe: no such algorithm", -1);
  const cublasLtMatmulAlgo_t* a = &L.algos[i].algo;
  int32_t id = -1, splitk = 1;
  uint32_t tile = 0, stages = 0;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
  cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
  std::snprintf(buf, len, "algo %d tile %u stages %u splitK %d workspace %zu", int(id), tile, stages, int(splitk),
                L.algos[i].workspaceSize);
  return 0;
}

// layout 0: B is B row-major; layout 1: B is B_col_major.
int oh_cublas(int layout, const void* A, const void* B, void* C) {
  const cublasOperation_t tb = layout ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = layout ? g.k : g.n;
  BLAS_OK(cublasGemmEx(g.blas, tb, CUBLAS_OP_N, g.n, g.m, g.k, one(), B, CUDA_R_16F, ldb, A, CUDA_R_16F, g.k,
                       zero(), C, CUDA_R_16F, g.n, g.fp16 ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT));
  return 0;
}

int oh_lt(int layout, int i, const void* A, const void* B, void* C) {
  const Layout& L = g.lay[layout & 1];
  if (i < 0 || i >= int(L.algos.size())) return fail("oh_lt: no such algorithm", -1);
  BLAS_OK(cublasLtMatmul(g.lt, L.desc, one(), B, L.b, A, L.a, zero(), C, L.c, C, L.c, &L.algos[i].algo, g.ws_lt,
                         L.algos[i].workspaceSize, g.stream));
  return 0;
}

int oh_separator() {
  separator_kernel<<<1, 32, 0, g.stream>>>(g.scratch);
  CUDA_OK(cudaGetLastError());
  return 0;
}

// Starts a timed batch: with held != 0, behind the hold kernel, so the batch runs only once the host queued it all.
int oh_begin(int held) {
  *g.expired = 0;
  if (held) {
    *g.go = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    hold_kernel<<<1, 1, 0, g.stream>>>(g.go_dev, g.expired_dev, kHoldLimitNs);
    CUDA_OK(cudaGetLastError());
  }
  CUDA_OK(cudaEventRecord(g.e0, g.stream));
  return 0;
}

// Ends the batch, releases the hold and waits: milliseconds between the events, or a negative error code.
double oh_end() {
  cudaError_t e = cudaEventRecord(g.e1, g.stream);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *g.go = 1;  // released even after a failed record, so nothing stays held
  if (e == cudaSuccess) e = cudaEventSynchronize(g.e1);
  float ms = 0.0f;
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, g.e0, g.e1);
  if (e != cudaSuccess) {
    fail("oh_end", int(e));
    return -1.0;
  }
  return ms;
}

// Whether the last batch's hold ran out before the host released it (its timing then includes host gaps).
int oh_expired() { return *g.expired; }

}  // extern "C"
