// How fast can TMA fill an SM's shared memory? Each CTA streams boxes (64 fp16 K-columns x ROWS rows, 128-byte
// swizzle) into a ring of STAGES; one warp waits for each stage and frees it (no math). With a cluster of CL CTAs
// each CTA loads ROWS/CL rows of a box and multicasts them to all CL, so every SM receives the full box while L2 is
// read once per cluster. Prints GB/s per SM and in total for a DRAM-streaming and an L2-resident source.
// `ingest 2d`: boxes of a 2D map (64 columns x rows); `ingest 3d`: of a 3D view (64 columns, rows, k-blocks) whose
// box spans `depth` k-blocks, `per_stage` boxes a stage, waiting with try_wait or spinning on test_wait.
// nvcc -O3 -gencode=arch=compute_90a,code=sm_90a tma_ingest_2026-11-26_77d6225.cu -lcuda -o ingest
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>

__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// try_wait may suspend the thread until the phase completes or a time limit passes; test_wait returns at once
#define WAITBAR(bar, par, ...) do { if (spin) asm volatile("{\n.reg .pred p;\nW: mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W;\n}" ::"r"(bar), "r"(par) : "memory"); \
  else asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W;\n}" ::"r"(bar), "r"(par) : "memory"); } while (0)
template <int STAGES>
__global__ void __launch_bounds__(64, 1) ingest(const __grid_constant__ CUtensorMap map, int rows_per_box, int cl,
                                                int boxes_per_cta, int row_blocks, int kblocks, int l2_rows, int depth, int per_stage, int spin, int rank2) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (sa(smem_raw) + 1023) & ~1023u;
  const uint32_t box_bytes = rows_per_box * 128 * depth * per_stage;
  const uint32_t bars = base + STAGES * box_bytes;
  uint32_t rank = 0;
  if (cl > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bars + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bars + 8 * (STAGES + s)), "r"(cl));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (cl > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  else
    __syncthreads();
  const int cluster_id = blockIdx.x / cl, clusters = gridDim.x / cl;
  if (threadIdx.x == 0) {
    int s = 0;
    uint32_t ph = 0;
    for (int i = 0; i < boxes_per_cta; ++i) {
      const int b = cluster_id + i * clusters;
      const int rb = (b / kblocks) % row_blocks, kb = b % kblocks;
      int row = rb * rows_per_box;
      if (l2_rows) row %= l2_rows;
      WAITBAR(bars + 8 * (STAGES + s), ph ^ 1);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bars + 8 * s), "r"(box_bytes)
                   : "memory");
      const int part = rows_per_box / cl;
      for (int q = 0; q < per_stage; ++q) {
        const uint32_t dst = base + s * box_bytes + q * (box_bytes / per_stage) + rank * part * 128;
        const int kk = (kb * per_stage + q) * depth;
        if (rank2 && cl > 1)
          asm volatile(
              "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
              " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
              "l"(&map), "r"(bars + 8 * s), "r"(kk * 64), "r"(row + (int)rank * part), "h"((uint16_t)((1 << cl) - 1))
              : "memory");
        else if (rank2)
          asm volatile(
              "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
              ::"r"(dst), "l"(&map), "r"(bars + 8 * s), "r"(kk * 64), "r"(row)
              : "memory");
        else if (cl > 1)
          asm volatile(
              "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
              " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(dst),
              "l"(&map), "r"(bars + 8 * s), "r"(0), "r"(row + (int)rank * part), "r"(kk), "h"((uint16_t)((1 << cl) - 1))
              : "memory");
        else
          asm volatile(
              "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
              ::"r"(dst), "l"(&map), "r"(bars + 8 * s), "r"(0), "r"(row), "r"(kk)
              : "memory");
      }
      if (++s == STAGES) { s = 0; ph ^= 1; }
    }
  } else if (threadIdx.x == 32) {
    int s = 0;
    uint32_t ph = 0;
    for (int i = 0; i < boxes_per_cta; ++i) {
      WAITBAR(bars + 8 * s, ph);
      for (int r = 0; r < cl; ++r) {
        if (cl > 1)
          asm volatile("{\n.reg .b32 rem;\nmapa.shared::cluster.u32 rem, %0, %1;\n"
                       "mbarrier.arrive.shared::cluster.b64 _, [rem];\n}" ::"r"(bars + 8 * (STAGES + s)), "r"(r)
                       : "memory");
        else
          asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bars + 8 * (STAGES + s)) : "memory");
      }
      if (++s == STAGES) { s = 0; ph ^= 1; }
    }
  }
  if (cl > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

int main(int argc, char** argv) {
  const int rows = 16384, K = 8192;  // 256 MB source: streams from DRAM
  half* src;
  cudaMalloc(&src, (size_t)rows * K * 2);
  cudaMemset(src, 0, (size_t)rows * K * 2);
  printf("spin,ctas,cl,rows_per_box,depth,per_stage,stages,source,us,GBps_total_ingest,GBps_per_sm,GBps_l2_read\n");
  struct Cfg { int rpb, depth, per; };
  const bool rank2 = argc > 1 && argv[1][0] == '2';
  const std::vector<Cfg> cfgs = rank2 ? std::vector<Cfg>{{64, 1, 1}, {128, 1, 1}, {256, 1, 1}}
                                      : std::vector<Cfg>{{256, 1, 1}, {128, 1, 2}, {128, 2, 1}, {256, 2, 1},
                                                         {64, 4, 1}, {64, 1, 4}};
  const std::vector<int> cls = rank2 ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2};
  const std::vector<int> spins = rank2 ? std::vector<int>{0} : std::vector<int>{0, 1};
  const std::vector<int> ctas_list = rank2 ? std::vector<int>{16, 32, 64, 88, 112, 128, 132}
                                           : std::vector<int>{1, 16, 132};
  for (int src_kind = 0; src_kind < 2; ++src_kind)
    for (Cfg c : cfgs)
      for (int cl : cls)
      for (int spin : spins)
        for (int ctas : ctas_list) {
          if (ctas % cl) continue;
          const int rpb = c.rpb, depth = c.depth, per = c.per;
          CUtensorMap map;
          cuuint64_t dims[3] = {64, (cuuint64_t)rows, (cuuint64_t)(K / 64)};
          cuuint64_t strides[2] = {(cuuint64_t)K * 2, 128};
          cuuint32_t box[3] = {64, (cuuint32_t)(rpb / cl), (cuuint32_t)depth};
          cuuint32_t es[3] = {1, 1, 1};
          if (rank2) dims[0] = K, dims[1] = rows, strides[0] = (cuuint64_t)K * 2;
          CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank2 ? 2 : 3, src, dims, strides,
                                     box, es,
                                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
          if (r != 0) { printf("encode failed %d rpb %d depth %d\n", (int)r, rpb, depth); continue; }
          const int stage_bytes = rpb * 128 * depth * per;
          int st = 131072 / stage_bytes;
          if (st < 2) st = 2;
          size_t smem = (size_t)st * stage_bytes + 1024 + 16 * 16;
          auto kern = st >= 16 ? ingest<16> : st >= 8 ? ingest<8> : st >= 4 ? ingest<4> : ingest<2>;
          st = st >= 16 ? 16 : st >= 8 ? 8 : st >= 4 ? 4 : 2;
          smem = (size_t)st * stage_bytes + 1024 + 16 * 16;
          cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
          const int row_blocks = rows / rpb, kblocks = K / 64;
          const long total_stages = (long)row_blocks * kblocks / (depth * per) / (ctas == 1 ? 16 : 1);
          const int clusters = ctas / cl;
          const int n = (int)(total_stages / clusters);
          cudaLaunchConfig_t cfg = {};
          cfg.gridDim = dim3(ctas);
          cfg.blockDim = dim3(64);
          cfg.dynamicSmemBytes = smem;
          cudaLaunchAttribute at;
          at.id = cudaLaunchAttributeClusterDimension;
          at.val.clusterDim.x = cl;
          at.val.clusterDim.y = 1;
          at.val.clusterDim.z = 1;
          cfg.attrs = &at;
          cfg.numAttrs = 1;
          const int l2_rows = src_kind == 1 ? (8 << 20) / (K * 2) : 0;
          cudaEvent_t e0, e1;
          cudaEventCreate(&e0);
          cudaEventCreate(&e1);
          float best = 1e30f;
          for (int rep = 0; rep < 5; ++rep) {
            cudaEventRecord(e0);
            cudaError_t err = cudaLaunchKernelEx(&cfg, kern, map, rpb, cl, n, row_blocks, kblocks / (depth * per), l2_rows, depth, per, spin, rank2);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            if (err != cudaSuccess || cudaGetLastError() != cudaSuccess) {
              printf("launch failed: %s\n", cudaGetErrorString(err));
              return 1;
            }
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (ms < best) best = ms;
          }
          const double ingest_bytes = (double)n * clusters * cl * stage_bytes;
          const double l2_bytes = (double)n * clusters * stage_bytes;
          const double us = best * 1e3;
          printf("%d,%d,%d,%d,%d,%d,%d,%s,%.1f,%.0f,%.1f,%.0f\n", spin, ctas, cl, rpb, depth, per, st, src_kind ? "l2" : "dram", us,
                 ingest_bytes / us / 1e3, ingest_bytes / us / 1e3 / ctas, l2_bytes / us / 1e3);
          fflush(stdout);
        }
  return 0;
}
