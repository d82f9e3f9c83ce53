// Headroom probe: how fast can B (64 MB) be streamed from memory on this GPU, per access pattern, vs cuBLAS GEMM.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <string>
#include <functional>
#define CK(x) do { auto e = (x); if (e) { printf("err %d line %d\n", (int)e, __LINE__); exit(1);} } while (0)

__global__ void flat_read(const uint4* __restrict__ p, size_t n, unsigned* out) {
  unsigned acc = 0;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 7 * stride < n; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) { uint4 v = p[i]; acc ^= v.x ^ v.w; }
  if (acc == 0x12345678) out[blockIdx.x] = acc;
}

__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// One thread per CTA keeps `stages` TMA boxes in flight over its strip of B; nothing computes.
__global__ void tma_stream(const __grid_constant__ CUtensorMap tm, int strips, int splits, int box_n, int box_k,
                           int K, int rowmajor, int stages, int box_bytes, unsigned* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned long long* bars = (unsigned long long*)(smem + stages * box_bytes);
  if (threadIdx.x) return;
  int strip = blockIdx.x % strips, split = blockIdx.x / strips;
  int k0 = split * (K / splits), k1 = k0 + K / splits;
  int n0 = strip * box_n;
  for (int s = 0; s < stages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sa(bars + s)));
  asm volatile("fence.proxy.async.shared::cta;");
  int nb = (k1 - k0) / box_k;
  unsigned acc = 0;
  for (int i = 0; i < nb + stages; ++i) {
    int slot = i % stages;
    if (i >= stages) {  // wait for the box issued `stages` ago
      unsigned par = ((i / stages) - 1) & 1, done = 0;
      while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p; }"
                     : "=r"(done) : "r"(sa(bars + slot)), "r"(par));
      acc ^= *(volatile unsigned*)(smem + slot * box_bytes);
    }
    if (i < nb) {
      int k = k0 + i * box_k;
      int c0 = rowmajor ? n0 : k, c1 = rowmajor ? k : n0;
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sa(bars + slot)), "r"(box_bytes));
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                   :: "r"(sa(smem + slot * box_bytes)), "l"(&tm), "r"(c0), "r"(c1), "r"(sa(bars + slot)) : "memory");
    }
  }
  if (acc == 0x12345678) out[blockIdx.x] = acc;
}


// Each CTA streams a 2D region of B with 16-byte loads, U in flight per thread.
template <int U>
__global__ void ldg_region(const half* __restrict__ B, int strips, int splits, int W, int K, int N, int rm, unsigned* out) {
  int strip = blockIdx.x % strips, split = blockIdx.x / strips;
  int ks = K / splits;
  const half* base; int rows, cols, pitch;
  if (rm) { base = B + (size_t)split * ks * N + (size_t)strip * W; rows = ks; cols = W; pitch = N; }
  else { base = B + (size_t)strip * W * K + (size_t)split * ks; rows = W; cols = ks; pitch = K; }
  int vpr = cols / 8, total = rows * vpr;
  unsigned acc = 0;
  for (int v0 = threadIdx.x; v0 < total; v0 += U * blockDim.x) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int v = v0 + u * blockDim.x;
      if (v < total) x[u] = __ldcs(reinterpret_cast<const uint4*>(base + (size_t)(v / vpr) * pitch) + v % vpr);
      else x[u] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= x[u].x ^ x[u].w;
  }
  if (acc == 0x12345678) out[blockIdx.x] = acc;
}

typedef CUresult (*encode_t)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                             const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                             CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

int main(int argc, char** argv) {
  encode_t enc; cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", (void**)&enc, cudaEnableDefault, &q));
  int dev; cudaDeviceProp prop; CK(cudaGetDevice(&dev)); CK(cudaGetDeviceProperties(&prop, dev));
  printf("device %s sms %d l2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t st; CK(cudaStreamCreate(&st));
  cublasHandle_t h; CK(cublasCreate(&h)); CK(cublasSetStream(h, st));
  unsigned* out; CK(cudaMalloc(&out, 1 << 20));
  struct Shape { int m, n, k; };
  for (Shape sh : {Shape{64, 8192, 4096}, Shape{256, 2048, 16384}, Shape{64, 2048, 4096}}) {
    int M = sh.m, N = sh.n, K = sh.k;
    half *A, *B, *Bc, *C;
    CK(cudaMalloc(&A, (size_t)M * K * 2)); CK(cudaMalloc(&B, (size_t)K * N * 2)); CK(cudaMalloc(&Bc, (size_t)K * N * 2));
    CK(cudaMalloc(&C, (size_t)M * N * 2));
    CK(cudaMemset(A, 0x11, (size_t)M * K * 2)); CK(cudaMemset(B, 0x22, (size_t)K * N * 2)); CK(cudaMemset(Bc, 0x22, (size_t)K * N * 2));
    struct Cfg { std::string name; std::function<void()> f; };
    std::vector<std::pair<std::string, std::function<void()>>> cfgs;
    float one = 1.f, zero = 0.f;
    cfgs.push_back({"cublas-NN", [&] { cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16F, N, A, CUDA_R_16F, K,
                                                    &zero, C, CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); }});
    cfgs.push_back({"cublas-TN", [&] { cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, Bc, CUDA_R_16F, K, A, CUDA_R_16F, K,
                                                    &zero, C, CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); }});
    size_t n16 = (size_t)K * N * 2 / 16;
    for (int bpsm : {4, 8})
      cfgs.push_back({"flat-" + std::to_string(bpsm) + "x256", [&, bpsm] { flat_read<<<prop.multiProcessorCount * bpsm, 256, 0, st>>>((const uint4*)B, n16, out); }});
    // TMA patterns: (rowmajor, box_n, box_k, splits, stages)
    struct T { int rm, bn, bk, splits, stages; };

    struct L { int rm, W, S, T; };
    for (L l : std::vector<L>{{1, 64, 1, 256}, {1, 64, 2, 256}, {1, 64, 4, 256}, {1, 256, 4, 256}, {1, 256, 8, 256}, {1, 512, 8, 512},
                              {0, 64, 1, 256}, {0, 64, 2, 256}, {0, 64, 4, 256}, {0, 32, 4, 256}, {0, 16, 8, 256}, {0, 64, 8, 128}}) {
      int strips = N / l.W; if (N % l.W || K % l.S) continue;
      int ctas = strips * l.S;
      char nm[96]; snprintf(nm, 96, "ldg-%s-w%d-s%d-t%d(%d ctas)", l.rm ? "rm" : "cm", l.W, l.S, l.T, ctas);
      cfgs.push_back({nm, [=] { ldg_region<8><<<ctas, l.T, 0, st>>>(l.rm ? B : Bc, strips, l.S, l.W, K, N, l.rm, out); }});
    }
    // TMA with more CTAs per SM
    std::vector<T> ts = {{1, 64, 64, 1, 8}, {1, 64, 64, 2, 6}, {1, 64, 64, 4, 4}, {1, 128, 64, 4, 4}, {1, 256, 64, 4, 3},
                         {0, 64, 128, 1, 8}, {0, 64, 128, 2, 6}, {0, 64, 128, 4, 4}, {0, 32, 256, 4, 4}, {0, 64, 256, 4, 3}};

    static CUtensorMap maps[64]; int mi = 0;
    for (T t : ts) {
      if (N % t.bn || K % (t.bk * t.splits)) continue;
      int strips = N / t.bn, ctas = strips * t.splits;
      int box_bytes = t.bn * t.bk * 2;
      CUtensorMap* tm = &maps[mi++];
      cuuint64_t dims[2], strides[1]; cuuint32_t box[2], es[2] = {1, 1};
      if (t.rm) { dims[0] = N; dims[1] = K; strides[0] = (cuuint64_t)N * 2; box[0] = t.bn; box[1] = t.bk; }
      else { dims[0] = K; dims[1] = N; strides[0] = (cuuint64_t)K * 2; box[0] = t.bk; box[1] = t.bn; }
      if (box[0] > 256 || box[1] > 256) continue;
      CK(enc(tm, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, t.rm ? (void*)B : (void*)Bc, dims, strides, box, es,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
      int smem = t.stages * box_bytes + 8 * t.stages;
      if (smem > 227 * 1024) continue;
      CK(cudaFuncSetAttribute(tma_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
      char nm[96]; snprintf(nm, 96, "tma-%s-%dx%d-s%d-st%d(%d ctas)", t.rm ? "rm" : "cm", t.bn, t.bk, t.splits, t.stages, ctas);
      cfgs.push_back({nm, [=] { tma_stream<<<ctas, 32, smem, st>>>(*tm, strips, t.splits, t.bn, t.bk, K, t.rm, t.stages, box_bytes, out); }});
    }
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<std::vector<float>> us(cfgs.size());
    const int reps = 40;
    for (int round = 0; round < 12; ++round)
      for (size_t c = 0; c < cfgs.size(); ++c) {
        for (int w = 0; w < 10; ++w) cfgs[c].second();
        CK(cudaEventRecord(e0, st));
        for (int r = 0; r < reps; ++r) cfgs[c].second();
        CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); us[c].push_back(ms * 1000 / reps);
      }
    CK(cudaGetLastError());
    printf("\nshape %dx%dx%d, B %.1f MB\n", M, N, K, K * (double)N * 2 / 1e6);
    for (size_t c = 0; c < cfgs.size(); ++c) {
      auto v = us[c]; std::sort(v.begin(), v.end());
      double med = v[v.size() / 2];
      printf("  %-40s %8.2f us  %6.2f TB/s (B only)\n", cfgs[c].first.c_str(), med, K * (double)N * 2 / med / 1e6);
    }
    cudaFree(A); cudaFree(B); cudaFree(Bc); cudaFree(C);
  }
  return 0;
}
