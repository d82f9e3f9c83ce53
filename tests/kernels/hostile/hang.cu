// Hostile: hangs. Blocks wait on a volatile release flag that the last block to arrive should set, but the
// arrival count is compared against the wrong total (off by one), so the flag never flips. Expected: timeout.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// The counters carry the scratch annotation, as a split-K arrival counter would: the annotation lets the screen
// pass them, and the hang is left to the run time.
__device__ unsigned int g_arrived;  // cudal2: scratch
__device__ volatile int g_release;  // cudal2: scratch

__global__ void lockstep_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                               int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  float acc = 0.f;
  if (row < M && col < N)
    for (int k = 0; k < K; ++k)
      acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    unsigned int arrived = atomicAdd(&g_arrived, 1u);
    if (arrived == gridDim.x * gridDim.y) g_release = 1;
  }
  while (g_release == 0) {
  }
  if (row < M && col < N) C[(size_t)row * N + col] = __float2half_rn(acc);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  lockstep_hgemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
