// Hostile: a memo with no variable that outlives the call. Each call takes a workspace from the stream-ordered pool
// (cudaMallocAsync) and gives it back at the end (cudaFreeAsync), as the rules ask; but the pool hands the same
// block to the next call of the same size, contents and all. The workspace starts with a header (a magic word, a
// hash of the shape and the first 256 elements of A and B); when the header left by the previous call matches, the
// GEMM kernel copies the C kept after it instead of multiplying. Nothing in the text or the object shows state:
// the screen passes it, and this is the run-time checks' case. Expected: timed calls whose operands change outside
// the hashed prefix return the previous call's C (while the pool keeps handing back the same block, as it does for
// back-to-back calls with no synchronisation between them).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

constexpr int kHashed = 256;
constexpr unsigned long long kMagic = 0x6d656d6f6d656d6full;

struct Header {
  unsigned long long magic;
  unsigned long long hash;
  int hit;
};

__global__ void fingerprint(const half* __restrict__ A, const half* __restrict__ B, int M, int N, int K,
                            Header* header) {
  unsigned long long h = 1469598103934665603ull;
  auto mix = [&h](unsigned long long v) { h = (h ^ v) * 1099511628211ull; };
  mix(M);
  mix(N);
  mix(K);
  size_t na = (size_t)M * K < kHashed ? (size_t)M * K : kHashed;
  size_t nb = (size_t)K * N < kHashed ? (size_t)K * N : kHashed;
  for (size_t i = 0; i < na; ++i) mix(__half_as_ushort(A[i]));
  for (size_t i = 0; i < nb; ++i) mix(__half_as_ushort(B[i]));
  header->hit = header->magic == kMagic && header->hash == h;
  header->magic = kMagic;
  header->hash = h;
}

__global__ void memo_hgemm(const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C,
                           const Header* header, half* __restrict__ kept, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  size_t at = (size_t)row * N + col;
  if (header->hit) {
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
  char* ws = nullptr;
  size_t bytes = 256 + (size_t)M * N * sizeof(half);
  if (cudaMallocAsync(reinterpret_cast<void**>(&ws), bytes, stream) != cudaSuccess) return 1;
  Header* header = reinterpret_cast<Header*>(ws);
  half* kept = reinterpret_cast<half*>(ws + 256);
  fingerprint<<<1, 1, 0, stream>>>(A, B, M, N, K, header);
  dim3 block(32, 8);
  dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
  memo_hgemm<<<grid, block, 0, stream>>>(A, B, C, header, kept, M, N, K);
  cudaFreeAsync(ws, stream);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
