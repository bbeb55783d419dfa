// tiled_gemm.h: chapter 01's exercise, a small GEMM of our own on the tensor
// cores, in TF32, through CUDA's warp-level matrix API (WMMA). The trainer does
// not call it (its GEMMs are cuBLAS's, kernels/matmul.cu); it is the exercise
// that shows what cuBLAS does with CUBLAS_COMPUTE_32F_FAST_TF32.
// solutions/01_tensor_cores/tiled_gemm.cu has it complete; exercises/
// 01_tensor_cores/ has the tensor-core part cut out.
//
// The convention is matmul.h's, nn.Linear's: C = A @ B^T, all row-major,
//   A (M, K): the input rows (inp, M = B*T, K = C channels),
//   B (N, K): the weight, one row of K per output column (weight, N = OC),
//   C (M, N): the output, overwritten (no bias, no accumulation).
// So tiled_gemm_tf32(ctx, out, inp, weight, B*T, OC, C) computes what
// matmul_forward_v1(ctx, out, inp, weight, NULL, B, T, C, OC) does, with every
// operand rounded to TF32 (10-bit mantissa) and the sums kept in fp32.
//
// Any M, N, K >= 1: tiles that stick out of the matrices are padded with zeros
// on the way into shared memory, and only the elements inside C are written.
// Needs compute capability 8.0 or newer (TF32 tensor cores: Ampere, Hopper).
#ifndef TILED_GEMM_H
#define TILED_GEMM_H

#include "gpu_context.h"

#ifdef __cplusplus
extern "C" {
#endif

void tiled_gemm_tf32(const GpuContext *ctx, float *C, const float *A, const float *B, int M,
                     int N, int K);

#ifdef __cplusplus
}
#endif

#endif
