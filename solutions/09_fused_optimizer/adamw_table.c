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
    // EXERCISE BEGIN: walk the tensors keeping the running offset (every tensor's size counts, empty ones too); for each non-empty one append offset, size, decay (0 or 1) and first_block = the blocks so far, then add its ceil(size / values_per_block) blocks; more than ADAMW_MAX_TENSORS: die()
    // EXERCISE STUB: (void)sizes, (void)decay, (void)count, (void)values_per_block;  // an empty table: the launch updates nothing
    size_t offset = 0;
    for (int i = 0; i < count; i++) {
        const size_t n = sizes[i];
        if (n > 0) {
            if (table->count == ADAMW_MAX_TENSORS)
                die("adamw_table_build: more than %d tensors", ADAMW_MAX_TENSORS);
            const int k = table->count++;
            table->offset[k] = offset;
            table->size[k] = n;
            table->decay[k] = decay[i] != 0;
            table->first_block[k] = table->blocks;
            table->blocks += (unsigned int)((n + values_per_block - 1) / values_per_block);
        }
        offset += n;
    }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: the fused AdamW's table of tensors
}
// ANCHOR_END: adamw_table
