// loss_scaler.c: see loss_scaler.h. The scaler's decisions (loss_scaler_update,
// grads_have_inf_or_nan) are chapter 02's exercise, in
// solutions/02_mixed_precision/loss_scaler.c.
#include "optim/loss_scaler.h"

LossScaler loss_scaler_init(float initial_scale) {
    LossScaler ls = {.scale = initial_scale, .growth_factor = 2.0f, .backoff_factor = 0.5f,
                     .growth_interval = LOSS_SCALER_GROWTH_INTERVAL, .good_steps = 0};
    return ls;
}

void loss_scaler_unscale(const LossScaler *ls, float *grads, size_t n) {
    const float inv = 1.0f / ls->scale;
    for (size_t i = 0; i < n; i++) grads[i] *= inv;
}
