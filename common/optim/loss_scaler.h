// loss_scaler.h: dynamic loss scaling, the companion of fp16 training, which
// chapter 02 shows beside bf16 (which needs none of it).
//
// fp16 has 5 exponent bits: its normal range is 6.1e-5 .. 65504, and its
// subnormals stop at 6e-8. Gradients are often smaller than that and would
// flush to zero; so the loss is multiplied by a large `scale` before the
// backward pass (every gradient is then `scale` times too large, lifted into
// fp16's range), and the gradients are divided by it again, in fp32, before
// the optimizer step. A power of two as the scale keeps both steps exact.
// Too large a scale overflows instead: some gradient becomes Inf (or NaN).
// The scaler then skips that step, halves the scale, and tries again; after
// `growth_interval` clean steps in a row it doubles the scale, probing for
// the largest scale that does not overflow. The defaults are PyTorch's
// torch.amp.GradScaler's.
//
// bf16 has fp32's 8 exponent bits, hence fp32's range: its gradients do not
// underflow where fp32's would not, and it needs no scaler.
//
// loss_scaler_update and grads_have_inf_or_nan are part of chapter 02's
// exercise (solutions/02_mixed_precision/loss_scaler.c).
#ifndef LOSS_SCALER_H
#define LOSS_SCALER_H

#include <stddef.h>

typedef struct {
    float scale;           // the loss is multiplied by it; a power of two
    float growth_factor;   // the scale is multiplied by it after growth_interval clean steps (2)
    float backoff_factor;  // ... and by this after an overflow (0.5)
    int growth_interval;   // clean steps in a row before growing (2000)
    int good_steps;        // clean steps since the last growth or back-off
} LossScaler;

#define LOSS_SCALER_INIT_SCALE 65536.0f  // 2^16, PyTorch's default
#define LOSS_SCALER_GROWTH_INTERVAL 2000

// A scaler with PyTorch's defaults and the given initial scale.
LossScaler loss_scaler_init(float initial_scale);

// After a backward pass with the loss multiplied by ls->scale: found_inf says
// whether any gradient is Inf or NaN (grads_have_inf_or_nan). Returns 1 when
// the optimizer step must be skipped (found_inf: the scale is multiplied by
// backoff_factor and the count of clean steps starts again), 0 when it may
// be taken (one more clean step; at growth_interval of them in a row the
// scale is multiplied by growth_factor and the count starts again).
int loss_scaler_update(LossScaler *ls, int found_inf);

// 1 when any of the n values is +-Inf or NaN, else 0.
int grads_have_inf_or_nan(const float *grads, size_t n);

// grads[i] *= 1 / ls->scale: back to the gradients of the unscaled loss
// (exact when the scale is a power of two and nothing underflows).
void loss_scaler_unscale(const LossScaler *ls, float *grads, size_t n);

#endif
