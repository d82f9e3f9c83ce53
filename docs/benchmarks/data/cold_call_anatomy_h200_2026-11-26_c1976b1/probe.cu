// Cold-call anatomy probe (scratch, not project code). Build on the device:
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a cold.cu -o cold -lcuda -lcublas -ldl
// ./cold M N K so1 so2 ...   prints JSON: per callable and regime, median event us and (instrumented
// kernels) launch gap from the hold's exit to the first CTA's entry, and the body from first entry to last exit.
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#ifndef NO_CUBLAS
#include <cublas_v2.h>
#endif
#include <dlfcn.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#define CK(x) do { auto e_ = (x); if (e_ != 0) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); exit(1);} } while (0)

typedef unsigned long long u64;
__device__ __forceinline__ u64 gtime() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__global__ void hold_k(volatile int* flag, u64* t) {
  u64 t0 = gtime();
  while (*flag == 0) { if (gtime() - t0 > 200000000ull) break; }
  t[0] = gtime();
}
__global__ void reset_k(u64* t) { t[1] = ~0ull; t[2] = 0; }
__global__ void evict_k(float4* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = make_float4(i, 0, 0, 0);
}
__device__ __forceinline__ void mark_entry(u64* t) { if (threadIdx.x == 0) atomicMin(&t[1], gtime()); }
__device__ __forceinline__ void mark_exit(u64* t) { __syncthreads(); if (threadIdx.x == 0) atomicMax(&t[2], gtime()); }

__global__ void k_empty(u64* t) { mark_entry(t); mark_exit(t); }
struct Big { int v[240]; };
__global__ void k_params(Big p, u64* t) {
  mark_entry(t);
  if (threadIdx.x == 0) { int s = 0; for (int i = 0; i < 240; ++i) s += p.v[i]; if (s == 123456789) t[3] = s; }
  mark_exit(t);
}
extern __shared__ __align__(1024) unsigned char smem[];
__device__ __forceinline__ unsigned su32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__global__ void k_mbar(u64* t) {
  mark_entry(t);
  u64* bars = reinterpret_cast<u64*>(smem);
  if (threadIdx.x < 16) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(bars + threadIdx.x)));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  mark_exit(t);
}
// One 64x64 half box (8 KB) per CTA through TMA; prefetch: prefetch.tensormap first.
__global__ void k_tma(const __grid_constant__ CUtensorMap map, u64* t, int prefetch) {
  mark_entry(t);
  u64* bar = reinterpret_cast<u64*>(smem);
  unsigned char* dst = smem + 1024;
  if (threadIdx.x == 0) {
    if (prefetch) asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(&map)) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 8192;" ::"r"(su32(bar)) : "memory");
    int c0 = 0, c1 = blockIdx.x * 64;
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(su32(dst)), "l"(reinterpret_cast<u64>(&map)), "r"(c0), "r"(c1), "r"(su32(bar)) : "memory");
    unsigned done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(su32(bar)) : "memory");
  }
  mark_exit(t);
}
// The same 8 KB per CTA through ordinary loads.
__global__ void k_ld(const int4* src, u64* t) {
  mark_entry(t);
  const int4* p = src + (size_t)blockIdx.x * 512;  // 8 KB = 512 int4
  int4* d = reinterpret_cast<int4*>(smem);
  for (int i = threadIdx.x; i < 512; i += blockDim.x) d[i] = p[i];
  mark_exit(t);
}

template <typename... Args>
cudaError_t launch(void (*k)(Args...), int grid, int block, int smem_b, int cluster, bool pdl, cudaStream_t s,
                   Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem_b;
  cfg.stream = s;
  cudaLaunchAttribute at[2];
  int n = 0;
  if (cluster) { at[n].id = cudaLaunchAttributeClusterDimension; at[n].val.clusterDim = {(unsigned)cluster, 1, 1}; ++n; }
  if (pdl) { at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[n].val.programmaticStreamSerializationAllowed = 1; ++n; }
  cfg.attrs = at;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, k, args...);
}

struct Callable { std::string name; bool instrumented; std::function<int(cudaStream_t)> fn; };
typedef int (*hgemm_t)(const half*, const half*, const half*, half*, int, int, int, cudaStream_t);

static double med(std::vector<double> v) { if (v.empty()) return -1; std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  int samples = getenv("SAMPLES") ? atoi(getenv("SAMPLES")) : 40;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* flag_h; int* flag_d;
  CK(cudaHostAlloc(&flag_h, 4, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer((void**)&flag_d, flag_h, 0));
  u64* t; CK(cudaMalloc(&t, 64));
  size_t ev_n = (size_t)256 << 20 >> 4;  // 256 MB evictor
  float4* ev_buf; CK(cudaMalloc(&ev_buf, ev_n * 16));
  half *A, *B, *Bc, *C;
  CK(cudaMalloc(&A, (size_t)M * K * 2)); CK(cudaMalloc(&B, (size_t)K * N * 2));
  CK(cudaMalloc(&Bc, (size_t)K * N * 2)); CK(cudaMalloc(&C, (size_t)M * N * 2));
  {
    std::vector<half> h((size_t)std::max((size_t)M * K, (size_t)K * N));
    std::mt19937 g(1); std::uniform_real_distribution<float> u(-1, 1);
    for (auto& x : h) x = __float2half(u(g));
    CK(cudaMemcpy(A, h.data(), (size_t)M * K * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, h.data(), (size_t)K * N * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(Bc, h.data(), (size_t)K * N * 2, cudaMemcpyHostToDevice));
  }
  const int SM200 = 200 * 1024;
  CK(cudaFuncSetAttribute(k_empty, cudaFuncAttributeMaxDynamicSharedMemorySize, SM200));
  CK(cudaFuncSetAttribute(k_params, cudaFuncAttributeMaxDynamicSharedMemorySize, SM200));
  CK(cudaFuncSetAttribute(k_mbar, cudaFuncAttributeMaxDynamicSharedMemorySize, SM200));
  CK(cudaFuncSetAttribute(k_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, SM200));
  CK(cudaFuncSetAttribute(k_ld, cudaFuncAttributeMaxDynamicSharedMemorySize, SM200));
  // TMA map over a 8448 x 1024 half tensor (132 boxes of 64 rows), in the evictor's path so it is cold
  half* tbuf; CK(cudaMalloc(&tbuf, (size_t)132 * 64 * 1024 * 2));
  CUtensorMap map;
  {
    cuuint64_t dims[2] = {1024, 132 * 64}; cuuint64_t strides[1] = {1024 * 2};
    cuuint32_t box[2] = {64, 64}; cuuint32_t es[2] = {1, 1};
    CK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, tbuf, dims, strides, box, es,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  }
  Big big; for (int i = 0; i < 240; ++i) big.v[i] = i;
#ifndef NO_CUBLAS
  cublasHandle_t hb; CK(cublasCreate(&hb)); CK(cublasSetStream(hb, s));
#endif
  std::vector<Callable> cs;
  cs.push_back({"events_only", false, [&](cudaStream_t) { return 0; }});
  cs.push_back({"empty_s0_b128", true, [&](cudaStream_t st) { return (int)launch(k_empty, 132, 128, 0, 0, false, st, t); }});
  cs.push_back({"empty_s200_b128", true, [&](cudaStream_t st) { return (int)launch(k_empty, 132, 128, SM200, 0, false, st, t); }});
  cs.push_back({"empty_s200_b384", true, [&](cudaStream_t st) { return (int)launch(k_empty, 132, 384, SM200, 0, false, st, t); }});
  cs.push_back({"empty_s200_cl1", true, [&](cudaStream_t st) { return (int)launch(k_empty, 132, 384, SM200, 1, false, st, t); }});
  cs.push_back({"empty_s200_cl2", true, [&](cudaStream_t st) { return (int)launch(k_empty, 132, 384, SM200, 2, false, st, t); }});
  cs.push_back({"empty_s200_pdl", true, [&](cudaStream_t st) { return (int)launch(k_empty, 132, 384, SM200, 0, true, st, t); }});
  cs.push_back({"params1k_s200", true, [&](cudaStream_t st) { return (int)launch(k_params, 132, 384, SM200, 0, false, st, big, t); }});
  cs.push_back({"mbar_s200", true, [&](cudaStream_t st) { return (int)launch(k_mbar, 132, 384, SM200, 0, false, st, t); }});
  cs.push_back({"tma_pf_s200", true, [&](cudaStream_t st) { return (int)launch(k_tma, 132, 384, SM200, 0, false, st, map, t, 1); }});
  cs.push_back({"tma_nopf_s200", true, [&](cudaStream_t st) { return (int)launch(k_tma, 132, 384, SM200, 0, false, st, map, t, 0); }});
  cs.push_back({"ld_s200", true, [&](cudaStream_t st) { return (int)launch(k_ld, 132, 384, SM200, 0, false, st, (const int4*)tbuf, t); }});
  cs.push_back({"tma_pf_s0", true, [&](cudaStream_t st) { return (int)launch(k_tma, 132, 384, 10240, 0, false, st, map, t, 1); }});
#ifndef NO_CUBLAS
  cs.push_back({"cublas_NN", false, [&](cudaStream_t) {
    const float one = 1.f, zero = 0.f;
    return (int)cublasGemmEx(hb, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16F, N, A, CUDA_R_16F, K, &zero,
                             C, CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); }});
#endif
  for (int i = 4; i < argc; ++i) {
    void* h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen %s: %s\n", argv[i], dlerror()); continue; }
    hgemm_t f = (hgemm_t)dlsym(h, "hgemm");
    std::string nm = argv[i]; nm = nm.substr(nm.find_last_of('/') + 1);
    cs.push_back({nm, false, [=](cudaStream_t st) { return f(A, B, Bc, C, M, N, K, st); }});
  }
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  // warm-up: every callable a few times
  for (auto& c : cs) { for (int i = 0; i < 5; ++i) { int rc = c.fn(s); if (rc) { fprintf(stderr, "%s rc %d\n", c.name.c_str(), rc); exit(1); } } if (cudaStreamSynchronize(s)) { fprintf(stderr, "%s: %s\n", c.name.c_str(), cudaGetErrorString(cudaGetLastError())); exit(1); } }
  CK(cudaStreamSynchronize(s));
  const char* regimes[] = {"b2b", "warm1", "evict", "server"};
  const int NR = 4;
  std::vector<std::vector<std::vector<double>>> tot(cs.size(), std::vector<std::vector<double>>(NR)),
      gap(cs.size(), std::vector<std::vector<double>>(NR)), body(cs.size(), std::vector<std::vector<double>>(NR));
  std::mt19937 rng(7);
  std::vector<int> order(cs.size()); for (size_t i = 0; i < cs.size(); ++i) order[i] = i;
  for (int smp = 0; smp < samples; ++smp) {
    for (int r = 0; r < NR; ++r) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int ci : order) {
        auto& c = cs[ci];
        int reps = r == 0 ? 20 : 1;
        if (r == 1) CK(c.fn(s));
        if (r >= 2) { evict_k<<<264, 512, 0, s>>>(ev_buf, ev_n); CK(cudaGetLastError()); }
        reset_k<<<1, 1, 0, s>>>(t);
        if (r == 3) { CK(cudaStreamSynchronize(s)); usleep(1000); }
        *(volatile int*)flag_h = 0; __sync_synchronize();
        hold_k<<<1, 1, 0, s>>>(flag_d, t);
        CK(cudaEventRecord(e0, s));
        for (int i = 0; i < reps; ++i) CK(c.fn(s));
        CK(cudaEventRecord(e1, s));
        __sync_synchronize(); *(volatile int*)flag_h = 1; __sync_synchronize();
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        tot[ci][r].push_back(1e3 * ms / reps);
        if (c.instrumented && reps == 1) {
          u64 h[3]; CK(cudaMemcpy(h, t, 24, cudaMemcpyDeviceToHost));
          gap[ci][r].push_back((h[1] - h[0]) / 1e3); body[ci][r].push_back((h[2] - h[1]) / 1e3);
        }
      }
    }
  }
  printf("{\"shape\": [%d, %d, %d], \"samples\": %d, \"callables\": {\n", M, N, K, samples);
  for (size_t ci = 0; ci < cs.size(); ++ci) {
    printf("  \"%s\": {", cs[ci].name.c_str());
    for (int r = 0; r < NR; ++r) {
      printf("\"%s\": {\"us\": %.3f", regimes[r], med(tot[ci][r]));
      if (!gap[ci][r].empty()) printf(", \"gap_us\": %.3f, \"body_us\": %.3f", med(gap[ci][r]), med(body[ci][r]));
      printf("}%s", r + 1 < NR ? ", " : "");
    }
    printf("}%s\n", ci + 1 < cs.size() ? "," : "");
  }
  printf("}}\n");
  return 0;
}
