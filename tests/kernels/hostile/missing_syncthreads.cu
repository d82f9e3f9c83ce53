// Hostile: a shared-memory tiled kernel missing the barrier at the end of each K step, so a fast warp can
// overwrite a tile that a slow warp is still reading (write-after-read race in shared memory). It often gives the
// right answer; compute-sanitizer's racecheck always sees the hazard. Expected (with --sanitize): racecheck fails.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

constexpr int TILE = 16;

__global__ void tiled_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                            int M, int N, int K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int col = blockIdx.x * TILE + tx;
  int row = blockIdx.y * TILE + ty;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? __half2float(A[(size_t)row * K + k0 + tx]) : 0.f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? __half2float(B[(size_t)(k0 + ty) * N + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
  }
  if (row < M && col < N) C[(size_t)row * N + col] = __float2half_rn(acc);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  dim3 block(TILE, TILE);
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  tiled_hgemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
