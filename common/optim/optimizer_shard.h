// optimizer_shard.h: chapter 15's --shard-optimizer (ZeRO stage 1), in host
// arithmetic: which rank keeps which part of AdamW's state.
//
// Data parallel keeps on every rank the same weights, the same gradients'
// mean and the same optimizer state, and every rank makes the same update:
// N copies of the fp32 master weights and of the moments, 12 bytes a
// parameter each (6 with chapter 10's 8-bit moments), where one would do.
// ZeRO-1 cuts the flat parameter buffer into N equal shards, rank r's the
// values [r S, (r+1) S):
//
//   parameters:   | rank 0's S values | rank 1's S values | ... | rank N-1's, padded |
//                 0                   S                   2S          P        N S
//
// and rank r keeps the master weights and the moments of its shard only. A
// step then needs, instead of an all-reduce of the gradients:
//   - the gradients' mean on the shard's owner only: a reduce-scatter (the
//     first half of an all-reduce), so that rank r holds the mean of
//     [r S, (r+1) S) and the rest of its gradients is its own, unaveraged;
//   - the update of the shard, by the same fused launches, from tables that
//     list the shard's slices of the tensors (optimizer_shard_table);
//   - the new bf16 weights from every owner to everyone: an all-gather (the
//     all-reduce's second half).
// The bytes on the wire are an all-reduce's. The buffers of the parameters
// and gradients are allocated N S long, so that both collectives work in
// place on equal parts.
//
// S is a multiple of 256 (quantize8.h's Q8_BLOCK), so that a shard cuts a
// tensor with 8-bit moments between two of its blocks of 256: each block's
// scale then belongs to one rank, and the 8-bit state of a shard is bytes
// of the whole state, copied, never quantized again. A quantized tensor
// that does not start on a multiple of 256 could be cut inside a block:
// optimizer_shard_for refuses that, naming the tensor (no GPT-2 shape
// has one).
//
// The shard's moments sit in buffers of its own, laid out as an AdamLayout
// (adam_state.h) of the shard's slices: param_offset and size are a slice's
// place in the whole parameter buffer, state_offset its place in the
// shard's buffers. The master weights of the shard are S floats, value j
// of the shard at j (master_shift in the AdamW tables: adamw_table.h).
#ifndef OPTIMIZER_SHARD_H
#define OPTIMIZER_SHARD_H

#include <stddef.h>

#include "optim/adam_state.h"
#include "optim/adamw_table.h"

// ANCHOR: shard_layout
typedef struct {
    int rank, world_size;
    size_t shard_values;   // S: every rank's part of the flat buffers, a multiple of 256
    size_t padded_values;  // N S >= the parameters: how long params and grads are allocated
    size_t first, last;    // this rank's parameters [first, last): last - first <= S, fewer
                           // for the last rank (the padding) or none past the parameters
    AdamLayout local;      // the shard's slices of the tensors, their moments in its buffers
} OptimizerShard;

// Rank `rank` of world_size's shard of the parameters that `whole` (the
// run's AdamLayout) lays out. 0, or -1 with err when a quantized tensor
// would be cut inside a block of 256.
int optimizer_shard_for(OptimizerShard *s, const AdamLayout *whole, int rank, int world_size,
                        char *err);
// ANCHOR_END: shard_layout

// The AdamW table (adamw_table.h) of the shard's slices whose moments are
// 8-bit (quantized = 1) or fp32 (0), cut into blocks of values_per_block:
// parameters and gradients at their places in the whole buffers, moments at
// their places in the shard's, master weights at value - first.
void optimizer_shard_table(AdamWTensors *t, const OptimizerShard *s, const int *decay,
                           int quantized, size_t values_per_block);

// The shard's moments (in s->local's layout) into their places in a state of
// the whole layout, and back. Bytes and floats are copied as they are: the
// 8-bit blocks and their scales too.
void optimizer_shard_gather(const OptimizerShard *s, const AdamState *shard, AdamState *whole);
void optimizer_shard_scatter(const OptimizerShard *s, const AdamState *whole, AdamState *shard);

#endif
