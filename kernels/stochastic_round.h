// stochastic_round.h: chapter 14's stochastic rounding (stochastic_round.cuh)
// as a launch of its own, for the tests: the fused AdamW kernels call the
// device function directly.
#ifndef STOCHASTIC_ROUND_H
#define STOCHASTIC_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// out[i] = round_stochastic(x[i], step, first_index + i) for i < n (device
// buffers): in bf16 one of x[i]'s two bf16 neighbours, the upper with
// probability x[i]'s distance from the lower over the distance between them;
// in fp32, x[i].
void round_stochastic_v1(const GpuContext *ctx, floatX *out, const float *x, size_t n,
                         uint32_t step, uint64_t first_index);

#ifdef __cplusplus
}
#endif

#endif
