"""Probe (an earlier sweep): what one `hgemm` call costs the host (CPU time to enqueue it), per family, beside torch.matmul
and beside a ctypes call that does nothing, and what the CUDA API calls of the TMA families' host paths cost alone.

Run on the GPU machine after `source scripts/device_env.sh`:
    python3 docs/benchmarks/data/sweeps/host_enqueue.py [--out FILE] [--reps 200] [--repeats 9]
It renders the templates of the checkout it runs in: run it once on the code before the host-path change (ecb9b59)
and once after, and compare the `host_us` columns (the GPU executes the same machine code in both: the kernels'
.text sections are byte-identical). To do both in one device command, copy the earlier templates into an untracked
folder of the tree that travels (`git show ecb9b59:agent/families/hopper_raw.cu.j2 > r43_old/hopper_raw.cu.j2`, the
same for hopper_wgmma.cu.j2), run the probe, `cp r43_old/*.j2 agent/families/`, and run it again.

Host time: before each repeat a `torch.cuda._sleep` keeps the GPU busy for several times the expected loop time, so
every call only enqueues (the queue never drains, the host never waits on the GPU); perf_counter around `reps` calls
without synchronising, the median over `repeats` repeats, per call. `caught_up` says a repeat's sleep had already
ended when its loop did (the host may then have waited: the sleep was too short or the queue filled). `net_us` is
host_us less the ctypes floor (the same Python loop calling an exported function that returns 0). The API rows time
single CUDA runtime/driver calls in a C++ loop (steady_clock), no Python in between.
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import torch

from agent.families import render
from evaluator.compile import compile_kernel, compile_many

WGMMA = {"tile_m": 128, "tile_n": 128, "tile_k": 64, "cluster_m": 1, "cluster_n": 1, "schedule": "cooperative",
         "scheduler": "persistent", "splits": 1, "raster": "heuristic", "swizzle": 1, "stages": 0, "b_operand": "col",
         "swap_ab": False, "acc": "fp32", "pdl": True}
RAW = {"tile_m": 128, "tile_n": 128, "stages": 6, "group": 1, "acc": "fp32", "epi": "direct", "pdl": True}
SMALL_SHAPE = (128, 2048, 4096)
CONFIGS = [  # (label, family, params, shape): one host path each
    ("small", "small", {"bm": 16, "bn": 64, "bk": 64, "wm": 1, "wn": 4, "stages": 4, "split_k": 1, "pdl": True},
     SMALL_SHAPE),
    ("ampere_cute", "ampere_cute",
     {"bm": 32, "bn": 128, "bk": 64, "wm": 2, "wn": 2, "stages": 4, "prefetch": 3, "sw_b": 3, "sw_m": 3, "sw_s": 3,
      "block_swizzle": 4, "reg_pipeline": True, "epilogue": "smem", "split_k": 2, "acc": "fp32", "pdl": True},
     SMALL_SHAPE),
    # CUTLASS: a 1x1x1 cluster launches through cutlass::kernel_launch, a larger one through ClusterLauncher (which
    # sets an attribute per call), stream-K allocates and clears a workspace, batched adds a summing kernel
    ("wgmma_persistent", "hopper_wgmma", WGMMA, SMALL_SHAPE),
    ("wgmma_cluster1x2", "hopper_wgmma", dict(WGMMA, cluster_n=2), SMALL_SHAPE),
    ("wgmma_streamk", "hopper_wgmma", dict(WGMMA, scheduler="streamk", tile_n=256, pdl=False), SMALL_SHAPE),
    ("wgmma_batched4", "hopper_wgmma", dict(WGMMA, scheduler="batched", splits=4, swap_ab=True, tile_n=64),
     SMALL_SHAPE),
    # hand-written: two tensor maps with the direct epilogue, three with the TMA one; a cluster asks the occupancy
    ("raw_direct", "hopper_raw", RAW, SMALL_SHAPE),
    ("raw_tma", "hopper_raw", dict(RAW, epi="tma"), SMALL_SHAPE),
    ("raw_tma_cluster2", "hopper_raw", dict(RAW, epi="tma", cluster_m=2), (256, 2048, 4096)),
]

# Single API calls, timed in C++: the per-call pieces of the TMA families' host paths.
HELPER = r"""
#include <cuda_runtime.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <chrono>
#include <cutlass/cuda_host_adapter.hpp>

namespace {
__global__ void empty_kernel() {}
__device__ float g_sym[4];

double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

PFN_cuTensorMapEncodeTiled_v12000 lookup(cudaError_t* err) {
  void* pfn = nullptr;
  cudaDriverEntryPointQueryResult q;
  *err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pfn, 12000, cudaEnableDefault, &q);
  if (q != cudaDriverEntryPointSuccess) *err = cudaErrorUnknown;
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pfn);
}

// hopper_raw's map of A: 4096 columns (K) x 128 rows, a 64 x 128 box, 128-byte swizzle
template <typename F>
CUresult encode(F fn, CUtensorMap* map, void* ptr) {
  const cuuint64_t dims[2] = {4096, 128};
  const cuuint64_t strides[1] = {4096 * 2};
  const cuuint32_t box[2] = {64, 128};
  const cuuint32_t elem[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, ptr, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}
}  // namespace

extern "C" int noop(void*, void*, void*, void*, int, int, int, void*) { return 0; }

// Nanoseconds per call of API `which` over n calls (after one untimed call), or -1 if a call failed.
extern "C" double time_api(int which, int n, void* ptr, void* stream_ptr) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  cudaError_t err = cudaSuccess;
  PFN_cuTensorMapEncodeTiled_v12000 fn = lookup(&err);
  if (err != cudaSuccess || fn == nullptr) return -1;
  alignas(64) CUtensorMap map;
  int device = 0, value = 0;
  bool ok = true;
  double t0 = 0;
  for (int i = -1; i < n && ok; ++i) {
    if (i == 0) t0 = now_ns();
    switch (which) {
      case 0: ok = cudaGetDevice(&device) == cudaSuccess; break;
      case 1: ok = cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device) == cudaSuccess; break;
      case 2: lookup(&err); ok = err == cudaSuccess; break;
      case 3: ok = encode(fn, &map, ptr) == CUDA_SUCCESS; break;
      case 4:  // as hopper_raw and CuTe call it
        ok = encode([](auto... a) { return CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(a...); }, &map,
                    ptr) == CUDA_SUCCESS;
        break;
      case 5: ok = cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10) ==
                   cudaSuccess; break;
      case 6: ok = cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
                   cudaSuccess; break;
      case 7: { void* p = nullptr; ok = cudaGetSymbolAddress(&p, g_sym) == cudaSuccess; break; }
      case 8: { void* p = nullptr;
                ok = cudaMallocAsync(&p, 1 << 20, stream) == cudaSuccess && cudaFreeAsync(p, stream) == cudaSuccess;
                break; }
      case 9: empty_kernel<<<1, 32, 0, stream>>>(); ok = cudaGetLastError() == cudaSuccess; break;
      case 10: {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(1);
        cfg.blockDim = dim3(32);
        cfg.stream = stream;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        ok = cudaLaunchKernelEx(&cfg, empty_kernel) == cudaSuccess;
        break;
      }
      case 11: ok = cudaGetLastError() == cudaSuccess; break;
      default: return -1;
    }
  }
  const double t1 = now_ns();
  return ok ? (t1 - t0) / n : -1;
}
"""
# (which, name, enqueues GPU work: the GPU is kept busy while it runs)
APIS = [(0, "cudaGetDevice", False), (1, "cudaDeviceGetAttribute(SM count)", False),
        (2, "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)", False),
        (3, "cuTensorMapEncodeTiled (pointer kept)", False),
        (4, "CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled) (lookup + encode)", False),
        (5, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)", False),
        (6, "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)", False),
        (7, "cudaGetSymbolAddress", False), (8, "cudaMallocAsync + cudaFreeAsync (1 MiB)", True),
        (9, "empty kernel <<<1, 32, 0, stream>>>", True), (10, "empty kernel, cudaLaunchKernelEx with PDL", True),
        (11, "cudaGetLastError", False)]

ARGTYPES = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p]


def load(so, name="hgemm"):
    fn = getattr(ctypes.CDLL(so), name)
    fn.argtypes = ARGTYPES
    fn.restype = ctypes.c_int
    return fn


def sleep_cycles_per_us():
    """The GPU's clock as torch.cuda._sleep counts it (cycles per microsecond)."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)
    torch.cuda.synchronize()
    e0.record()
    torch.cuda._sleep(20_000_000)
    e1.record()
    torch.cuda.synchronize()
    return 20_000_000 / (e0.elapsed_time(e1) * 1e3)


def host_time(call, reps, repeats, cyc_per_us):
    """Median host microseconds per call over `repeats` loops of `reps` calls, each behind a GPU sleep."""
    t0 = time.perf_counter()
    for _ in range(reps):  # a rough figure first, to size the sleep; synchronised
        call()
    rough = (time.perf_counter() - t0) / reps * 1e6
    torch.cuda.synchronize()
    sleep_us = 4 * rough * reps + 5000
    per, caught_up = [], 0
    for _ in range(repeats):
        torch.cuda._sleep(int(sleep_us * cyc_per_us))
        done = torch.cuda.Event()
        done.record()
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        t1 = time.perf_counter()
        caught_up += bool(done.query())  # the sleep had ended: the host may have waited for the GPU
        torch.cuda.synchronize()
        per.append((t1 - t0) / reps * 1e6)
    return statistics.median(per), per, caught_up


def gpu_time(call, reps, cyc_per_us):
    """Microseconds of GPU time per call from events around back-to-back calls queued behind a sleep."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(20_000 * cyc_per_us))
    e0.record()
    for _ in range(reps):
        call()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / reps * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the JSON rows here (one per line)")
    ap.add_argument("--reps", type=int, default=200, help="calls per timed loop")
    ap.add_argument("--repeats", type=int, default=9, help="timed loops per config (the median is reported)")
    args = ap.parse_args()

    srcs = [render(fam, p, shape, "sm_90a") for _, fam, p, shape in CONFIGS]
    infos = compile_many(srcs, "sm_90a")  # screened, as the search loop builds them
    helper = compile_kernel(HELPER, "sm_90a", screen_source=False)
    for info in [*infos, helper]:
        assert info.ok, info.log[-3000:]
    helper_lib = ctypes.CDLL(helper.so_path)
    noop = load(helper.so_path, "noop")
    time_api = helper_lib.time_api
    time_api.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    time_api.restype = ctypes.c_double

    torch.cuda.init()
    cyc = sleep_cycles_per_us()
    st = torch.cuda.current_stream()
    rows = []

    def emit(row):
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        rows.append(row)

    scratch = torch.empty(128 * 4096, device="cuda", dtype=torch.half)
    for which, name, enqueues in APIS:
        n = args.reps if enqueues else 2000
        vals = []
        for _ in range(args.repeats):
            if enqueues:
                torch.cuda._sleep(int(20_000 * cyc))
            vals.append(time_api(which, n, scratch.data_ptr(), st.cuda_stream))
            torch.cuda.synchronize()
        emit({"kind": "api", "api": name, "ns": statistics.median(vals), "ns_repeats": vals})

    ptrs = [scratch.data_ptr()] * 4
    floor, floor_reps, _ = host_time(lambda: noop(*ptrs, 1, 1, 1, st.cuda_stream), args.reps, args.repeats, cyc)
    emit({"kind": "ctypes_noop", "host_us": floor, "host_us_repeats": floor_reps})

    for (label, fam, p, (m, n, k)), info in zip(CONFIGS, infos):
        fn = load(info.so_path)
        a = torch.randn(m, k, device="cuda", dtype=torch.half)
        b = torch.randn(k, n, device="cuda", dtype=torch.half)
        bc = b.t().contiguous()
        c = torch.empty(m, n, device="cuda", dtype=torch.half)
        pa, pb, pbc, pc, s = a.data_ptr(), b.data_ptr(), bc.data_ptr(), c.data_ptr(), st.cuda_stream
        call = lambda: fn(pa, pb, pbc, pc, m, n, k, s)  # noqa: E731
        rc = call()
        torch.cuda.synchronize()
        if rc != 0:
            emit({"kind": "hgemm", "label": label, "family": fam, "params": p, "shape": [m, n, k], "rc": rc})
            continue
        err = (c.float() - a.float() @ b.float()).abs().max().item()
        host, host_reps, caught = host_time(call, args.reps, args.repeats, cyc)
        t_call = lambda: torch.matmul(a, b, out=c)  # noqa: E731
        t_host, _, t_caught = host_time(t_call, args.reps, args.repeats, cyc)
        emit({"kind": "hgemm", "label": label, "family": fam, "params": p, "shape": [m, n, k], "rc": rc,
              "max_err": err, "host_us": host, "net_us": host - floor, "host_us_repeats": host_reps,
              "caught_up": caught, "torch_host_us": t_host, "torch_caught_up": t_caught,
              "gpu_us": gpu_time(call, args.reps, cyc), "torch_gpu_us": gpu_time(t_call, args.reps, cyc)})

    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.reps} calls x {args.repeats} repeats, "
          f"median per call; ctypes floor {floor:.2f} us")
    print(f"{'config':<18} {'shape':<16} {'host_us':>8} {'net_us':>8} {'torch_us':>9} {'gpu_us':>8} "
          f"{'torch_gpu':>9} {'max_err':>8} caught_up")
    for r in rows:
        if r["kind"] != "hgemm":
            continue
        shape = "x".join(map(str, r["shape"]))
        if r["rc"] != 0:
            print(f"{r['label']:<18} {shape:<16} rc={r['rc']}")
            continue
        print(f"{r['label']:<18} {shape:<16} {r['host_us']:>8.2f} {r['net_us']:>8.2f} {r['torch_host_us']:>9.2f} "
              f"{r['gpu_us']:>8.2f} {r['torch_gpu_us']:>9.2f} {r['max_err']:>8.3f} "
              f"{r['caught_up']}/{r['torch_caught_up']}")
    print(f"\n{'API (C++ loop)':<80} {'ns/call':>9}")
    for r in rows:
        if r["kind"] == "api":
            print(f"{r['api']:<80} {r['ns']:>9.0f}")
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
