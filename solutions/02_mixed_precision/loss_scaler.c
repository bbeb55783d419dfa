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
    // EXERCISE BEGIN: 1 as soon as one value is Inf or NaN, else 0
    // EXERCISE STUB: (void)grads, (void)n;
    // EXERCISE STUB: found = -1;  // neither yes (1) nor no (0): every test fails until this is written
    found = 0;
    for (size_t i = 0; i < n && !found; i++)
        if (!isfinite(grads[i])) found = 1;
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: loss scaler, finding Inf and NaN
    return found;
}
// ANCHOR_END: grads_have_inf_or_nan

// ANCHOR: loss_scaler_update
int loss_scaler_update(LossScaler *ls, int found_inf) {
    int skip;
    // EXERCISE BEGIN: an overflow backs off and skips the step; a clean step counts, and growth_interval of them in a row grow the scale
    // EXERCISE STUB: (void)ls, (void)found_inf;
    // EXERCISE STUB: skip = -1;  // neither skip (1) nor step (0)
    // ANCHOR: loss_scaler_rule
    if (found_inf) {
        ls->scale *= ls->backoff_factor;
        ls->good_steps = 0;
        skip = 1;
    } else {
        ls->good_steps++;
        if (ls->good_steps >= ls->growth_interval) {
            ls->scale *= ls->growth_factor;
            ls->good_steps = 0;
        }
        skip = 0;
    }
    // ANCHOR_END: loss_scaler_rule
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: loss scaler, the update
    return skip;
}
// ANCHOR_END: loss_scaler_update
