// GENERATED from solutions/09_fused_optimizer/adamw_table.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 09_fused_optimizer); what to do and
// how to test it: exercises/09_fused_optimizer/README.md.
// adamw_table.c: chapter 09's exercise: the table of tensors of the fused
// AdamW launch (common/optim/adamw_table.h says what it must hold).
// solutions/09_fused_optimizer/ has it complete; exercises/09_fused_optimizer/
// has its body cut out.
#include <string.h>

#include "optim/adamw_table.h"
#include "exercise.h"
#include "util/util.h"

// ANCHOR: adamw_table
void adamw_table_build(AdamWTensors *table, const size_t *sizes, const int *decay, int count,
                       size_t values_per_block) {
    memset(table, 0, sizeof *table);
    // TODO(exercise 09_fused_optimizer): walk the tensors keeping the running offset (every tensor's size counts, empty ones too); for each non-empty one append offset, size, decay (0 or 1) and first_block = the blocks so far, then add its ceil(size / values_per_block) blocks; more than ADAMW_MAX_TENSORS: die()
    // Replace this stub, which makes the tests fail, with your code.
    (void)sizes, (void)decay, (void)count, (void)values_per_block;  // an empty table: the launch updates nothing
    // TODO(exercise 09_fused_optimizer): delete this call once the code above is written.
    exercise_unfinished("09_fused_optimizer", "the fused AdamW's table of tensors",
                        "walk the tensors keeping the running offset (every tensor's size counts, empty ones too); for each non-empty one append offset, size, decay (0 or 1) and first_block = the blocks so far, then add its ceil(size / values_per_block) blocks; more than ADAMW_MAX_TENSORS: die()");
}
// ANCHOR_END: adamw_table
