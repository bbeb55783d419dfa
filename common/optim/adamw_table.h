// adamw_table.h: chapter 09's table of the tensors that one AdamW launch
// updates (kernels/adamw.h: adamw_fused_v2). Plain C: which block of the
// launch updates which values is host arithmetic, and chapter 09's exercise.
//
// The tensors are consecutive ranges of one flat buffer (params, master,
// grads, m and v share the layout), in order, empty ones left out. Each
// tensor is cut into blocks of `values_per_block` values (the kernel's 256
// threads times the values each thread updates), its last block shorter;
// first_block is the prefix sum of the blocks of the tensors before it, so
// that block b of the launch belongs to the last tensor whose first_block
// <= b, and no block spans two tensors:
//
//   tensor:       wte (38.6M)          wpe (786K)   ln1w (9K) ...
//   blocks:       0 .. 18863           18864 ..     19248 ...
//
// The table is built once on the host and passed to each launch by value, as
// a kernel argument: it is small (under 1 KB) and fixed for the life of a
// model, so there is nothing to allocate, copy or keep in step with it. The
// launch's arguments sit in a constant bank, where all the threads of a block
// reading the same entry is one broadcast; a CUDA graph (chapter 11) records
// them once, which is right for a table that never changes.
#ifndef ADAMW_TABLE_H
#define ADAMW_TABLE_H

#include <stddef.h>

#define ADAMW_MAX_TENSORS 32

typedef struct {
    int count;                                    // tensors in the table, each of size > 0
    unsigned int blocks;                          // the launch's grid: all the tensors' blocks
    size_t offset[ADAMW_MAX_TENSORS];             // its first value in the flat buffers
    size_t size[ADAMW_MAX_TENSORS];               // its values
    size_t state_offset[ADAMW_MAX_TENSORS];       // its first moment in the optimizer's state:
                                                  // offset itself through chapter 09; chapter
                                                  // 10 packs the state (adam_state.h)
    long long grad_shift[ADAMW_MAX_TENSORS];      // where its gradients start in the flat
                                                  // gradients, less offset: 0 (laid out as
                                                  // the parameters) but in chapter 14's
                                                  // --update-in-backward (layer_tables.h)
    long long master_shift[ADAMW_MAX_TENSORS];    // where its master weights start in master,
                                                  // less offset: 0 but in chapter 15's
                                                  // --shard-optimizer (optimizer_shard.h)
    int decay[ADAMW_MAX_TENSORS];                 // 1: weight decay applies to it
    unsigned int first_block[ADAMW_MAX_TENSORS];  // its first block in the launch
} AdamWTensors;

// The table of `count` tensors that lie one after another from offset 0:
// tensor i has sizes[i] values (0: it is left out, but its place in the
// buffer is still counted) and weight decay when decay[i] is not 0. More than
// ADAMW_MAX_TENSORS non-empty tensors is a programming error: it says so and
// exits. Each state_offset is left 0: the caller sets it (adamw_tensors_v2:
// the parameters' offset); so are each grad_shift and master_shift, which
// stay 0 unless the gradients (chapter 14) or the master weights (chapter
// 15) are laid out otherwise than the parameters. Chapter 09's exercise
// (solutions/09_fused_optimizer/adamw_table.c).
void adamw_table_build(AdamWTensors *table, const size_t *sizes, const int *decay, int count,
                       size_t values_per_block);

#endif
