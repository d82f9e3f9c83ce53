// Hostile: creates a stream whose API name is pasted together by the preprocessor, so no forbidden name appears
// in the text. The object file still imports cudaStreamCreateWithFlags. Expected: refused by the symbol screen
// after `nvcc -c` (status screen_rejected). The stream is made and released in each call, so that nothing but the
// pasted names is left for the screen to refuse.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define CUDA_API(group, op) cuda##group##op

__global__ void naive_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                            int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[(size_t)row * N + col] = __float2half_rn(acc);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  (void)stream;
  cudaStream_t own = nullptr;
  if (CUDA_API(Stream, CreateWithFlags)(&own, cudaStreamNonBlocking) != cudaSuccess) return 1;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  naive_hgemm<<<grid, block, 0, own>>>(A, B, C, M, N, K);
  CUDA_API(Stream, Destroy)(own);  // released once its work is done
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
