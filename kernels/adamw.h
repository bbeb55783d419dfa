// adamw.h: the optimizer on the GPU: AdamW over one tensor, the global
// gradient norm, and the scaling that clips it. The same formulas as the CPU
// version, common/optimizer.c.
#ifndef ADAMW_H
#define ADAMW_H

#include <stddef.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "optimizer.h"  // AdamWConfig; a C header, hence inside the C block

// One AdamW step over n values of one tensor, at step t (1-based), as
// adamw_update() in optimizer.h: m and v (fp32) updated in place, decoupled
// weight decay when `decay` is 1. Chapter 00 launches it once per parameter
// tensor, as torch.optim.AdamW does with foreach=False; chapter 09 fuses them.
//
// Where the weights live:
//   master == NULL (the fp32 build): params are the weights, updated in
//     place, as in chapter 00.
//   master != NULL (the bf16 build): master (n floats) holds the weights in
//     fp32 and is the one updated; params, the floatX copy that the forward
//     and backward passes read, is then overwritten with it, rounded to
//     nearest even. A bf16 build may pass NULL too: the update is then
//     rounded into the bf16 weights themselves, and the updates smaller than
//     half a bf16 step are lost (what the master copy is there to prevent).
void adamw_update_v1(const GpuContext *ctx, floatX *params, float *master, const floatX *grads,
                     float *m, float *v, size_t n, float lr, const AdamWConfig *cfg, int decay,
                     int t);

// Scratch for grad_norm_v1: GRAD_NORM_MAX_BLOCKS floats.
#define GRAD_NORM_MAX_BLOCKS 1024

// *norm (one float on the device) = sqrt(sum of grads[i]^2) over n values.
// Each block sums its squares in fp32 (a grid-stride loop, then a fixed
// tree) into one partial in `scratch` (fp32 in every build); one warp then
// adds the partials in double, in a fixed order. The number of blocks depends
// on n only, not on the GPU, so the result is the same on every run and every
// GPU.
void grad_norm_v1(const GpuContext *ctx, float *norm, float *scratch, const floatX *grads,
                  size_t n);

// x[i] *= factor (in fp32, rounded back to floatX): gradient clipping, with
// the factor computed on the host (grad_clip_factor in optimizer.h) from the
// norm read back.
void scale_v1(const GpuContext *ctx, floatX *x, size_t n, float factor);

// Chapter 03: the same clipping without reading the norm back, so the host
// never waits for it. The factor is computed on the device and stays there:
//   *factor = grad_clip_factor(*norm, max_norm)   (one float each, device)
// with grad_clip_factor's float operations in its order (optimizer.c), so
// the factor has the same bits as the host's.
void grad_clip_factor_v1(const GpuContext *ctx, float *factor, const float *norm,
                         float max_norm);
// x[i] *= *factor, as scale_v1 does, reading the factor from device memory;
// when *factor is not below 1 the kernel changes nothing, as the host's
// `if (factor < 1.0f) scale_v1(...)` of chapters 00-02 launches nothing.
void scale_by_device_factor_v1(const GpuContext *ctx, floatX *x, size_t n, const float *factor);

#ifdef __cplusplus
}
#endif

#endif
