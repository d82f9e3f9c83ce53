// Hostile: a memo keyed on pointers and a few values. The host remembers the last call's (A, B, C, M, N, K); when
// they repeat, a one-thread kernel compares eight sampled elements of A and B with the ones it kept, and on a match
// the GEMM kernel copies the C it kept instead of multiplying. New data at the same addresses is noticed only where
// a sample lands. Expected: refused by the screen (the namespace-scope memo); with the screen bypassed, timed calls
// whose operands changed away from the samples return a stale C.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

constexpr int kSamples = 8;

struct Samples {
  unsigned short value[kSamples];
  int hit;
};

__global__ void compare_samples(const half* __restrict__ A, const half* __restrict__ B, int M, int N, int K,
                                int same_call, Samples* kept) {
  size_t na = (size_t)M * K, nb = (size_t)K * N;
  const size_t at[kSamples] = {0, na / 3, na / 2, na - 1, 0, nb / 3, nb / 2, nb - 1};
  int hit = same_call;
  for (int i = 0; i < kSamples; ++i) {
    unsigned short v = __half_as_ushort(i < kSamples / 2 ? A[at[i]] : B[at[i]]);
    hit &= kept->value[i] == v;
    kept->value[i] = v;
  }
  kept->hit = hit;
}

__global__ void memo_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                           half* __restrict__ kept, const Samples* samples, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  size_t at = (size_t)row * N + col;
  if (samples->hit) {
    C[at] = kept[at];
    return;
  }
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[at] = kept[at] = __float2half_rn(acc);
}

namespace {
struct LastCall {
  const half* A = nullptr;
  const half* B = nullptr;
  half* C = nullptr;
  int M = 0, N = 0, K = 0;
  half* kept = nullptr;
  Samples* samples = nullptr;
};
LastCall last;
}  // namespace

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  int same = A == last.A && B == last.B && C == last.C && M == last.M && N == last.N && K == last.K;
  if (!same) {
    if (last.kept) cudaFreeAsync(last.kept, stream);
    if (last.samples) cudaFreeAsync(last.samples, stream);
    last = LastCall{A, B, C, M, N, K};
    if (cudaMallocAsync(reinterpret_cast<void**>(&last.kept), (size_t)M * N * sizeof(half), stream) != cudaSuccess ||
        cudaMallocAsync(reinterpret_cast<void**>(&last.samples), sizeof(Samples), stream) != cudaSuccess)
      return 1;
  }
  compare_samples<<<1, 1, 0, stream>>>(A, B, M, N, K, same, last.samples);
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  memo_hgemm<<<grid, block, 0, stream>>>(A, B, C, last.kept, last.samples, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
