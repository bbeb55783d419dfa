// optimizer.c: see optimizer.h.
#include "optim/optimizer.h"

#include <math.h>

AdamWConfig adamw_default_config(void) {
    AdamWConfig c = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    return c;
}

float adamw_bias_correction(float beta, int t) { return 1.0f - powf(beta, (float)t); }

void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                  const AdamWConfig *cfg, int decay, int t) {
    const float b1 = cfg->beta1, b2 = cfg->beta2;
    const float correction1 = adamw_bias_correction(b1, t);
    const float correction2 = adamw_bias_correction(b2, t);
    const float wd = decay ? cfg->weight_decay : 0.0f;
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        float m_hat = m[i] / correction1;
        float v_hat = v[i] / correction2;
        params[i] -= lr * (m_hat / (sqrtf(v_hat) + cfg->eps) + wd * params[i]);
    }
}

float lr_at_step(const LrSchedule *s, int step) {
    const float min_lr = s->max_lr * s->min_lr_fraction;
    if (step < s->warmup_steps) return s->max_lr * (float)(step + 1) / (float)s->warmup_steps;
    if (step >= s->total_steps) return min_lr;
    double progress = (double)(step - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
    double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    return (float)(min_lr + (s->max_lr - min_lr) * cosine);
}

float grad_global_norm(const float *grads, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)grads[i] * grads[i];
    return (float)sqrt(sum);
}

float grad_clip_factor(float norm, float max_norm) {
    if (max_norm <= 0.0f) return 1.0f;
    float factor = max_norm / (norm + 1e-6f);
    return factor < 1.0f ? factor : 1.0f;
}

void scale_values(float *x, size_t n, float factor) {
    for (size_t i = 0; i < n; i++) x[i] *= factor;
}
