// adamw.h: the optimizer on the GPU: AdamW over one tensor, the global
// gradient norm, and the scaling that clips it; then (chapter 09) AdamW over
// every tensor in one launch, with the clipping folded in. The same formulas
// as the CPU version, common/optim/optimizer.c.
#ifndef ADAMW_H
#define ADAMW_H

#include <stddef.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "optim/adamw_schedule.h"  // AdamWScheduleEntry; C headers, hence inside the C block
#include "optim/adamw_table.h"     // AdamWTensors
#include "optim/optimizer.h"    // AdamWConfig

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

// Chapter 14's --update-in-backward, where the gradients are never all in
// memory at once: *norm = sqrt(sum of parts[i]^2) over `count` norms of
// parts (grad_norm_v1's, one float each, device), in double, in order. The
// norm of the whole, as grad_norm_v1 of all the values would give it up to
// the rounding of a different order of addition.
void grad_norm_of_parts_v1(const GpuContext *ctx, float *norm, const float *parts, int count);

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

// ---- chapter 09: one launch for every tensor ------------------------------------

// What changes from one step to the next, in device memory: written once a
// step by adamw_begin_step_v2, read by every block of adamw_fused_v2.
// Device memory rather than kernel arguments because chapter 11 captures the
// step in a CUDA graph, whose launches replay the arguments they were
// captured with: there a kernel that advances a counter on the device takes
// adamw_begin_step_v2's place, and the update must already read from memory
// everything that changes per step.
typedef struct {
    int t;              // the step, 1-based
    float lr;           // its learning rate
    float correction1;  // 1 - beta1^t, computed as adamw_update_v1 computes it
    float correction2;  // 1 - beta2^t
    float clip_factor;  // grad_clip_factor(*norm, max_norm), computed on the device
} AdamWStep;

// *step (device memory) for step t: t, lr and the two bias corrections come
// from the host (powf there, as adamw_update_v1 computes them); the clip
// factor is computed on the device from *norm (one float, device), by the
// same function as grad_clip_factor_v1's. One thread. In chapter 09 it takes
// the place of grad_clip_factor_v1.
void adamw_begin_step_v2(const GpuContext *ctx, AdamWStep *step, const float *norm,
                         float max_norm, int t, float lr, const AdamWConfig *cfg);

// ---- chapter 11: the step's values from a table on the device -----------------------

// adamw_begin_step_v2 without arguments that change from step to step, for a
// CUDA graph: the step counter is step->t itself, advanced on the device (the
// host sets it once: the steps already taken); lr and the corrections come
// from schedule[t - 1] (device memory, adamw_schedule.h's table). With
// gradients summed over N micro-batches (grad_scale = 1/N; 1 otherwise), the
// norm of their mean is *norm * grad_scale, written back to *norm, the clip
// factor is computed from it, and the update's factor is the clip factor times
// grad_scale. With grad_scale = 1 every value has the bits of v2's. The
// table has schedule_steps entries; a step t beyond them reads none and
// gets lr = NaN (the caller must not get there: train_gpu.c checks).
void adamw_begin_step_v3(const GpuContext *ctx, AdamWStep *step, float *norm, float max_norm,
                         float grad_scale, const AdamWScheduleEntry *schedule,
                         int schedule_steps);

// The fused kernel's values per block: 256 threads of one 16-byte vector of
// floatX each (2048 in bf16, 1024 in fp32).
#define ADAMW_FUSED_VALUES_PER_BLOCK ((size_t)256 * (16 / sizeof(floatX)))

// The table of `count` tensors that lie one after another from offset 0
// (adamw_table.h), cut into the fused kernel's blocks of 256 threads of VEC_X
// values: 2048 values in bf16, 1024 in fp32.
void adamw_tensors_v2(AdamWTensors *table, const size_t *sizes, const int *decay, int count);

// One AdamW step over every tensor of the table, in one launch: for each
// value, adamw_update_v1's arithmetic (the same float operations in the same
// order: the same bits) with lr, the bias corrections and the clip factor
// read from *step (device memory), and the decay of the value's tensor.
// params, master and grads are indexed by the table's offsets, m and v by
// its state_offsets (the same offsets through chapter 09; chapter 10 packs
// the fp32 moments, adam_state.h); master NULL (the fp32 build) means that
// params are the weights.
//
// The clipping is folded in: when step->clip_factor < 1, each gradient is
// scaled and rounded to floatX as scale_by_device_factor_v1 would have
// stored it, then used; grads is only read, and is left unscaled in memory.
// A step that clips no longer reads and writes the gradients once more, in
// a pass of its own, between the norm and the update; the values computed
// are the same.
//
// Each thread updates VEC_X consecutive values (8 in bf16, 4 in fp32) with
// 16-byte loads and stores where every address is 16-byte aligned, and one
// value at a time otherwise (the end of a tensor whose length is not a
// multiple of VEC_X, a tensor that starts unaligned). Per parameter, in bf16
// with master weights: 2 bytes of gradient and 12 of m, v and master read,
// 12 of them and 2 of params written: 28 bytes.
//
// stochastic (chapter 14, --no-master-weights): with master NULL and
// stochastic 1, each updated weight is rounded into params stochastically
// (kernels/stochastic_round.cuh: up or down with the probabilities that make
// it right on average, from a hash of step->t and the value's index in
// params), so that updates smaller than half a bf16 step are not lost; 22
// bytes a parameter instead of 28, and no master copy. stochastic 0 rounds
// to nearest, as before; with master weights stochastic is ignored (params
// is then a copy, rounded to nearest). In the fp32 build there is nothing to
// round and it changes nothing.
void adamw_fused_v2(const GpuContext *ctx, const AdamWTensors *table, floatX *params,
                    float *master, const floatX *grads, float *m, float *v,
                    const AdamWStep *step, const AdamWConfig *cfg, int stochastic);

#ifdef __cplusplus
}
#endif

#endif
