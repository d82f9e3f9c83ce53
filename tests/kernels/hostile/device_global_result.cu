// Hostile: keeps its result in a __device__ global. A one-thread kernel hashes the shape and 256 elements sampled
// across A and B at a fixed stride and compares the hash with the one kept on the device; on a match the GEMM kernel
// copies the C it kept in `g_result` instead of multiplying (shapes whose C does not fit are multiplied every time).
// No host state at all: every byte of the memo lives in device globals. Expected: refused by the screen (a written,
// non-const __device__ global); with the screen bypassed, timed calls whose operands changed away from the sampled
// elements return a stale C.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

constexpr size_t kKeptElems = size_t(1) << 22;
constexpr int kSampled = 128;

__device__ half g_result[kKeptElems];
__device__ unsigned long long g_hash;
__device__ int g_hit;

__global__ void fingerprint(const half* __restrict__ A, const half* __restrict__ B, int M, int N, int K) {
  unsigned long long h = 1469598103934665603ull;
  auto mix = [&h](unsigned long long v) { h = (h ^ v) * 1099511628211ull; };
  mix(M);
  mix(N);
  mix(K);
  size_t na = (size_t)M * K, nb = (size_t)K * N;
  for (int i = 0; i < kSampled; ++i) {
    mix(__half_as_ushort(A[na * i / kSampled]));
    mix(__half_as_ushort(B[nb * i / kSampled]));
  }
  g_hit = g_hash == h;
  g_hash = h;
}

__global__ void memo_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                           int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  size_t at = (size_t)row * N + col;
  if (g_hit) {
    C[at] = g_result[at];
    return;
  }
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[at] = g_result[at] = __float2half_rn(acc);
}

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
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  if ((size_t)M * N > kKeptElems) {
    naive_hgemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  } else {
    fingerprint<<<1, 1, 0, stream>>>(A, B, M, N, K);
    memo_hgemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
