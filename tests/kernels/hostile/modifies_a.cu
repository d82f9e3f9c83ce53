// Hostile: modifies its input A. To keep fp16 partial products small it halves A in place before the GEMM and
// doubles the result, but never restores A. The first result is right; A is not. Expected: inputs_unchanged.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void scale_in_place(half* X, size_t count, float factor) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) X[i] = __float2half_rn(__half2float(X[i]) * factor);
}

__global__ void naive_hgemm_scaled(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                                   int M, int N, int K, float out_scale) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[(size_t)row * N + col] = __float2half_rn(acc * out_scale);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  size_t count = (size_t)M * K;
  scale_in_place<<<(unsigned)((count + 255) / 256), 256, 0, stream>>>(const_cast<half*>(A), count, 0.5f);
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  naive_hgemm_scaled<<<grid, block, 0, stream>>>(A, B, C, M, N, K, 2.f);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
