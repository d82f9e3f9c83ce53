// Hostile (state): keyed on the buffers' addresses and A's first four values; a repeated key copies the kept C.
// Refused by stateless_timing.
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
// Keyed on the buffers' addresses and the first four values of A: the same key copies the C it kept.
__device__ half g_key[4];
__device__ int g_same;
__global__ void compare_key(const half* A, int same_ptrs) {
  int same = same_ptrs;
  for (int i = 0; i < 4; ++i) { same &= __half_as_ushort(g_key[i]) == __half_as_ushort(A[i]); g_key[i] = A[i]; }
  g_same = same;
}
__global__ void gemm_or_copy(const half* A, const half* B, half* C, half* keep, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  size_t o = (size_t)row * N + col;
  if (g_same) { C[o] = keep[o]; return; }
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[o] = keep[o] = __float2half_rn(acc);
}
static const void* last[3];
static half* keep = nullptr;
static size_t keep_n = 0;
extern "C" int hgemm(const half* A, const half* B, const half* Bc, half* C, int M, int N, int K, cudaStream_t s) {
  size_t n = (size_t)M * N;
  if (n > keep_n) { cudaFree(keep); cudaMalloc(&keep, n * sizeof(half)); keep_n = n; last[0] = nullptr; }
  int same = last[0] == A && last[1] == B && last[2] == C;
  last[0] = A, last[1] = B, last[2] = C;
  compare_key<<<1, 1, 0, s>>>(A, same);
  dim3 block(32, 8), grid((N + 31) / 32, (M + 7) / 8);
  gemm_or_copy<<<grid, block, 0, s>>>(A, B, C, keep, M, N, K);
  return cudaGetLastError() != cudaSuccess;
}
