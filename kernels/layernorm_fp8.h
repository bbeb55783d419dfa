// layernorm_fp8.h: chapter 13's seam between blocks: chapter 04's residual
// add and next layernorm (residual_layernorm_forward_v2), whose output is
// written as the next GEMM's FP8 operand, its rows and its transpose (fp8.h),
// with its amax, in place of the bf16 output that a cast would read again.
//
// The layernorm's output is rounded to bf16 and then to FP8 (e4m3), as the
// unfused pair (residual_layernorm_forward_v2, then fp8_cast with FP8_COPY)
// rounds it: the two give the same bits.
//
// Shapes as layernorm.h: a, b, residual (B*T, C) floatX; mean, rstd (B*T) fp32;
// out_rows (B*T, C) and out_cols (C, B*T) FP8. B*T and C multiples of 16.
#ifndef LAYERNORM_FP8_H
#define LAYERNORM_FP8_H

#include "fp8.h"
#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// residual = a + b (b NULL: residual is a, read only), then its layernorm,
// cast with meta's scale, meta's amax raised.
void residual_layernorm_forward_fp8(const GpuContext *ctx, floatX *residual, float *mean,
                                    float *rstd, const floatX *a, const floatX *b,
                                    const floatX *weight, const floatX *bias, int BT, int C,
                                    Fp8Meta *meta, void *out_rows, void *out_cols);

#ifdef __cplusplus
}
#endif

#endif
