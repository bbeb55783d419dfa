// matmul.h: the linear layer, out = inp @ weight^T + bias, on cuBLAS.
//
// Shapes, row-major, as the CPU reference (gpt2_cpu.h) and PyTorch's
// nn.Linear: inp (B,T,C), weight (OC,C), bias (OC) or NULL, out (B,T,OC).
// All of them and their gradients are floatX (precision.h).
//
// cuBLAS is column-major. A row-major (rows, cols) matrix is, byte for byte,
// its own transpose in column-major, so every call below computes the
// transposed product (out^T = weight @ inp^T, ...) with the operands' roles
// read off that identity. The operands are FLOATX_CUDA_TYPE and the compute
// type comes from gpu_gemm_compute_type(ctx): fp32 (chapter 00) or TF32
// tensor cores (chapter 01) on fp32 operands; bf16 operands on the tensor
// cores, with fp32 sums (chapter 02).
#ifndef MATMUL_H
#define MATMUL_H

#include <stddef.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// out = inp @ weight^T, then + bias in a separate kernel (bias may be NULL).
void matmul_forward_v1(const GpuContext *ctx, floatX *out, const floatX *inp,
                       const floatX *weight, const floatX *bias, int B, int T, int C, int OC);

// Floats of scratch that matmul_backward_v1 needs for dbias: per-chunk
// partial column sums, fp32 in every build, ceil(B*T / 128) * OC. (None when
// dbias is NULL.)
size_t matmul_backward_scratch_floats(int B, int T, int OC);

// dinp (B,T,C) += dout @ weight; dweight (OC,C) += dout^T @ inp; dbias (OC)
// += the column sums of dout (B*T rows), when dbias is not NULL. ALL
// ACCUMULATE (the GEMMs run with beta = 1). dbias is summed deterministically:
// per-chunk partials in `scratch`, then a fixed-order sum of the chunks,
// added to dbias once.
void matmul_backward_v1(const GpuContext *ctx, floatX *dinp, floatX *dweight, floatX *dbias,
                        float *scratch, const floatX *dout, const floatX *inp,
                        const floatX *weight, int B, int T, int C, int OC);

#ifdef __cplusplus
}
#endif

#endif
