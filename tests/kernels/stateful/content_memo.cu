// Hostile (state): fingerprints the first 256 elements of A and B on the device; when the fingerprint equals the
// previous call's, copies the C it kept instead of multiplying. Refused by stateless_timing.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
__global__ void naive(const half* A, const half* B, half* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[(size_t)row * N + col] = __float2half_rn(acc);
}
static int launch_naive(const half* A, const half* B, half* C, int M, int N, int K, cudaStream_t s) {
  dim3 block(32, 8), grid((N + 31) / 32, (M + 7) / 8);
  naive<<<grid, block, 0, s>>>(A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess;
}
// Fingerprint of the first 256 elements of A and B, kept on the device with a copy of the last C.
__device__ unsigned long long g_prev, g_now;
__device__ int g_hit;
__global__ void fingerprint(const half* A, const half* B) {
  unsigned long long h = 1469598103934665603ull;
  for (int i = 0; i < 256; ++i) {
    h = (h ^ __half_as_ushort(A[i])) * 1099511628211ull;
    h = (h ^ __half_as_ushort(B[i])) * 1099511628211ull;
  }
  g_now = h;
  g_hit = (h == g_prev);
  g_prev = h;
}
__global__ void memo_gemm(const half* A, const half* B, half* C, half* keep, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  size_t o = (size_t)row * N + col;
  if (g_hit) { C[o] = keep[o]; return; }
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[o] = keep[o] = __float2half_rn(acc);
}
static half* keep = nullptr;
static size_t keep_n = 0;
extern "C" int hgemm(const half* A, const half* B, const half* Bc, half* C, int M, int N, int K, cudaStream_t s) {
  size_t n = (size_t)M * N;
  if (n > keep_n) { cudaFree(keep); cudaMalloc(&keep, n * sizeof(half)); keep_n = n; }
  fingerprint<<<1, 1, 0, s>>>(A, B);
  dim3 block(32, 8), grid((N + 31) / 32, (M + 7) / 8);
  memo_gemm<<<grid, block, 0, s>>>(A, B, C, keep, M, N, K);
  return cudaGetLastError() != cudaSuccess;
}
