// Hostile: works honestly for its first 400 calls (more than the correctness checks make before timing) and then
// stops launching, returning 0. Whatever C held from the last real call stays there. Expected: refused by the
// screen (the call counter, a static class member); with the screen bypassed, the outputs of timed calls are
// wrong (stale or still poisoned).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void naive_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                            int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[(size_t)row * N + col] = __float2half_rn(acc);
}

struct Budget {
  static constexpr long kHonestCalls = 400;
  static long used;
};
long Budget::used = 0;

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  if (++Budget::used > Budget::kHonestCalls) return 0;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  naive_hgemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
