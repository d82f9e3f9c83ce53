// Hostile: launched with programmatic dependent launch (sm_90) to hide its launch latency, but it never executes
// griddepcontrol.wait, so it may run while the previous kernel on the stream is still writing A and B.
// The result is right whenever the previous kernel has finished in time. Expected: waits_for_predecessor.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void naive_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C, int M,
                            int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[(size_t)row * N + col] = __float2half_rn(acc);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C, int M, int N, int K,
                     cudaStream_t stream) {
  (void)B_col_major;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(32, 8);
  cfg.gridDim = dim3((N + 31) / 32, (M + 7) / 8);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, naive_hgemm, A, B, C, M, N, K) == cudaSuccess ? 0 : 1;
}
