// dataloader.c: see dataloader.h.
#define _POSIX_C_SOURCE 200809L  // strdup
#include "data/dataloader.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "files/shard.h"

// ---- the shards ------------------------------------------------------------

static size_t window_tokens(const DataLoader *dl) { return (size_t)dl->B * dl->T; }

// Windows of B*T + 1 tokens, at a stride of B*T, in a shard of n tokens.
static size_t windows_in(const DataLoader *dl, size_t n) {
    return n == 0 ? 0 : (n - 1) / window_tokens(dl);
}

// glob(3) returns the matches sorted, so the shards' order is the same on
// every machine (in the C locale, which a C program starts in).
static int find_shards(DataLoader *dl, const char *pattern, char *err) {
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc != 0) {
        globfree(&g);
        if (rc == GLOB_NOMATCH) return fail(err, "%s: no file matches this pattern", pattern);
        return fail(err, "%s: cannot search for shards (glob error %d)", pattern, rc);
    }
    dl->num_shards = g.gl_pathc;
    dl->paths = xcalloc(g.gl_pathc, sizeof(char *));
    for (size_t i = 0; i < g.gl_pathc; i++) {
        dl->paths[i] = strdup(g.gl_pathv[i]);
        if (!dl->paths[i]) die("out of memory copying a shard's path");
    }
    globfree(&g);
    return 0;
}

// Reads only the headers, so a large data set costs no memory up front.
static int count_windows(DataLoader *dl, char *err) {
    dl->shard_windows = xcalloc(dl->num_shards, sizeof(size_t));
    for (size_t s = 0; s < dl->num_shards; s++) {
        size_t n;
        if (shard_read_header(dl->paths[s], &n, err) != 0) return -1;
        dl->shard_windows[s] = windows_in(dl, n);
        if (dl->shard_windows[s] == 0)
            return fail(err, "%s: %zu tokens, too few for one window of B*T + 1 = %zu tokens",
                        dl->paths[s], n, window_tokens(dl) + 1);
        dl->total_windows += dl->shard_windows[s];
    }
    return 0;
}

static size_t largest_shard_windows(const DataLoader *dl) {
    size_t most = 0;
    for (size_t s = 0; s < dl->num_shards; s++)
        if (dl->shard_windows[s] > most) most = dl->shard_windows[s];
    return most;
}

// Makes the shard being visited the one in memory. Loading validates every
// token; a shard whose size changed since dataloader_init is an error.
static int load_current_shard(DataLoader *dl, char *err) {
    size_t s = dl->shard_order[dl->slot];
    if (dl->loaded == s) return 0;
    free(dl->tokens);
    dl->tokens = NULL;
    dl->loaded = dl->num_shards;
    size_t n;
    if (shard_read(dl->paths[s], dl->vocab_size, &dl->tokens, &n, err) != 0) return -1;
    if (windows_in(dl, n) != dl->shard_windows[s]) {
        free(dl->tokens);
        dl->tokens = NULL;
        return fail(err, "%s: changed since the data loader started: %zu windows, expected %zu",
                    dl->paths[s], windows_in(dl, n), dl->shard_windows[s]);
    }
    dl->num_tokens = n;
    dl->loaded = s;
    return 0;
}

// ---- the order of one epoch ------------------------------------------------

// rng_seed scrambles its argument, so scrambling twice, with the epoch mixed
// in between, gives an unrelated stream for every (seed, epoch) pair.
static void seed_epoch_rng(Rng *rng, uint64_t seed, uint64_t epoch) {
    rng_seed(rng, seed);
    rng_seed(rng, rng->state ^ epoch);
}

// Fisher-Yates: every permutation equally likely.
static void shuffle_u32(uint32_t *a, size_t n, Rng *rng) {
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(rng, (uint32_t)i);
        uint32_t tmp = a[i - 1];
        a[i - 1] = a[j];
        a[j] = tmp;
    }
}

static void shuffle_size(size_t *a, size_t n, Rng *rng) {
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(rng, (uint32_t)i);
        size_t tmp = a[i - 1];
        a[i - 1] = a[j];
        a[j] = tmp;
    }
}

static size_t current_shard_windows(const DataLoader *dl) {
    return dl->shard_windows[dl->shard_order[dl->slot]];
}

// The order of the windows of the shard being visited.
static void plan_windows(DataLoader *dl) {
    size_t n = current_shard_windows(dl);
    for (size_t w = 0; w < n; w++) dl->window_order[w] = (uint32_t)w;
    if (dl->shuffle) shuffle_u32(dl->window_order, n, &dl->rng);
}

static void begin_epoch(DataLoader *dl, uint64_t epoch) {
    dl->pos.epoch = epoch;
    dl->pos.window = 0;
    seed_epoch_rng(&dl->rng, dl->seed, epoch);
    for (size_t s = 0; s < dl->num_shards; s++) dl->shard_order[s] = s;
    if (dl->shuffle) shuffle_size(dl->shard_order, dl->num_shards, &dl->rng);
    dl->slot = 0;
    dl->slot_start = 0;
    plan_windows(dl);
}

static void next_shard(DataLoader *dl) {
    dl->slot_start += current_shard_windows(dl);
    dl->slot++;
    plan_windows(dl);
}

// One window forward: into the next shard, or the next epoch, when this one
// is used up.
static void advance(DataLoader *dl) {
    dl->pos.window++;
    if (dl->pos.window == dl->total_windows)
        begin_epoch(dl, dl->pos.epoch + 1);
    else if (dl->pos.window == dl->slot_start + current_shard_windows(dl))
        next_shard(dl);
}

// ---- the API ---------------------------------------------------------------

int dataloader_init(DataLoader *dl, const char *pattern, int B, int T, int vocab_size,
                    int shuffle, uint64_t seed, char *err) {
    memset(dl, 0, sizeof(*dl));
    if (B <= 0 || T <= 0)
        return fail(err, "%s: B and T must be positive, got B = %d, T = %d", pattern, B, T);
    if (vocab_size <= 0)
        return fail(err, "%s: vocab_size must be positive, got %d", pattern, vocab_size);
    dl->B = B;
    dl->T = T;
    dl->vocab_size = vocab_size;
    dl->shuffle = shuffle;
    dl->seed = seed;
    dl->rank = 0;
    dl->world_size = 1;
    if (find_shards(dl, pattern, err) != 0 || count_windows(dl, err) != 0) {
        dataloader_free(dl);
        return -1;
    }
    dl->shard_order = xcalloc(dl->num_shards, sizeof(size_t));
    dl->window_order = xcalloc(largest_shard_windows(dl), sizeof(uint32_t));
    dl->loaded = dl->num_shards;
    begin_epoch(dl, 0);
    return 0;
}

void dataloader_set_rank(DataLoader *dl, int rank, int world_size) {
    if (world_size < 1 || rank < 0 || rank >= world_size)
        die("dataloader_set_rank: rank %d of %d", rank, world_size);
    dl->rank = rank;
    dl->world_size = world_size;
}

// The window at the position, into inputs and targets.
static int read_window(DataLoader *dl, int32_t *inputs, int32_t *targets, char *err) {
    if (load_current_shard(dl, err) != 0) return -1;
    size_t bt = window_tokens(dl);
    size_t w = dl->window_order[dl->pos.window - dl->slot_start];
    const uint16_t *window = dl->tokens + w * bt;
    for (size_t i = 0; i < bt; i++) {
        inputs[i] = window[i];
        targets[i] = window[i + 1];
    }
    return 0;
}

int dataloader_next(DataLoader *dl, int32_t *inputs, int32_t *targets, char *err) {
    const DataPosition start = dl->pos;
    // The windows of the ranks before this one are walked past, not read:
    // only the shard this rank reads from is ever loaded.
    for (int r = 0; r < dl->rank; r++) advance(dl);
    if (read_window(dl, inputs, targets, err) != 0) {
        if (dl->rank > 0 && dataloader_seek(dl, start, NULL) != 0)
            die("dataloader_next: cannot return to the position it started from");
        return -1;
    }
    for (int r = dl->rank; r < dl->world_size; r++) advance(dl);
    return 0;
}

size_t dataloader_num_windows(const DataLoader *dl) { return dl->total_windows; }

DataPosition dataloader_position(const DataLoader *dl) { return dl->pos; }

// Replays the epoch's draws up to the shard that holds pos.window, so the
// Rng ends up exactly where an uninterrupted run would have it.
int dataloader_seek(DataLoader *dl, DataPosition pos, char *err) {
    if (pos.window >= dl->total_windows)
        return fail(err, "data loader: cannot seek to window %llu of an epoch of %zu windows",
                    (unsigned long long)pos.window, dl->total_windows);
    begin_epoch(dl, pos.epoch);
    while (pos.window >= dl->slot_start + current_shard_windows(dl)) next_shard(dl);
    dl->pos.window = pos.window;
    return 0;
}

void dataloader_reset(DataLoader *dl) { begin_epoch(dl, 0); }

void dataloader_free(DataLoader *dl) {
    for (size_t s = 0; s < dl->num_shards && dl->paths; s++) free(dl->paths[s]);
    free(dl->paths);
    free(dl->shard_windows);
    free(dl->shard_order);
    free(dl->window_order);
    free(dl->tokens);
    memset(dl, 0, sizeof(*dl));
}
