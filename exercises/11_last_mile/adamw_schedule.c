// GENERATED from solutions/11_last_mile/adamw_schedule.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 11_last_mile); what to do and
// how to test it: exercises/11_last_mile/README.md.
// adamw_schedule.c: chapter 11's exercise: the table of every step's lr and
// bias corrections (common/optim/adamw_schedule.h says what it must hold).
// solutions/11_last_mile/ has it complete; exercises/11_last_mile/ has its
// body cut out.
#include "optim/adamw_schedule.h"
#include "exercise.h"

// ANCHOR: adamw_schedule
void adamw_schedule_build(AdamWScheduleEntry *table, int steps, const LrSchedule *lr,
                          const AdamWConfig *cfg) {
    // TODO(exercise 11_last_mile): for each step t = 1..steps, entry t - 1 holds lr_at_step(lr, t - 1) (its steps are 0-based) and the bias corrections adamw_bias_correction(cfg->beta1, t) and adamw_bias_correction(cfg->beta2, t)
    // Replace this stub, which makes the tests fail, with your code.
    (void)table, (void)steps, (void)lr, (void)cfg;  // an empty table: every step reads garbage
    // TODO(exercise 11_last_mile): delete this call once the code above is written.
    exercise_unfinished("11_last_mile", "the AdamW schedule table",
                        "for each step t = 1..steps, entry t - 1 holds lr_at_step(lr, t - 1) (its steps are 0-based) and the bias corrections adamw_bias_correction(cfg->beta1, t) and adamw_bias_correction(cfg->beta2, t)");
}
// ANCHOR_END: adamw_schedule
