// fit_recompute.c: chapter 14's exercise: --fit-memory's search for the
// cheapest --recompute level at which a run fits its memory budget
// (common/train/memory_budget.h says what it must return).
// solutions/14_largest_model/ has it complete; exercises/14_largest_model/
// has its body cut out.
#include "train/memory_budget.h"

#include "exercise.h"

// ANCHOR: fit_recompute
int memory_budget_fit_recompute(const RunRequest *asked, const MemorySearch *s,
                                RunRequest *fitted, size_t *bytes) {
    int found = -1;
    // EXERCISE BEGIN: for each level from asked->recompute up to RECOMPUTE_BLOCK (the enum's order is the cost's), the asked run at that level planned with s->plan(&run, s->arg, &planned); the first whose plan is made (0) and is at most s->budget goes to *fitted and *bytes, and found = 0
    // EXERCISE STUB: (void)asked, (void)s, (void)fitted, (void)bytes;  // no level fits: every run over its budget is refused
    // Never below the level asked for: a run that fits as asked keeps it.
    // Each level recomputes all that the one before it does, and more: the
    // first that fits costs the least time.
    for (int level = asked->recompute; level < RECOMPUTE_LEVELS; level++) {
        RunRequest run = *asked;
        run.recompute = (Recompute)level;
        size_t planned;
        // A run that cannot be planned (s->plan refuses its switches) fits
        // at no level.
        if (s->plan(&run, s->arg, &planned) == 0 && planned <= s->budget) {
            *fitted = run;
            *bytes = planned;
            found = 0;
            break;
        }
    }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: the search for the cheapest recompute level that fits
    return found;
}
// ANCHOR_END: fit_recompute
