// test_optimizer.c: AdamW, the learning-rate schedule, clipping and sampling,
// against values worked out by hand.
#include <criterion/criterion.h>
#include <math.h>

#include "optim/optimizer.h"
#include "model/sampling.h"

// fp32 arithmetic on values near 1: agreement to a few ulps.
#define NEAR(a, b) (fabs((double)(a) - (double)(b)) <= 1e-6 * fmax(1.0, fabs((double)(b))))

Test(optimizer, adamw_two_steps_by_hand) {
    // p = 1, lr = 0.1, betas (0.9, 0.95), eps = 1e-8, weight decay 0.1.
    // step 1, g = 0.5:   m = 0.05, v = 0.0125, m_hat = 0.05/0.1 = 0.5,
    //   v_hat = 0.0125/0.05 = 0.25, update = 0.5/0.5 + 0.1*1 = 1.1, p = 0.89
    // step 2, g = -0.25: m = 0.045 - 0.025 = 0.02, v = 0.011875 + 0.003125 = 0.015,
    //   m_hat = 0.02/0.19, v_hat = 0.015/0.0975,
    //   p = 0.89 - 0.1*(m_hat/sqrt(v_hat) + 0.1*0.89) = 0.854263058
    AdamWConfig cfg = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    float p = 1.0f, m = 0.0f, v = 0.0f, g = 0.5f;
    adamw_update(&p, &g, &m, &v, 1, 0.1f, &cfg, 1, 1);
    cr_assert(NEAR(m, 0.05) && NEAR(v, 0.0125), "m %g v %g", m, v);
    cr_assert(NEAR(p, 0.89), "p after step 1: %.9g", p);
    g = -0.25f;
    adamw_update(&p, &g, &m, &v, 1, 0.1f, &cfg, 1, 2);
    cr_assert(NEAR(m, 0.02) && NEAR(v, 0.015), "m %g v %g", m, v);
    cr_assert(NEAR(p, 0.8542630579), "p after step 2: %.9g", p);
}

Test(optimizer, adamw_without_decay_skips_weight_decay) {
    // Same first step without decay: update = 1, p = 1 - 0.1 = 0.9.
    AdamWConfig cfg = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    float p = 1.0f, m = 0.0f, v = 0.0f, g = 0.5f;
    adamw_update(&p, &g, &m, &v, 1, 0.1f, &cfg, 0, 1);
    cr_assert(NEAR(p, 0.9), "p %.9g", p);
}

Test(optimizer, adamw_first_step_is_lr_times_sign) {
    // At t = 1, m_hat = g and v_hat = g^2, so without decay every parameter
    // moves by lr * g/|g| (up to eps), whatever the gradient's magnitude.
    AdamWConfig cfg = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f};
    float p[3] = {0, 0, 0}, m[3] = {0}, v[3] = {0}, g[3] = {1e-3f, -7.0f, 123.0f};
    adamw_update(p, g, m, v, 3, 0.01f, &cfg, 0, 1);
    cr_assert(NEAR(p[0], -0.01) && NEAR(p[1], 0.01) && NEAR(p[2], -0.01),
              "%g %g %g", p[0], p[1], p[2]);
}

Test(optimizer, learning_rate_schedule) {
    LrSchedule s = {.max_lr = 1e-3f, .min_lr_fraction = 0.1f, .warmup_steps = 10,
                    .total_steps = 110};
    cr_assert(NEAR(lr_at_step(&s, 0), 1e-4));    // warm-up: (0+1)/10 of the peak
    cr_assert(NEAR(lr_at_step(&s, 4), 5e-4));
    cr_assert(NEAR(lr_at_step(&s, 9), 1e-3));    // warm-up ends at the peak
    cr_assert(NEAR(lr_at_step(&s, 10), 1e-3));   // cosine starts at the peak
    cr_assert(NEAR(lr_at_step(&s, 60), 5.5e-4)); // halfway: min + (max-min)/2
    cr_assert(NEAR(lr_at_step(&s, 110), 1e-4));  // the end: min_lr
    cr_assert(NEAR(lr_at_step(&s, 500), 1e-4));  // and after it
    for (int step = 10; step < 110; step++)
        cr_assert(lr_at_step(&s, step + 1) <= lr_at_step(&s, step), "lr rises at %d", step);
}

Test(optimizer, gradient_clipping) {
    float g[2] = {3.0f, 4.0f};
    float norm = grad_global_norm(g, 2);
    cr_assert(NEAR(norm, 5.0));
    cr_assert(grad_clip_factor(norm, 10.0f) == 1.0f);  // under the limit: untouched
    cr_assert(grad_clip_factor(norm, 0.0f) == 1.0f);   // clipping off
    float f = grad_clip_factor(norm, 1.0f);
    cr_assert(NEAR(f, 1.0 / (5.0 + 1e-6)));
    scale_values(g, 2, f);
    cr_assert(NEAR(g[0], 0.6) && NEAR(g[1], 0.8));
    cr_assert(NEAR(grad_global_norm(g, 2), 1.0));
}

Test(sampling, picks_by_cumulative_probability) {
    float p[4] = {0.1f, 0.2f, 0.7f, 0.0f};
    cr_assert(sample_from_probs(p, 4, 0.0f) == 0);
    cr_assert(sample_from_probs(p, 4, 0.05f) == 0);
    cr_assert(sample_from_probs(p, 4, 0.15f) == 1);
    cr_assert(sample_from_probs(p, 4, 0.95f) == 2);
    // The total can round to a hair under the coin: the last real token wins,
    // never the zero-probability one after it.
    float q[3] = {0.3f, 0.3f, 0.0f};
    cr_assert(sample_from_probs(q, 3, 0.9999f) == 1);
}

// From logits: the same draws as from their softmax. log(0.1), log(0.2),
// log(0.7) shifted by 5 (softmax ignores a shift): probabilities 0.1, 0.2, 0.7.
Test(sampling, from_logits_as_from_their_softmax) {
    float z[3] = {logf(0.1f) + 5, logf(0.2f) + 5, logf(0.7f) + 5};
    cr_assert(sample_from_logits(z, 3, 0.0f) == 0);
    cr_assert(sample_from_logits(z, 3, 0.05f) == 0);
    cr_assert(sample_from_logits(z, 3, 0.15f) == 1);
    cr_assert(sample_from_logits(z, 3, 0.35f) == 2);
    cr_assert(sample_from_logits(z, 3, 0.9999f) == 2);
    // Large logits do not overflow: the max is subtracted first.
    float big[2] = {1000.0f, 1000.0f};
    cr_assert(sample_from_logits(big, 2, 0.25f) == 0);
    cr_assert(sample_from_logits(big, 2, 0.75f) == 1);
}
