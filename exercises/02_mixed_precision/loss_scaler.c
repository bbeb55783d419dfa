// GENERATED from solutions/02_mixed_precision/loss_scaler.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 02_mixed_precision); what to do and
// how to test it: exercises/02_mixed_precision/README.md.
// loss_scaler.c: chapter 02's exercise, part 2: the decisions of dynamic loss
// scaling for fp16 (declared, with the whole story, in common/optim/loss_scaler.h;
// loss_scaler_init and loss_scaler_unscale are in common/optim/loss_scaler.c).
// solutions/02_mixed_precision/ has them complete; exercises/02_mixed_precision/
// has their bodies cut out. The bf16 trainer does not call them: bf16 needs
// no loss scaling, which is the chapter's point; the tests drive them.
#include <math.h>

#include "exercise.h"
#include "optim/loss_scaler.h"

// ANCHOR: grads_have_inf_or_nan
int grads_have_inf_or_nan(const float *grads, size_t n) {
    int found;
    // TODO(exercise 02_mixed_precision): 1 as soon as one value is Inf or NaN, else 0
    // Replace this stub, which makes the tests fail, with your code.
    (void)grads, (void)n;
    found = -1;  // neither yes (1) nor no (0): every test fails until this is written
    // TODO(exercise 02_mixed_precision): delete this call once the code above is written.
    exercise_unfinished("02_mixed_precision", "loss scaler, finding Inf and NaN",
                        "1 as soon as one value is Inf or NaN, else 0");
    return found;
}
// ANCHOR_END: grads_have_inf_or_nan

// ANCHOR: loss_scaler_update
int loss_scaler_update(LossScaler *ls, int found_inf) {
    int skip;
    // TODO(exercise 02_mixed_precision): an overflow backs off and skips the step; a clean step counts, and growth_interval of them in a row grow the scale
    // Replace this stub, which makes the tests fail, with your code.
    (void)ls, (void)found_inf;
    skip = -1;  // neither skip (1) nor step (0)
    // TODO(exercise 02_mixed_precision): delete this call once the code above is written.
    exercise_unfinished("02_mixed_precision", "loss scaler, the update",
                        "an overflow backs off and skips the step; a clean step counts, and growth_interval of them in a row grow the scale");
    return skip;
}
// ANCHOR_END: loss_scaler_update
