// layernorm.h: layer normalization over the last axis, eps = 1e-5 (GPT-2's).
//
// Shapes, row-major, as the CPU reference (gpt2_cpu.h):
//   inp, out, dout, dinp (B,T,C); weight, bias, dweight, dbias (C): floatX
//   (precision.h);
//   mean, rstd (B,T), saved by the forward pass for the backward pass: fp32
//   in every build, as are all the sums over a row or a column (bf16 row
//   statistics would shift every value of the row by the same error).
#ifndef LAYERNORM_H
#define LAYERNORM_H

#include <stddef.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// out = (inp - mean) * rstd * weight + bias. One warp per row; the mean first,
// then the variance around it (two passes, as the CPU reference: E[x^2] -
// E[x]^2 cancels catastrophically when |mean| >> std).
void layernorm_forward_v1(const GpuContext *ctx, floatX *out, float *mean, float *rstd,
                          const floatX *inp, const floatX *weight, const floatX *bias, int B,
                          int T, int C);

// Floats of scratch that layernorm_backward_v1 needs: per-chunk partial sums
// of dweight and dbias, in fp32 in every build, 2 * ceil(B*T / 128) * C. (The
// chunks are a grid dimension of at most 65535, so B*T <= 8388480.)
size_t layernorm_backward_scratch_floats(int B, int T, int C);

// dinp += d(out)/d(inp) applied to dout, one warp per row; dweight and dbias
// += their sums over all B*T rows. ALL THREE ACCUMULATE, as the CPU reference.
// The parameter gradients are sums over rows, which many blocks share: each
// block writes the partial sum of its chunk of rows into `scratch` (see
// layernorm_backward_scratch_floats), and a second kernel adds the chunks in
// order, so the result does not depend on which block finished first; it
// adds the total to dweight and dbias once (rounding to floatX once).
void layernorm_backward_v1(const GpuContext *ctx, floatX *dinp, floatX *dweight, floatX *dbias,
                           float *scratch, const floatX *dout, const floatX *inp,
                           const floatX *weight, const float *mean, const float *rstd, int B,
                           int T, int C);

// ---- chapter 04: 16-byte vectors, and the residual add fused in -----------------
// The v2 kernels read and write 16 bytes per lane (kernels/vec.cuh), so C
// must be a multiple of 8 in bf16 (4 in fp32); they stop with a message
// naming the kernel otherwise (this does that check).
void layernorm_check_vector_width(int C, const char *kernel);

// layernorm_forward_v1's contract, in 16-byte vectors. The row's sums are
// added in another order than v1's (each lane sums its vectors first), so
// the results may differ from v1's in the last bit of fp32.
void layernorm_forward_v2(const GpuContext *ctx, floatX *out, float *mean, float *rstd,
                          const floatX *inp, const floatX *weight, const floatX *bias, int B,
                          int T, int C);

// residual = a + b (rounded to floatX, as residual_forward_v1), then out =
// layernorm(residual) with its mean and rstd: the seam between two blocks in
// one pass. Chapter 04's exercise (solutions/04_kernel_fusion/).
void residual_layernorm_forward_v2(const GpuContext *ctx, floatX *residual, floatX *out,
                                   float *mean, float *rstd, const floatX *a, const floatX *b,
                                   const floatX *weight, const floatX *bias, int B, int T, int C);

// layernorm_backward_v1's contract and scratch (all three ACCUMULATE), with
// the dinp kernel in 16-byte vectors and its two row sums taken in one pass.
void layernorm_backward_v2(const GpuContext *ctx, floatX *dinp, floatX *dweight, floatX *dbias,
                           float *scratch, const floatX *dout, const floatX *inp,
                           const floatX *weight, const float *mean, const float *rstd, int B,
                           int T, int C);

// Chapter 11: v2, with the parameter gradients' two kernels tuned by the
// profile: the column sums read in 16-byte vectors, and the partials added
// with their loads in flight. The same operations in the same order: the
// same bits as v1 and v2, in less time.
void layernorm_backward_v3(const GpuContext *ctx, floatX *dinp, floatX *dweight, floatX *dbias,
                           float *scratch, const floatX *dout, const floatX *inp,
                           const floatX *weight, const float *mean, const float *rstd, int B,
                           int T, int C);

#ifdef __cplusplus
}
#endif

#endif
