// How many clusters of 2/4/8 CTAs (384 threads, one CTA per SM by its shared memory) fit on the GPU at once.
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(int* p) { extern __shared__ int s[]; if (p) p[0] = s[0]; }
int main() {
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  printf("SMs %d\n", sms);
  for (int smem : {100 * 1024, 200 * 1024, 227 * 1024}) {
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    for (int c : {1, 2, 3, 4, 5, 6, 7, 8, 16}) {
      cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute a; a.id = cudaLaunchAttributeClusterDimension;
      a.val.clusterDim.x = c; a.val.clusterDim.y = 1; a.val.clusterDim.z = 1;
      cfg.gridDim = dim3(c * 64); cfg.blockDim = dim3(384); cfg.dynamicSmemBytes = smem; cfg.attrs = &a; cfg.numAttrs = 1;
      int n = -1; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
      printf("smem %d KB cluster %2d: %d clusters (%d CTAs) %s\n", smem / 1024, c, n, n * c, e ? cudaGetErrorString(e) : "");
    }
  }
}
