// Hostile: reads B_col_major as if it were row-major (meant to use the "pre-transposed" copy for coalescing, got
// the index backwards). Every read is in bounds; the product is A * (a reshuffled B). Expected: exact check fails.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void naive_hgemm_bt(const half* __restrict__ A, const half* __restrict__ Bt, half* __restrict__ C,
                               int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(Bt[(size_t)k * N + col]);
  C[(size_t)row * N + col] = __float2half_rn(acc);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  naive_hgemm_bt<<<grid, block, 0, stream>>>(A, B_col_major, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
