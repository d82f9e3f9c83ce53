// Hostile (state): keeps the last product in a __device__ global and returns it when a fingerprint of the inputs
// repeats. Refused by stateless_timing.
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
// The last product kept in a __device__ global, returned when the inputs' fingerprint repeats.
constexpr size_t kMax = 1 << 20;
__device__ half g_result[kMax];
__device__ unsigned long long g_prev;
__device__ int g_hit;
__global__ void fingerprint(const half* A, const half* B, int K) {
  unsigned long long h = 0;
  for (int i = 0; i < 64; ++i) h = h * 31 + __half_as_ushort(A[i * 7 % K]) + 17ull * __half_as_ushort(B[i]);
  g_hit = (h == g_prev);
  g_prev = h;
}
__global__ void gemm_kept(const half* A, const half* B, half* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  size_t o = (size_t)row * N + col;
  if (g_hit) { C[o] = g_result[o]; return; }
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[o] = g_result[o] = __float2half_rn(acc);
}
extern "C" int hgemm(const half* A, const half* B, const half* Bc, half* C, int M, int N, int K, cudaStream_t s) {
  if ((size_t)M * N > kMax) return 1;
  fingerprint<<<1, 1, 0, s>>>(A, B, K);
  dim3 block(32, 8), grid((N + 31) / 32, (M + 7) / 8);
  gemm_kept<<<grid, block, 0, s>>>(A, B, C, M, N, K);
  return cudaGetLastError() != cudaSuccess;
}
