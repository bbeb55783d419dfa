// residual.h: the residual connection, out = a + b, element-wise over n floatX
// values (precision.h), each sum in fp32, rounded once.
#ifndef RESIDUAL_H
#define RESIDUAL_H

#include <stddef.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

void residual_forward_v1(const GpuContext *ctx, floatX *out, const floatX *a, const floatX *b,
                         size_t n);
// da += dout and db += dout (both ACCUMULATE, as the CPU reference). da and db
// must be different buffers.
void residual_backward_v1(const GpuContext *ctx, floatX *da, floatX *db, const floatX *dout,
                          size_t n);

#ifdef __cplusplus
}
#endif

#endif
