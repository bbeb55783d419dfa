// test_adamw_schedule.c: chapter 11's table of every step's lr and bias
// corrections (common/optim/adamw_schedule.h), the exercise of chapter 11: entry
// t - 1 holds, bit for bit, what chapters 00-10 compute on the host when
// they launch step t, through the warm-up, the cosine and past its end.
#include <criterion/criterion.h>
#include <string.h>

#include "optim/adamw_schedule.h"

static void check_entries(const AdamWScheduleEntry *table, int steps, const LrSchedule *lr,
                          const AdamWConfig *cfg) {
    for (int t = 1; t <= steps; t++) {
        const float want[3] = {lr_at_step(lr, t - 1), adamw_bias_correction(cfg->beta1, t),
                               adamw_bias_correction(cfg->beta2, t)};
        const float got[3] = {table[t - 1].lr, table[t - 1].correction1,
                              table[t - 1].correction2};
        const char *names[3] = {"lr", "correction1", "correction2"};
        for (int k = 0; k < 3; k++)
            cr_assert(memcmp(&got[k], &want[k], sizeof(float)) == 0,
                      "step %d: %s is %.9g, and the host computes %.9g at that step", t, names[k],
                      (double)got[k], (double)want[k]);
    }
}

// Ten steps: three of warm-up, the cosine, and two steps past its end (a
// schedule shorter than the run), each entry its own step's.
Test(adamw_schedule, warmup_cosine_and_after) {
    enum { STEPS = 10 };
    const LrSchedule lr = {.max_lr = 6e-4f, .min_lr_fraction = 0.1f, .warmup_steps = 3,
                           .total_steps = 8};
    const AdamWConfig cfg = adamw_default_config();
    AdamWScheduleEntry table[STEPS];
    memset(table, 0xff, sizeof table);
    adamw_schedule_build(table, STEPS, &lr, &cfg);
    check_entries(table, STEPS, &lr, &cfg);
    cr_assert(table[0].lr < table[2].lr, "the warm-up rises");
    cr_assert(table[9].lr == lr.max_lr * lr.min_lr_fraction, "after the schedule: min_lr");
    cr_assert(table[0].correction1 > 0.09f && table[0].correction1 < 0.11f,
              "1 - beta1 at step 1, got %g", (double)table[0].correction1);
}

// The 124M run's: 5000 steps, every entry.
Test(adamw_schedule, a_long_run) {
    enum { STEPS = 5000 };
    const LrSchedule lr = {.max_lr = 6e-4f, .min_lr_fraction = 0.0f, .warmup_steps = 700,
                           .total_steps = STEPS};
    AdamWConfig cfg = adamw_default_config();
    cfg.beta2 = 0.95f;
    static AdamWScheduleEntry table[STEPS];
    adamw_schedule_build(table, STEPS, &lr, &cfg);
    check_entries(table, STEPS, &lr, &cfg);
}

// No steps: nothing written.
Test(adamw_schedule, no_steps) {
    const LrSchedule lr = {.max_lr = 1e-3f, .min_lr_fraction = 0.1f, .warmup_steps = 0,
                           .total_steps = 1};
    const AdamWConfig cfg = adamw_default_config();
    AdamWScheduleEntry table[1];
    memset(table, 0xab, sizeof table);
    adamw_schedule_build(table, 0, &lr, &cfg);
    const unsigned char *b = (const unsigned char *)table;
    for (size_t i = 0; i < sizeof table; i++) cr_assert_eq(b[i], 0xab);
}
