// adamw_table_cover.h: what the tests of AdamW's tables share (chapter 14's
// layer tables, chapter 15's shard tables): which table entry updates each
// parameter, and where it reads its gradient, master weight and moments.
#ifndef ADAMW_TABLE_COVER_H
#define ADAMW_TABLE_COVER_H

#include <criterion/criterion.h>
#include <stddef.h>

#include "optim/adamw_table.h"

typedef struct {
    int hits;              // how many entries update it (1, or 0 where none should)
    long long grad;        // its gradient's index in the flat gradients
    long long master;      // its master weight's index in the master weights
    size_t state;          // its moment's index in its kind of state
    int decay, quantized;  // the entry's decay, and its table's kind
} Cover;

// Marks every value of table t in cover (one Cover per parameter), checking
// on the way that each entry's blocks follow the ones before it.
static inline void cover_table(Cover *cover, const AdamWTensors *t, int quantized,
                               size_t per_block) {
    unsigned int blocks = 0;
    for (int k = 0; k < t->count; k++) {
        cr_assert_eq(t->first_block[k], blocks, "entry %d's first block", k);
        blocks += (unsigned int)((t->size[k] + per_block - 1) / per_block);
        for (size_t j = 0; j < t->size[k]; j++) {
            Cover *c = &cover[t->offset[k] + j];
            c->hits++;
            c->grad = (long long)(t->offset[k] + j) + t->grad_shift[k];
            c->master = (long long)(t->offset[k] + j) + t->master_shift[k];
            c->state = t->state_offset[k] + j;
            c->decay = t->decay[k];
            c->quantized = quantized;
        }
    }
    cr_assert_eq(t->blocks, blocks);
}

#endif
