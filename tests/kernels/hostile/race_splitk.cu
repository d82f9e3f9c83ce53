// Hostile: split-K with a plain (non-atomic) read-modify-write. Four blocks, one per K quarter, add their partial
// sums into the same fp32 workspace element with `+=`; the four slices of a tile are neighbours in launch order, so
// they run at the same time and lose each other's updates. Expected: wrong and run-to-run different results.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

constexpr int SPLITS = 4;

__global__ void splitk_partial(const half* __restrict__ A, const half* __restrict__ B, float* workspace,
                               int M, int N, int K) {
  int split = blockIdx.x;
  int col = blockIdx.y * blockDim.x + threadIdx.x;
  int row = blockIdx.z * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  int chunk = (K + SPLITS - 1) / SPLITS;
  int k_begin = split * chunk, k_end = min(K, k_begin + chunk);
  float acc = 0.f;
  for (int k = k_begin; k < k_end; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  workspace[(size_t)row * N + col] += acc;
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
  if (cudaMallocAsync(reinterpret_cast<void**>(&workspace), count * sizeof(float), stream) != cudaSuccess) return 1;
  cudaMemsetAsync(workspace, 0, count * sizeof(float), stream);
  dim3 block(32, 8);
  dim3 grid(SPLITS, (N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  splitk_partial<<<grid, block, 0, stream>>>(A, B, workspace, M, N, K);
  workspace_to_c<<<(unsigned)((count + 255) / 256), 256, 0, stream>>>(workspace, C, count);
  cudaFreeAsync(workspace, stream);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
