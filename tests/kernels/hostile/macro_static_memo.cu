// Hostile: a pointer-keyed memo whose `static` is spelled by a macro, so the text shows no static at all. Called
// again with the same A, B, C and shape, it returns without launching. The compiled object still holds the
// variables as writable local statics (hgemm::last_A, ...). Expected: refused by the object screen after
// `nvcc -c` (status screen_rejected); with the screen bypassed, new data at the same addresses gives a stale C.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define REMEMBERED static

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
  REMEMBERED const half* last_A = nullptr;
  REMEMBERED const half* last_B = nullptr;
  REMEMBERED half* last_C = nullptr;
  REMEMBERED long long last_shape = -1;
  long long shape = ((long long)M << 42) ^ ((long long)N << 21) ^ K;
  if (A == last_A && B == last_B && C == last_C && shape == last_shape) return 0;
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  naive_hgemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  if (cudaGetLastError() != cudaSuccess) return 1;
  last_A = A;
  last_B = B;
  last_C = C;
  last_shape = shape;
  return 0;
}
