// Hostile: accumulates in half precision (__hfma) while being evaluated as an fp32-accumulate kernel. Exact on the
// binary test (integers below 2048 are exact in fp16); wrong once partial sums need more than 11 significant bits.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void hfma_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                           int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  half acc = __float2half(0.f);
  for (int k = 0; k < K; ++k)
    acc = __hfma(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
  C[(size_t)row * N + col] = acc;
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  hfma_hgemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
