// cuda-l2 family "ampere_cute": Ampere-style CuTe multistage HGEMM (runs on sm_80 and sm_90a).
// mma.sync m16n8k16 (SM80 atoms), cp.async global->shared (128-bit), ldmatrix shared->registers, swizzled shared
// memory, optional register double buffering, grouped block rasterisation, epilogue through shared memory with
// 128-bit stores, optional deterministic in-launch split-K. B is read from B_col_major (K-major, "TN").
// Edge tiles: a tile that would cross M or N is shifted back to end at M (N); the overlap is recomputed and both
// CTAs write identical values, so no predication is needed in the main loop (needs M >= BM and N >= BN).
// params: {"acc":"fp32","bk":64,"block_swizzle":4,"bm":128,"bn":128,"epilogue":"smem","pdl":true,"prefetch":2,"reg_pipeline":true,"split_k":1,"stages":3,"sw_b":3,"sw_m":3,"sw_s":3,"wm":2,"wn":4}
#ifndef NDEBUG
#define NDEBUG 1
#endif
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <cute/tensor.hpp>

// A named namespace: with `using namespace cute` inside an anonymous one, nvcc's generated host stub cannot
// name the kernel unambiguously.
namespace cudal2_ampere_cute {
using namespace cute;
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
using T = cute::half_t;

constexpr int BM = 128, BN = 128, BK = 64;
constexpr int WM = 2, WN = 4;
constexpr int STAGES = 3;
constexpr int DIST = 2;  // tiles in flight ahead of the one being computed (<= STAGES-1)
constexpr int SPLIT = 1;
constexpr int GROUP = 4;  // grouped rasterisation: GROUP tile-rows per group (1: row-major)
constexpr int THREADS = WM * WN * 32;
using AccT = float;
using MmaAtom = MMA_Atom<SM80_16x8x16_F32F16F16F32_TN>;
using TiledMma = decltype(make_tiled_mma(MmaAtom{}, make_layout(make_shape(Int<WM>{}, Int<WN>{}, _1{})),
                                         Tile<Int<16 * WM>, Int<16 * WN>, _16>{}));

// K-major shared tiles: an (8 x BK) atom with a Swizzle<3,3,3> on 16-byte units.
using SmemAtom = decltype(composition(Swizzle<3, 3, 3>{},
                                      make_layout(make_shape(_8{}, Int<BK>{}), make_stride(Int<BK>{}, _1{}))));
using SmemLayoutA = decltype(tile_to_shape(SmemAtom{}, make_shape(Int<BM>{}, Int<BK>{}, Int<STAGES>{})));
using SmemLayoutB = decltype(tile_to_shape(SmemAtom{}, make_shape(Int<BN>{}, Int<BK>{}, Int<STAGES>{})));

using G2SCopy = decltype(make_tiled_copy(
    Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, T>{},
    make_layout(make_shape(Int<THREADS / (BK / 8)>{}, Int<BK / 8>{}), make_stride(Int<BK / 8>{}, _1{})),
    make_layout(make_shape(_1{}, _8{}))));
using S2RAtom = Copy_Atom<SM75_U32x4_LDSM_N, T>;

constexpr int CS = BN + 8;  // epilogue staging row stride (halves): 16-byte aligned rows, fewer bank conflicts
constexpr int SMEM_MAIN = (cosize_v<SmemLayoutA> + cosize_v<SmemLayoutB>) * 2;
constexpr int SMEM_EPI = 1 * BM * CS * 2;
constexpr int SMEM_BYTES = SMEM_MAIN > SMEM_EPI ? SMEM_MAIN : SMEM_EPI;

// Plain pointer types in the signature keep the host stub free of CuTe types.
__global__ void __launch_bounds__(THREADS) ampere_cute_hgemm(const half* __restrict__ Ap, const half* __restrict__ Bp,
                                                            half* __restrict__ Dp, int M, int N, int K) {
  wait_for_predecessor();
  const T* Aptr = reinterpret_cast<const T*>(Ap);
  const T* Bptr = reinterpret_cast<const T*>(Bp);
  T* Dptr = reinterpret_cast<T*>(Dp);
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smA = reinterpret_cast<T*>(smem_raw);
  T* smB = smA + cosize_v<SmemLayoutA>;
  const int tid = threadIdx.x;

  // Tile coordinates, grouped rasterisation.
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int id = blockIdx.x;
  int tm, tn;
  if (GROUP > 1) {
    const int per_group = GROUP * tiles_n;
    const int first = (id / per_group) * GROUP;
    const int gsize = min(tiles_m - first, GROUP);
    tm = first + (id % per_group) % gsize;
    tn = (id % per_group) / gsize;
  } else {
    tm = id / tiles_n;
    tn = id % tiles_n;
  }
  const int m0 = min(tm * BM, M - BM);  // shifted edge tiles (see header)
  const int n0 = min(tn * BN, N - BN);

  Tensor A = make_tensor(make_gmem_ptr(Aptr + (size_t)m0 * K), make_shape(Int<BM>{}, K), make_stride(K, _1{}));
  Tensor B = make_tensor(make_gmem_ptr(Bptr + (size_t)n0 * K), make_shape(Int<BN>{}, K), make_stride(K, _1{}));
  Tensor gA = local_tile(A, make_tile(Int<BM>{}, Int<BK>{}), make_coord(0, _));  // (BM, BK, kt)
  Tensor gB = local_tile(B, make_tile(Int<BN>{}, Int<BK>{}), make_coord(0, _));  // (BN, BK, kt)
  Tensor sA = make_tensor(make_smem_ptr(smA), SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smB), SmemLayoutB{});

  TiledMma mma;
  auto thr_mma = mma.get_slice(tid);
  Tensor tCrA = thr_mma.partition_fragment_A(sA(_, _, 0));
  Tensor tCrB = thr_mma.partition_fragment_B(sB(_, _, 0));
  Tensor acc = partition_fragment_C(mma, make_shape(Int<BM>{}, Int<BN>{}));
  clear(acc);

  G2SCopy g2s;
  auto g2s_thr = g2s.get_slice(tid);
  Tensor tAgA = g2s_thr.partition_S(gA);
  Tensor tAsA = g2s_thr.partition_D(sA);
  Tensor tBgB = g2s_thr.partition_S(gB);
  Tensor tBsB = g2s_thr.partition_D(sB);

  auto s2r_a = make_tiled_copy_A(S2RAtom{}, mma);
  auto s2r_a_thr = s2r_a.get_slice(tid);
  Tensor tXsA = s2r_a_thr.partition_S(sA);
  Tensor tXrA = s2r_a_thr.retile_D(tCrA);
  auto s2r_b = make_tiled_copy_B(S2RAtom{}, mma);
  auto s2r_b_thr = s2r_b.get_slice(tid);
  Tensor tXsB = s2r_b_thr.partition_S(sB);
  Tensor tXrB = s2r_b_thr.retile_D(tCrB);

  const int KT = K / BK;
  const int kt0 = 0, nk = KT;
  CUTE_UNROLL
  for (int s = 0; s < DIST; ++s) {
    if (s < nk) {
      copy(g2s, tAgA(_, _, _, kt0 + s), tAsA(_, _, _, s));
      copy(g2s, tBgB(_, _, _, kt0 + s), tBsB(_, _, _, s));
    }
    cp_async_fence();
  }
  constexpr int NKI = size<2>(decltype(tCrA){});
  for (int i = 0; i < nk; ++i) {
    cp_async_wait<DIST - 1>();
    __syncthreads();
    {
      const int nxt = i + DIST;
      if (nxt < nk) {
        copy(g2s, tAgA(_, _, _, kt0 + nxt), tAsA(_, _, _, nxt % STAGES));
        copy(g2s, tBgB(_, _, _, kt0 + nxt), tBsB(_, _, _, nxt % STAGES));
      }
      cp_async_fence();
    }
    const int slot = i % STAGES;
    copy(s2r_a, tXsA(_, _, 0, slot), tXrA(_, _, 0));
    copy(s2r_b, tXsB(_, _, 0, slot), tXrB(_, _, 0));
    CUTE_UNROLL
    for (int ik = 0; ik < NKI; ++ik) {
      if (ik + 1 < NKI) {  // ping-pong: fetch the next k-slice's fragments while this one computes
        copy(s2r_a, tXsA(_, _, ik + 1, slot), tXrA(_, _, ik + 1));
        copy(s2r_b, tXsB(_, _, ik + 1, slot), tXrB(_, _, ik + 1));
      }
      gemm(mma, acc, tCrA(_, _, ik), tCrB(_, _, ik), acc);
    }
  }
  cp_async_wait<0>();

  __syncthreads();  // every warp is done reading the pipeline's shared memory
  T* smC = reinterpret_cast<T*>(smem_raw);
  Tensor sC = make_tensor(make_smem_ptr(smC), make_layout(make_shape(Int<BM>{}, Int<BN>{}), make_stride(Int<CS>{}, _1{})));
  Tensor tCsC = thr_mma.partition_C(sC);
  CUTE_UNROLL
  for (int e = 0; e < size(acc); ++e) tCsC(e) = T(acc(e));
  __syncthreads();
  constexpr int CHUNKS = BM * BN / 8;
  CUTE_UNROLL
  for (int c = tid; c < CHUNKS; c += THREADS) {
    const int r = c / (BN / 8), col = (c % (BN / 8)) * 8;
    *reinterpret_cast<uint4*>(Dptr + (size_t)(m0 + r) * N + n0 + col) = *reinterpret_cast<const uint4*>(smC + r * CS + col);
  }
}
}  // namespace cudal2_ampere_cute

namespace {
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
  return cudaFuncSetAttribute(cudal2_ampere_cute::ampere_cute_hgemm, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              cudal2_ampere_cute::SMEM_BYTES) == cudaSuccess;
}
}  // namespace

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C, int M, int N, int K,
                     cudaStream_t stream) {
  using namespace cudal2_ampere_cute;
  (void)B;
  if (M < BM || N < BN || K <= 0) return 2;  // shifted edge tiles need at least one whole tile
  if (K % BK != 0 || N % 8 != 0) return 2;
  if ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B_col_major) | reinterpret_cast<uintptr_t>(C)) & 15)
    return 2;
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  dim3 grid(tiles, SPLIT);
  // The split-K arrival flag is static shared memory: 48 KB of dynamic shared memory plus it is over the default
  // limit (64x512x2048, bm=32 bn=64 4 stages: launch refused), so the limit is raised whenever it is near.
  if constexpr (SMEM_BYTES > 47 * 1024) {
    int device = 0;
    PerDevice dev;
    if (cudaGetDevice(&device) != cudaSuccess || !per_device(device, dev, fill_device)) return 3;
  }
  if (launch_after_predecessor(ampere_cute_hgemm, grid, dim3(THREADS), SMEM_BYTES, stream, A, B_col_major, C, M, N, K) !=
      cudaSuccess)
    return 4;
  return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
