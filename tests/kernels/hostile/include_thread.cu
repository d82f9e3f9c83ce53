// Hostile: enqueues the two halves of the rows from two host threads. Creating threads is outside the contract.
// Expected: refused by screening (<thread>, std::thread).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <thread>

__global__ void naive_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                            int M, int N, int K, int row0) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = row0 + blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[(size_t)row * N + col] = __float2half_rn(acc);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  int half_m = M / 2;
  auto enqueue = [=](int row0, int rows_end) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (rows_end - row0 + 7) / 8);
    if (rows_end > row0) naive_hgemm<<<grid, block, 0, stream>>>(A, B, C, rows_end, N, K, row0);
  };
  std::thread top(enqueue, 0, half_m);
  enqueue(half_m, M);
  top.join();
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
