// A test fixture written for this project: a naive HGEMM in the form of a PyTorch extension entry point, the form
// the CUDA-L2 release's kernels take (torch::Tensor arguments, launches on the legacy default stream, a device
// synchronise after the call). ACC_T picks the accumulator, so one file gives an honest kernel and one that
// accumulates in fp16 the way a tensor core does (16 products summed wide, then added to the accumulator with one rounding).
#include <iostream>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <torch/extension.h>
#include <torch/types.h>

#ifndef ACC_T
#define ACC_T float
#endif

#define CHECK_TORCH_TENSOR_DTYPE(T, th_type)                   \
  if (((T).options().dtype() != (th_type))) {                  \
    std::cout << "Tensor Info:" << (T).options() << std::endl; \
    throw std::runtime_error("values must be " #th_type);      \
  }

__global__ void naive_kernel(const half* a, const half* b_col, half* c, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  ACC_T acc = ACC_T(0);
  for (int k0 = 0; k0 < K; k0 += 16) {
    float part = 0.f;
    for (int k = k0; k < K && k < k0 + 16; ++k) part += __half2float(a[row * K + k]) * __half2float(b_col[col * K + k]);
    acc = ACC_T(float(acc) + part);  // one rounding per 16 products, as in an fp16-accumulating MMA
  }
  c[row * N + col] = __float2half(float(acc));
}

void cuda_l2_h100_fp32(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, torch::Tensor c) {
  CHECK_TORCH_TENSOR_DTYPE(a, torch::kHalf)
  CHECK_TORCH_TENSOR_DTYPE(c, torch::kHalf)
  const int M = a.size(0), K = a.size(1), N = b.size(1);
  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  naive_kernel<<<grid, block>>>(reinterpret_cast<const half*>(a.data_ptr<at::Half>()),
                                reinterpret_cast<const half*>(b_col_major.data_ptr()),
                                reinterpret_cast<half*>(c.data_ptr()), M, N, K);
  cudaDeviceSynchronize();
}
