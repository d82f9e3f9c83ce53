// Hostile: keeps a host-side cache keyed on the buffers' addresses. Called again with the same A, B, C and shape it
// assumes C already holds the product and returns without launching. Expected: new data at the same addresses
// gives a stale C.
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

namespace {
struct LastCall {
  const half* A = nullptr;
  const half* B = nullptr;
  half* C = nullptr;
  int M = 0, N = 0, K = 0;
};
LastCall last;
}  // namespace

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  if (A == last.A && B == last.B && C == last.C && M == last.M && N == last.N && K == last.K) return 0;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  naive_hgemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  if (cudaGetLastError() != cudaSuccess) return 1;
  last = LastCall{A, B, C, M, N, K};
  return 0;
}
