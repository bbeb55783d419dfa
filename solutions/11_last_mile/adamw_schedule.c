// adamw_schedule.c: chapter 11's exercise: the table of every step's lr and
// bias corrections (common/optim/adamw_schedule.h says what it must hold).
// solutions/11_last_mile/ has it complete; exercises/11_last_mile/ has its
// body cut out.
#include "optim/adamw_schedule.h"
#include "exercise.h"

// ANCHOR: adamw_schedule
void adamw_schedule_build(AdamWScheduleEntry *table, int steps, const LrSchedule *lr,
                          const AdamWConfig *cfg) {
    // EXERCISE BEGIN: for each step t = 1..steps, entry t - 1 holds lr_at_step(lr, t - 1) (its steps are 0-based) and the bias corrections adamw_bias_correction(cfg->beta1, t) and adamw_bias_correction(cfg->beta2, t)
    // EXERCISE STUB: (void)table, (void)steps, (void)lr, (void)cfg;  // an empty table: every step reads garbage
    for (int t = 1; t <= steps; t++) {
        AdamWScheduleEntry *e = &table[t - 1];
        e->lr = lr_at_step(lr, t - 1);
        e->correction1 = adamw_bias_correction(cfg->beta1, t);
        e->correction2 = adamw_bias_correction(cfg->beta2, t);
    }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: the AdamW schedule table
}
// ANCHOR_END: adamw_schedule
