// cuda-l2 family "small": one launch for tiny/skinny HGEMM where launch latency dominates.
// mma.sync m16n8k16 (fp32 accumulation), cp.async multistage, ldmatrix; optional split-K inside the same launch
// with a deterministic reduction: every split writes fp32 partials to a static workspace, the last CTA to arrive
// at a tile (self-resetting counter) sums the splits in the fixed order 0..S-1.
// On sm_90 the split can instead be a thread-block cluster along K (cluster_k): the CTAs of a cluster hold their
// fp32 partial tiles in shared memory and each one sums a slice of rows over the whole cluster through distributed
// shared memory (fixed order 0..S-1), so no global workspace, counter or second pass is involved.
// epi=smem stages the tile in shared memory as fp32 and writes C with 16-byte stores (the output-bound shapes).
// params: {"bk":64,"bm":16,"bn":32,"pdl":true,"split_k":1,"stages":4,"wm":1,"wn":2}
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
namespace {
// Programmatic dependent launch (sm_90+): the grid is launched while the stream's previous kernel is still
// running, and every thread waits in wait_for_predecessor() until that kernel has completed and its memory is
// visible. Nothing global is read or written before the wait, so the ordering is the same as a plain launch; what
// overlaps is the launch itself (CTA scheduling, shared-memory carve-out), about 0.9 us per call on the H200 even
// when the previous kernel is an ordinary one (docs/design/builtin_policy.md, "PDL").
__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <typename Kernel, typename... Args>
cudaError_t launch_after_predecessor(Kernel kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                     Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}
constexpr int BM = 16, BN = 32, BK = 64;
constexpr int WARPS_M = 1, WARPS_N = 2;
constexpr int STAGES = 4;
constexpr int SPLIT = 1;
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;
constexpr int MT = WTM / 16, NT = WTN / 8;
constexpr int AS = BK + 8;  // padded row strides (halves): ldmatrix rows land in distinct banks
constexpr int BS = BN + 8;
constexpr int A_STAGE = BM * AS, B_STAGE = BK * BS;
constexpr int PIPE_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;
constexpr int SMEM_BYTES = PIPE_BYTES;
static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile must be a multiple of 16x16");
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  int n = pred ? 16 : 0;  // src-size 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const half* p) {
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], const half* p) {
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void load_tile(half* sA, half* sB, const half* __restrict__ A, const half* __restrict__ B,
                                          int M, int N, int K, int m0, int n0, int k0, int tid) {
  constexpr int ACH = BM * BK / 8, BCH = BK * BN / 8;
#pragma unroll
  for (int c = tid; c < ACH; c += THREADS) {
    int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
    int gr = m0 + r, gk = k0 + kc;
    bool p = gr < M && gk < K;
    cp_async16(sA + r * AS + kc, p ? A + (size_t)gr * K + gk : A, p);
  }
#pragma unroll
  for (int c = tid; c < BCH; c += THREADS) {
    int r = c / (BN / 8), nc = (c % (BN / 8)) * 8;
    int gk = k0 + r, gn = n0 + nc;
    bool p = gk < K && gn < N;
    cp_async16(sB + r * BS + nc, p ? B + (size_t)gk * N + gn : B, p);
  }
}

__global__ void __launch_bounds__(THREADS) small_hgemm(
    const half* __restrict__ A, const half* __restrict__ B, half* __restrict__ C, int M, int N, int K) {
  wait_for_predecessor();
  extern __shared__ __align__(128) unsigned char smem_raw[];
  half* sA = reinterpret_cast<half*>(smem_raw);
  half* sB = sA + STAGES * A_STAGE;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

  const int KT = (K + BK - 1) / BK;
  const int kt0 = 0, nk = KT;
  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) load_tile(sA + s * A_STAGE, sB + s * B_STAGE, A, B, M, N, K, m0, n0, (kt0 + s) * BK, tid);
    cp_async_commit();
  }

  for (int i = 0; i < nk; ++i) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      int nxt = i + STAGES - 1;
      if (nxt < nk) {
        int st = nxt % STAGES;
        load_tile(sA + st * A_STAGE, sB + st * B_STAGE, A, B, M, N, K, m0, n0, (kt0 + nxt) * BK, tid);
      }
      cp_async_commit();
    }
    const half* a = sA + (i % STAGES) * A_STAGE;
    const half* b = sB + (i % STAGES) * B_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[MT][4], bf[NT / 2][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        ldsm_x4(af[mt], a + (wm * WTM + mt * 16 + (lane & 15)) * AS + kk + (lane >> 4) * 8);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np)
        ldsm_x4_t(bf[np], b + (kk + (lane & 15)) * BS + wn * WTN + np * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mma16816(acc[mt][nt], af[mt], bf[nt / 2][(nt & 1) * 2], bf[nt / 2][(nt & 1) * 2 + 1]);
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      int r = m0 + wm * WTM + mt * 16 + (lane >> 2);
      int c = n0 + wn * WTN + nt * 8 + (lane & 3) * 2;
      if (c < N) {
        if (r < M) *reinterpret_cast<half2*>(C + (size_t)r * N + c) = __floats2half2_rn(acc[mt][nt][0], acc[mt][nt][1]);
        if (r + 8 < M)
          *reinterpret_cast<half2*>(C + (size_t)(r + 8) * N + c) = __floats2half2_rn(acc[mt][nt][2], acc[mt][nt][3]);
      }
    }
}

// The shared-memory limit is a function attribute of each device, so a second GPU in the process raises it again.
// What belongs to the device and this kernel, not to any call's pointers, is asked and set once per device index:
// host time in a call is GPU idle time when the call arrives at an idle GPU (server mode). An entry's `ready` is
// stored last with release order, so a caller on another thread sees either no entry or a whole one; a fill that
// fails (a driver call) keeps nothing, so the next call asks again.
// Include it inside the template's unnamed namespace: a static local of a template with external linkage is one
// object per process (GCC's unique symbols), so a second library loaded beside the first would read the first's
// entries (seen once: included in ampere_cute's named namespace, the second sample's launch was refused). It
// cannot open its own unnamed namespace either: nested in the includer's, nvcc's registration stub finds the name
// ambiguous.
template <class Entry, class Fill>
bool per_device(int device, Entry& out, Fill fill) {
  static Entry known[64];
  Entry* entry = device >= 0 && device < 64 ? &known[device] : nullptr;
  if (entry && __atomic_load_n(&entry->ready, __ATOMIC_ACQUIRE)) {
    out = *entry;
    return true;
  }
  Entry fresh;
  if (!fill(device, fresh)) return false;
  if (entry && !__atomic_load_n(&entry->ready, __ATOMIC_ACQUIRE)) {
    *entry = fresh;
    __atomic_store_n(&entry->ready, 1, __ATOMIC_RELEASE);
  }
  out = fresh;
  return true;
}
struct PerDevice {
  int ready = 0;
};

bool fill_device(int, PerDevice&) {
  return cudaFuncSetAttribute(small_hgemm, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              SMEM_BYTES) == cudaSuccess;
}
}  // namespace

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C, int M, int N, int K,
                     cudaStream_t stream) {
  (void)B_col_major;
  if (M <= 0 || N <= 0 || K <= 0) return 1;
  if (N % 8 != 0 || K % 8 != 0) return 2;  // 16-byte cp.async chunks
  if ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B) | reinterpret_cast<uintptr_t>(C)) & 15) return 2;
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM, SPLIT);
  if (grid.y > 65535) return 2;
  // The split-K arrival flag is static shared memory: 48 KB of dynamic shared memory plus it is over the default
  // limit (64x512x2048, bm=32 bn=64 4 stages: launch refused), so the limit is raised whenever it is near.
  if constexpr (SMEM_BYTES > 47 * 1024) {
    int device = 0;
    PerDevice dev;
    if (cudaGetDevice(&device) != cudaSuccess || !per_device(device, dev, fill_device)) return 3;
  }
  if (launch_after_predecessor(small_hgemm, grid, dim3(THREADS), SMEM_BYTES, stream, A, B, C, M, N, K) != cudaSuccess)
    return 4;
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
