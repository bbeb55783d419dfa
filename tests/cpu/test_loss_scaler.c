// test_loss_scaler.c: dynamic loss scaling (common/optim/loss_scaler.h; its
// decisions are chapter 02's exercise, solutions/02_mixed_precision/
// loss_scaler.c): finding Inf and NaN, skipping and backing off on an
// overflow, growing after growth_interval clean steps, and a simulated run of
// fp16 training whose gradients overflow now and then.
#include <criterion/criterion.h>
#include <math.h>

#include "optim/loss_scaler.h"

Test(loss_scaler, starts_with_pytorchs_defaults) {
    LossScaler ls = loss_scaler_init(LOSS_SCALER_INIT_SCALE);
    cr_assert(ls.scale == 65536.0f && ls.growth_factor == 2.0f && ls.backoff_factor == 0.5f);
    cr_assert(ls.growth_interval == 2000 && ls.good_steps == 0);
}

Test(loss_scaler, finds_inf_and_nan) {
    float g[] = {0.5f, -1e-8f, 3e30f, 0.0f, -0.0f, 1e-45f};
    cr_assert(grads_have_inf_or_nan(g, 6) == 0, "finite values only");
    cr_assert(grads_have_inf_or_nan(g, 0) == 0, "no values");
    const float bad[] = {INFINITY, -INFINITY, NAN, -NAN};
    for (int k = 0; k < 4; k++)
        for (int at = 0; at < 6; at++) {
            float h[6];
            for (int i = 0; i < 6; i++) h[i] = g[i];
            h[at] = bad[k];
            cr_assert(grads_have_inf_or_nan(h, 6) == 1, "%g at [%d] not found", (double)bad[k], at);
            cr_assert(grads_have_inf_or_nan(h, (size_t)at) == 0, "found past the end");
        }
}

Test(loss_scaler, an_overflow_skips_the_step_and_backs_off) {
    LossScaler ls = loss_scaler_init(1024.0f);
    cr_assert(loss_scaler_update(&ls, 0) == 0);
    cr_assert(loss_scaler_update(&ls, 0) == 0);
    cr_assert(ls.good_steps == 2 && ls.scale == 1024.0f);
    cr_assert(loss_scaler_update(&ls, 1) == 1, "an overflow must skip the step");
    cr_assert(ls.scale == 512.0f, "scale %g after one overflow, want 512", (double)ls.scale);
    cr_assert(ls.good_steps == 0, "the count of clean steps starts again");
    cr_assert(loss_scaler_update(&ls, 1) == 1);
    cr_assert(ls.scale == 256.0f);
}

Test(loss_scaler, grows_after_growth_interval_clean_steps) {
    LossScaler ls = loss_scaler_init(1024.0f);
    ls.growth_interval = 5;
    for (int i = 1; i <= 4; i++) {
        cr_assert(loss_scaler_update(&ls, 0) == 0);
        cr_assert(ls.scale == 1024.0f, "grew after %d clean steps", i);
    }
    cr_assert(loss_scaler_update(&ls, 0) == 0, "the growing step itself is taken");
    cr_assert(ls.scale == 2048.0f && ls.good_steps == 0, "scale %g good_steps %d",
              (double)ls.scale, ls.good_steps);
    // an overflow in the middle resets the count
    for (int i = 0; i < 4; i++) loss_scaler_update(&ls, 0);
    loss_scaler_update(&ls, 1);
    cr_assert(ls.scale == 1024.0f);
    for (int i = 0; i < 4; i++) loss_scaler_update(&ls, 0);
    cr_assert(ls.scale == 1024.0f, "grew before 5 clean steps in a row");
    loss_scaler_update(&ls, 0);
    cr_assert(ls.scale == 2048.0f);
}

// fp16's largest finite value: a scaled gradient beyond it is Inf.
#define FP16_MAX 65504.0f

// A simulated fp16 run: the largest gradient of each step (before scaling) is
// gmax[step]; the scaled gradients overflow when scale * gmax > FP16_MAX.
// The scaler finds the largest power-of-two scale that fits, holds it, probes
// upward every growth_interval steps, and skips exactly the steps that
// overflowed.
Test(loss_scaler, a_simulated_fp16_run) {
    LossScaler ls = loss_scaler_init(LOSS_SCALER_INIT_SCALE);
    ls.growth_interval = 10;
    int skipped = 0, taken = 0, max_run_of_skips = 0, run = 0;
    float scales[60];
    for (int step = 0; step < 60; step++) {
        // gradients of about 0.1, with a spike to 3 at step 30
        float gmax = step == 30 ? 3.0f : 0.1f;
        float scaled = ls.scale * gmax;  // as fp16 would hold it
        float g[3] = {scaled > FP16_MAX ? INFINITY : scaled, 0.5f * scaled, -0.25f * scaled};
        int skip = loss_scaler_update(&ls, grads_have_inf_or_nan(g, 3));
        scales[step] = ls.scale;
        skipped += skip, taken += !skip;
        run = skip ? run + 1 : 0;
        if (run > max_run_of_skips) max_run_of_skips = run;
    }
    // 65536 * 0.1 = 6554 fits: no skip until the scale grows to 2^17 (13107
    // fits), 2^18 (26214 fits), 2^19 (52429 fits), 2^20 (104858 does not).
    cr_assert(scales[9] == 131072.0f, "after 10 clean steps: %g", (double)scales[9]);
    cr_assert(scales[19] == 262144.0f, "after 20: %g", (double)scales[19]);
    cr_assert(scales[29] == 524288.0f, "after 30: %g", (double)scales[29]);
    // step 30: the spike, 3 * 2^19 overflows: skip, back off to 2^18
    cr_assert(scales[30] == 262144.0f, "after the spike: %g", (double)scales[30]);
    // steps 31..40 clean at 2^18: grows to 2^19 after step 40
    cr_assert(scales[40] == 524288.0f, "%g", (double)scales[40]);
    // steps 41..50 clean at 2^19: grows to 2^20 after step 50; step 51
    // overflows (0.1 * 2^20 > 65504): skip, back to 2^19
    cr_assert(scales[50] == 1048576.0f && scales[51] == 524288.0f, "%g %g", (double)scales[50],
              (double)scales[51]);
    cr_assert(skipped == 2 && taken == 58, "skipped %d, taken %d", skipped, taken);
    cr_assert(max_run_of_skips == 1);
}

Test(loss_scaler, backs_off_until_the_gradients_fit) {
    // Gradients of 50 with a scale of 2^16: 50 * 2^16 overflows, and so does
    // every halving down to 2^11 (102400); 2^10 (51200) fits: 6 steps skipped.
    LossScaler ls = loss_scaler_init(65536.0f);
    int skipped = 0;
    for (int i = 0; i < 100 && loss_scaler_update(&ls, ls.scale * 50.0f > FP16_MAX) == 1; i++)
        skipped++;
    cr_assert(skipped == 6 && ls.scale == 1024.0f, "skipped %d, scale %g", skipped,
              (double)ls.scale);
}

Test(loss_scaler, unscale_is_exact_for_powers_of_two) {
    LossScaler ls = loss_scaler_init(4096.0f);
    float g[3] = {0.375f * 4096.0f, -1e-5f * 4096.0f, 0.0f};
    loss_scaler_unscale(&ls, g, 3);
    cr_assert(g[0] == 0.375f && g[1] == -1e-5f && g[2] == 0.0f, "%.9g %.9g", (double)g[0],
              (double)g[1]);
}
