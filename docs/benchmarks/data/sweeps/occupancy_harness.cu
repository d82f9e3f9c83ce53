// A one-off sweep (H200): how many 2-CTA clusters of a hopper_raw kernel the occupancy query allows, and one
// call's time. Build beside a rendered kernel saved as c2.cu (agent.families.render("hopper_raw", params, shape,
// "sm_90a")): nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I<cutlass include> -I. this.cu
#include "c2.cu"
#include <cstdio>
int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(SMEM_BYTES));
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = SMEM_BYTES;
  cfg.gridDim = dim3(sms / 2 * 2);
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = 2; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
  cfg.attrs = at; cfg.numAttrs = 1;
  int n = -1;
  cudaError_t e = cudaOccupancyMaxActiveClusters(&n, gemm_kernel, &cfg);
  int nb = -1;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, gemm_kernel, THREADS, SMEM_BYTES);
  printf("sms %d smem %d threads %d max_active_clusters(2) %d (%s) blocks/SM %d\n", sms, (int)SMEM_BYTES, THREADS, n,
         cudaGetErrorString(e), nb);
  const int M = 1024, N = 4096, K = 8192;
  half *A, *B, *C;
  cudaMalloc(&A, 2ull * M * K); cudaMalloc(&B, 2ull * N * K); cudaMalloc(&C, 2ull * M * N);
  cudaMemset(A, 0, 2ull * M * K); cudaMemset(B, 0, 2ull * N * K);
  cudaEvent_t t0, t1; cudaEventCreate(&t0); cudaEventCreate(&t1);
  int rc = hgemm(A, B, B, C, M, N, K, 0);
  for (int i = 0; i < 20; ++i) hgemm(A, B, B, C, M, N, K, 0);
  cudaEventRecord(t0);
  for (int i = 0; i < 50; ++i) hgemm(A, B, B, C, M, N, K, 0);
  cudaEventRecord(t1); cudaEventSynchronize(t1);
  float ms = 0; cudaEventElapsedTime(&ms, t0, t1);
  printf("hgemm rc %d, %.1f us a call (zeros, not power-steady), last error %s\n", rc, 1000 * ms / 50,
         cudaGetErrorString(cudaGetLastError()));
}
