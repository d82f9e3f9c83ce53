// Hostile: writes past the end of C. A block-completion counter for a "last block runs the epilogue" scheme is
// parked in the bytes right after C (rounded up to 16 bytes) to avoid allocating a workspace. Everything else is
// the naive reference. Expected: the guard band after C changes.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void naive_hgemm_counted(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                                    int M, int N, int K, unsigned int* blocks_done) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k)
      acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = __float2half_rn(acc);
  }
  if (threadIdx.x == 0 && threadIdx.y == 0) atomicAdd(blocks_done, 1u);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  uintptr_t end = reinterpret_cast<uintptr_t>(C + (size_t)M * N);
  unsigned int* blocks_done = reinterpret_cast<unsigned int*>((end + 15) & ~uintptr_t(15));
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  naive_hgemm_counted<<<grid, block, 0, stream>>>(A, B, C, M, N, K, blocks_done);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
