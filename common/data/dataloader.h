// dataloader.h: B x T batches of tokens from one or more shards (shard.h).
//
// Each shard is cut into windows of B*T + 1 tokens, at a stride of B*T:
// window w covers tokens [w*B*T, w*B*T + B*T]. A batch is one window: the
// inputs are its first B*T tokens and the targets the same tokens shifted by
// one, both read row-major as (B, T). The last token of a window is the first
// of the next, so no token is lost between windows; a shard's tail too short
// for another window is never used.
//
// An epoch visits every window of every shard exactly once, then the loader
// wraps around to the next epoch. With shuffle off (validation) the order is
// sequential: the shards in sorted order, each shard's windows in order. With
// shuffle on, one Rng per epoch, seeded by (seed, epoch), first permutes the
// shards and then, as the loader reaches each shard, that shard's windows: a
// deterministic order for a seed, different in every epoch. Visiting a shard's
// windows together means only one shard needs to be in memory at a time.
//
// The loader's position is {epoch, index of the next window in the epoch}; a
// resumed run seeks to a saved position and sees the same batches after it.
//
// Several GPUs (chapter 15): rank r of N reads window p + r of the order and
// moves the position on by N windows, so that the N ranks together read, at
// each step, the N windows a single loader would read in N steps, and every
// rank holds the same position, the order's, whatever N is. One rank of one
// (the default) is the single loader.
#ifndef DATALOADER_H
#define DATALOADER_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

typedef struct {
    uint64_t epoch;   // epochs completed so far
    uint64_t window;  // index, within the epoch's order, of the next window
} DataPosition;

typedef struct {
    int B, T, vocab_size, shuffle;
    uint64_t seed;
    int rank, world_size;    // this reader's share: windows p + rank, every world_size

    // Every shard, from the glob; sorted.
    char **paths;
    size_t num_shards;
    size_t *shard_windows;   // windows in each shard
    size_t total_windows;    // in one epoch: the sum of shard_windows

    // This epoch's order.
    DataPosition pos;
    Rng rng;                 // seeded by (seed, epoch), drawn in visiting order
    size_t *shard_order;     // the shards in the order this epoch visits them
    size_t slot;             // shard_order[slot] is the shard being visited
    size_t slot_start;       // epoch index of that shard's first window
    uint32_t *window_order;  // that shard's windows, in visiting order

    // The one shard in memory.
    size_t loaded;           // its index in paths; num_shards when none
    uint16_t *tokens;
    size_t num_tokens;
} DataLoader;

// Finds the shards matching pattern (glob(3); sorted), checks their headers
// and that each holds at least one window of B*T + 1 tokens, and positions
// the loader at epoch 0, window 0. Returns 0, or -1 with a reason in err (no
// shard matches, a shard is bad or too small); then dl needs no freeing.
int dataloader_init(DataLoader *dl, const char *pattern, int B, int T, int vocab_size,
                    int shuffle, uint64_t seed, char *err);

// Makes the loader rank `rank` of `world_size` readers (above); before the
// first batch, or after a seek.
void dataloader_set_rank(DataLoader *dl, int rank, int world_size);

// Writes the next batch into inputs and targets (B*T int32 each, (B, T)
// row-major) and advances, wrapping to the next epoch after the last window:
// by one window, or by world_size for one of several ranks. Fails (-1, err)
// only when a shard cannot be loaded (unreadable, changed on disk, or
// holding a token >= vocab_size); the position then stays put.
int dataloader_next(DataLoader *dl, int32_t *inputs, int32_t *targets, char *err);

// Windows per epoch.
size_t dataloader_num_windows(const DataLoader *dl);

DataPosition dataloader_position(const DataLoader *dl);

// Restores a position from dataloader_position (of a loader built with the
// same shards, B, T and seed). Fails if pos.window is not below
// dataloader_num_windows.
int dataloader_seek(DataLoader *dl, DataPosition pos, char *err);

// Back to epoch 0, window 0 (for example before each validation pass).
void dataloader_reset(DataLoader *dl);

void dataloader_free(DataLoader *dl);

#endif
