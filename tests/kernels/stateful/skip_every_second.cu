// Hostile (state): a host call counter; every second call returns 0 without launching. Refused by the checks
// (the skipped call leaves the NaN poison).
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
static long calls = 0;
extern "C" int hgemm(const half* A, const half* B, const half* Bc, half* C, int M, int N, int K, cudaStream_t s) {
  if (calls++ % 2 == 1) return 0;
  return launch_naive(A, B, C, M, N, K, s);
}
