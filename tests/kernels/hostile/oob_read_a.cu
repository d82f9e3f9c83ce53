// Hostile: reads past the end of A, and the value reaches C. The K loop is unrolled by 8 with the tail masked on B
// only; the last row of A reads up to 7 elements beyond A's end, and 0 * NaN is NaN. Needs K % 8 != 0.
// Expected: NaN (the guard band's canary) in C's last row, so the exact binary check fails.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void hgemm_unroll8(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                              int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  const half* a_row = A + (size_t)row * K;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += 8) {
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      int k = k0 + u;
      float a = __half2float(a_row[k]);
      float b = k < K ? __half2float(B[(size_t)k * N + col]) : 0.f;
      acc += a * b;
    }
  }
  C[(size_t)row * N + col] = __float2half_rn(acc);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  hgemm_unroll8<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
