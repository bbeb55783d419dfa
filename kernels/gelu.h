// gelu.h: GELU, tanh approximation (GPT-2's):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// Element-wise over n floatX values (precision.h), any shape, computed in fp32.
#ifndef GELU_H
#define GELU_H

#include <stddef.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

void gelu_forward_v1(const GpuContext *ctx, floatX *out, const floatX *inp, size_t n);
// dinp += gelu'(inp) * dout (ACCUMULATES, as the CPU reference).
void gelu_backward_v1(const GpuContext *ctx, floatX *dinp, const floatX *inp, const floatX *dout,
                      size_t n);
// d = gelu'(inp) * d, in place (OVERWRITES): the backward pass when the
// gradient of GELU's output is not needed afterwards, so it can be
// overwritten by the gradient of its input. The arithmetic of
// gelu_backward_v1 with dinp starting at zero.
void gelu_backward_inplace_v1(const GpuContext *ctx, floatX *d, const floatX *inp, size_t n);

#ifdef __cplusplus
}
#endif

#endif
