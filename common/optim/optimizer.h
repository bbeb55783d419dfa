// optimizer.h: AdamW, the learning-rate schedule and gradient-norm clipping:
// the update half of a training step, on the CPU, in float.
#ifndef OPTIMIZER_H
#define OPTIMIZER_H

#include <stddef.h>

typedef struct {
    float beta1, beta2, eps;  // 0.9, 0.95, 1e-8 for GPT-2
    float weight_decay;       // 0.1; applied only where decay != 0 (see adamw_update)
} AdamWConfig;

AdamWConfig adamw_default_config(void);

// 1 - beta^t, AdamW's bias correction at step t (1-based), in float as every
// version computes it: the CPU's update and the GPU kernels' launchers all
// call this one function, so that they all use the same bits.
float adamw_bias_correction(float beta, int t);

// One AdamW step over n values of one tensor, at step t (1-based: the bias
// corrections use beta^t). m and v are the first and second moments, updated
// in place. `decay` is 1 for tensors that take weight decay, 0 otherwise.
// Decoupled weight decay, as PyTorch's torch.optim.AdamW:
//   p -= lr * (m_hat / (sqrt(v_hat) + eps) + decay * weight_decay * p)
void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                  const AdamWConfig *cfg, int decay, int t);

// Cosine learning rate with linear warm-up:
//   step < warmup:          max_lr * (step + 1) / warmup
//   warmup <= step < total: min_lr + (max_lr - min_lr) * (1 + cos(pi * progress)) / 2,
//                           progress = (step - warmup) / (total - warmup)
//   step >= total:          min_lr
// where min_lr = max_lr * min_lr_fraction. Steps are 0-based.
typedef struct {
    float max_lr;
    float min_lr_fraction;
    int warmup_steps;
    int total_steps;
} LrSchedule;

float lr_at_step(const LrSchedule *s, int step);

// The global L2 norm of n gradient values (summed in double so the result
// does not depend on the tensor's size), and the factor that clips it:
// min(1, max_norm / (norm + 1e-6)). max_norm <= 0 disables clipping (factor 1).
float grad_global_norm(const float *grads, size_t n);
float grad_clip_factor(float norm, float max_norm);
void scale_values(float *x, size_t n, float factor);

#endif
