// Hostile: splits the rows over the given stream and a second stream it creates, joined with an event. Creating
// streams or events is outside the contract. Expected: refused by screening.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

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
  cudaStream_t side;
  cudaEvent_t joined;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&joined, cudaEventDisableTiming);
  int half_m = M / 2;
  dim3 block(32, 8);
  dim3 grid_top((N + 31) / 32, (half_m + 7) / 8), grid_bottom((N + 31) / 32, (M - half_m + 7) / 8);
  if (half_m > 0) naive_hgemm<<<grid_top, block, 0, stream>>>(A, B, C, half_m, N, K, 0);
  naive_hgemm<<<grid_bottom, block, 0, side>>>(A, B, C, M, N, K, half_m);
  cudaEventRecord(joined, side);
  cudaStreamWaitEvent(stream, joined, 0);
  cudaEventDestroy(joined);
  cudaStreamDestroy(side);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
