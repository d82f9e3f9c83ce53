// Hostile: hands the work to cuBLAS. The point is to write the kernel; NVIDIA's libraries are the baselines.
// Expected: refused by screening (<cublas_v2.h>).
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

extern "C" int hgemm(const half* A, const half* B, const half* B_col_major, half* C,
                     int M, int N, int K, cudaStream_t stream) {
  (void)B_col_major;
  static cublasHandle_t handle = nullptr;
  if (!handle && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(handle, stream);
  const float one = 1.f, zero = 0.f;
  // Row-major C = A B is column-major C^T = B^T A^T.
  cublasStatus_t st = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16F, N, A, CUDA_R_16F,
                                   K, &zero, C, CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}
