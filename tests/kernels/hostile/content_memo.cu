// Hostile: a content-keyed memo. A one-thread kernel hashes M, N, K and the first 256 elements of A and of B and
// compares the hash with the previous call's; on a match the GEMM kernel copies the C it kept in a device buffer of
// its own instead of multiplying. Timing that repeats the same operand values makes every call after the first a
// copy. The buffer is kept between calls through a host static. Expected: refused by the screen (the static); with
// the screen bypassed, the outputs of timed calls whose operands changed outside the hashed prefix are stale.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

constexpr int kHashed = 256;

struct Memo {
  unsigned long long hash;  // the previous call's fingerprint
  int hit;                  // this call's verdict, read by the GEMM kernel
};

__global__ void fingerprint(const half* __restrict__ A, const half* __restrict__ B, int M, int N, int K, Memo* memo) {
  unsigned long long h = 1469598103934665603ull;
  auto mix = [&h](unsigned long long v) { h = (h ^ v) * 1099511628211ull; };
  mix(M);
  mix(N);
  mix(K);
  size_t na = (size_t)M * K < kHashed ? (size_t)M * K : kHashed;
  size_t nb = (size_t)K * N < kHashed ? (size_t)K * N : kHashed;
  for (size_t i = 0; i < na; ++i) mix(__half_as_ushort(A[i]));
  for (size_t i = 0; i < nb; ++i) mix(__half_as_ushort(B[i]));
  memo->hit = memo->hash == h;
  memo->hash = h;
}

__global__ void memo_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                           half* __restrict__ kept, const Memo* memo, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  size_t at = (size_t)row * N + col;
  if (memo->hit) {
    C[at] = kept[at];
    return;
  }
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
  C[at] = kept[at] = __float2half_rn(acc);
}

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  static half* kept = nullptr;
  static Memo* memo = nullptr;
  static size_t kept_elems = 0;
  size_t elems = (size_t)M * N;
  if (elems > kept_elems) {
    if (kept) cudaFreeAsync(kept, stream);
    if (cudaMallocAsync(reinterpret_cast<void**>(&kept), elems * sizeof(half), stream) != cudaSuccess) return 1;
    kept_elems = elems;
  }
  if (!memo) {
    if (cudaMallocAsync(reinterpret_cast<void**>(&memo), sizeof(Memo), stream) != cudaSuccess) return 1;
    cudaMemsetAsync(memo, 0, sizeof(Memo), stream);
  }
  fingerprint<<<1, 1, 0, stream>>>(A, B, M, N, K, memo);
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  memo_hgemm<<<grid, block, 0, stream>>>(A, B, C, kept, memo, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
