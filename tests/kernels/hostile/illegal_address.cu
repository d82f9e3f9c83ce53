// Hostile: writes through a null workspace pointer. The split-K workspace is only allocated for long K, but the
// partial sums are always written to it, so for K <= 4096 the kernel stores to addresses near 0, far from any
// allocation. Expected: an illegal address (sticky error), a crash of the worker.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void hgemm_to_workspace(const half* __restrict__ A, const half* __restrict__ B, float* workspace,
                                   int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  workspace[(size_t)row * N + col] = acc;
}

__global__ void workspace_to_c(const float* workspace, half* C, size_t count) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) C[i] = __float2half_rn(workspace[i]);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  size_t count = (size_t)M * N;
  float* workspace = nullptr;
  if (K > 4096 && cudaMallocAsync(reinterpret_cast<void**>(&workspace), count * sizeof(float), stream) != cudaSuccess)
    return 1;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  hgemm_to_workspace<<<grid, block, 0, stream>>>(A, B, workspace, M, N, K);
  workspace_to_c<<<(unsigned)((count + 255) / 256), 256, 0, stream>>>(workspace, C, count);
  if (workspace) cudaFreeAsync(workspace, stream);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
