// residual.h: the residual connection, out = a + b, element-wise over n floats.
#ifndef RESIDUAL_H
#define RESIDUAL_H

#include <stddef.h>

#include "gpu_context.h"

#ifdef __cplusplus
extern "C" {
#endif

void residual_forward_v1(const GpuContext *ctx, float *out, const float *a, const float *b,
                         size_t n);
// da += dout and db += dout (both ACCUMULATE, as the CPU reference). da and db
// must be different buffers.
void residual_backward_v1(const GpuContext *ctx, float *da, float *db, const float *dout,
                          size_t n);

#ifdef __cplusplus
}
#endif

#endif
