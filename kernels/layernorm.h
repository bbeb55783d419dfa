// layernorm.h: layer normalization over the last axis, eps = 1e-5 (GPT-2's).
//
// Shapes, row-major, as the CPU reference (gpt2_cpu.h):
//   inp, out, dout, dinp (B,T,C); weight, bias, dweight, dbias (C);
//   mean, rstd (B,T), saved by the forward pass for the backward pass.
#ifndef LAYERNORM_H
#define LAYERNORM_H

#include <stddef.h>

#include "gpu_context.h"

#ifdef __cplusplus
extern "C" {
#endif

// out = (inp - mean) * rstd * weight + bias. One warp per row; the mean first,
// then the variance around it (two passes, as the CPU reference: E[x^2] -
// E[x]^2 cancels catastrophically when |mean| >> std).
void layernorm_forward_v1(const GpuContext *ctx, float *out, float *mean, float *rstd,
                          const float *inp, const float *weight, const float *bias, int B, int T,
                          int C);

// Floats of scratch that layernorm_backward_v1 needs: per-chunk partial sums
// of dweight and dbias, 2 * ceil(B*T / 128) * C. (The chunks are a grid
// dimension of at most 65535, so B*T <= 8388480.)
size_t layernorm_backward_scratch_floats(int B, int T, int C);

// dinp += d(out)/d(inp) applied to dout, one warp per row; dweight and dbias
// += their sums over all B*T rows. ALL THREE ACCUMULATE, as the CPU reference.
// The parameter gradients are sums over rows, which many blocks share: each
// block writes the partial sum of its chunk of rows into `scratch` (see
// layernorm_backward_scratch_floats), and a second kernel adds the chunks in
// order, so the result does not depend on which block finished first.
void layernorm_backward_v1(const GpuContext *ctx, float *dinp, float *dweight, float *dbias,
                           float *scratch, const float *dout, const float *inp,
                           const float *weight, const float *mean, const float *rstd, int B,
                           int T, int C);

#ifdef __cplusplus
}
#endif

#endif
