// test_dataloader.c: the data loader cuts shards into B x T batches, visits
// every window once per epoch in a seeded order, and resumes exactly where a
// saved position says.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataloader.h"
#include "file_helpers.h"
#include "files/shard.h"
#include "util/util.h"

TestSuite(dataloader, .init = make_tmpdir, .fini = remove_tmpdir);

// ---- synthetic shards whose tokens say where they are -------------------------------
// Token i of a shard is base + i, so a batch's first input names its window
// (and its shard, when bases are 10000 apart), and a target must be its input + 1.
enum { B = 2, T = 4, BT = B * T, VOCAB = 65536 };

static void write_shard(const char *name, int base, int windows, int tail) {
    int n = windows * BT + 1 + tail;  // tail < BT: tokens too few for another window
    int32_t *tokens = xmalloc(n * sizeof(int32_t));
    for (int i = 0; i < n; i++) tokens[i] = base + i;
    char err[ERR_LEN];
    cr_assert_eq(shard_write(tmp_path(name), tokens, n, err), 0, "%s", err);
    free(tokens);
}

static DataLoader open_loader(const char *pattern, int shuffle, uint64_t seed) {
    DataLoader dl;
    char err[ERR_LEN];
    cr_assert_eq(dataloader_init(&dl, tmp_path(pattern), B, T, VOCAB, shuffle, seed, err), 0,
                 "%s", err);
    return dl;
}

// Takes one batch, checks that it is one whole window shifted by one, and
// returns the window's first token.
static int next_window(DataLoader *dl) {
    int32_t inputs[BT], targets[BT];
    char err[ERR_LEN];
    cr_assert_eq(dataloader_next(dl, inputs, targets, err), 0, "%s", err);
    for (int i = 0; i < BT; i++) {
        cr_assert_eq(inputs[i], inputs[0] + i, "inputs are not one contiguous window");
        cr_assert_eq(targets[i], inputs[i] + 1, "targets are not the inputs shifted by one");
    }
    cr_assert_eq((inputs[0] % 10000) % BT, 0, "window starts at %d, not a multiple of B*T",
                 inputs[0]);
    return inputs[0];
}

static int compare_ints(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// Reads one epoch and checks it is a permutation of `expected` (sorted).
static void read_epoch(DataLoader *dl, int *order, const int *expected, int n) {
    int *sorted = xmalloc(n * sizeof(int));
    for (int i = 0; i < n; i++) sorted[i] = order[i] = next_window(dl);
    qsort(sorted, n, sizeof(int), compare_ints);
    for (int i = 0; i < n; i++)
        cr_assert_eq(sorted[i], expected[i], "the epoch does not visit every window exactly once");
    free(sorted);
}

// ---- order ------------------------------------------------------------------------
Test(dataloader, shuffle_off_is_sequential_and_wraps) {
    write_shard("one.bin", 0, 5, 3);
    DataLoader dl = open_loader("one.bin", 0, 1);
    cr_assert_eq(dataloader_num_windows(&dl), 5);
    for (int epoch = 0; epoch < 3; epoch++)
        for (int w = 0; w < 5; w++) {
            DataPosition pos = dataloader_position(&dl);
            cr_assert(pos.epoch == (uint64_t)epoch && pos.window == (uint64_t)w,
                      "position {%llu, %llu}, expected {%d, %d}", (unsigned long long)pos.epoch,
                      (unsigned long long)pos.window, epoch, w);
            cr_assert_eq(next_window(&dl), w * BT);
        }
    dataloader_free(&dl);
}

Test(dataloader, shuffled_epochs_visit_every_window_once_in_new_orders) {
    enum { W = 37 };
    write_shard("one.bin", 0, W, 0);
    DataLoader dl = open_loader("one.bin", 1, 1234);
    int expected[W], orders[3][W];
    for (int w = 0; w < W; w++) expected[w] = w * BT;
    for (int e = 0; e < 3; e++) read_epoch(&dl, orders[e], expected, W);
    cr_assert_neq(memcmp(orders[0], expected, sizeof(expected)), 0, "epoch 0 is not shuffled");
    cr_assert_neq(memcmp(orders[0], orders[1], sizeof(expected)), 0, "epochs 0 and 1 agree");
    cr_assert_neq(memcmp(orders[1], orders[2], sizeof(expected)), 0, "epochs 1 and 2 agree");
    dataloader_free(&dl);
}

Test(dataloader, same_seed_gives_the_same_batches) {
    write_shard("s_0.bin", 0, 7, 2);
    write_shard("s_1.bin", 10000, 4, 0);
    DataLoader a = open_loader("s_*.bin", 1, 99), b = open_loader("s_*.bin", 1, 99);
    int32_t ia[BT], ta[BT], ib[BT], tb[BT];
    char err[ERR_LEN];
    for (int i = 0; i < 3 * 11; i++) {
        cr_assert_eq(dataloader_next(&a, ia, ta, err), 0, "%s", err);
        cr_assert_eq(dataloader_next(&b, ib, tb, err), 0, "%s", err);
        cr_assert_eq(memcmp(ia, ib, sizeof(ia)), 0, "batch %d differs", i);
        cr_assert_eq(memcmp(ta, tb, sizeof(ta)), 0, "batch %d differs", i);
    }
    dataloader_free(&a);
    dataloader_free(&b);
}

Test(dataloader, different_seeds_give_different_orders) {
    enum { W = 20 };
    write_shard("one.bin", 0, W, 0);
    DataLoader a = open_loader("one.bin", 1, 1), b = open_loader("one.bin", 1, 2);
    int same = 1;
    for (int i = 0; i < W; i++) same &= next_window(&a) == next_window(&b);
    cr_assert_not(same, "seeds 1 and 2 gave the same order");
    dataloader_free(&a);
    dataloader_free(&b);
}

// ---- several shards -------------------------------------------------------------------
static const int three_shard_windows[3] = {3, 5, 1};

static void write_three_shards(void) {
    for (int s = 0; s < 3; s++) {
        char name[32];
        snprintf(name, sizeof(name), "train_%d.bin", s);
        write_shard(name, 10000 * s, three_shard_windows[s], s);
    }
    write_shard("val_0.bin", 30000, 2, 0);  // must not match train_*.bin
}

// Every window of the three shards, sorted: 9 of them.
static void three_shard_expected(int expected[9]) {
    int k = 0;
    for (int s = 0; s < 3; s++)
        for (int w = 0; w < three_shard_windows[s]; w++) expected[k++] = 10000 * s + w * BT;
}

Test(dataloader, several_shards_in_sorted_order_without_shuffle) {
    write_three_shards();
    DataLoader dl = open_loader("train_*.bin", 0, 0);
    cr_assert_eq(dl.num_shards, 3);
    cr_assert_eq(dataloader_num_windows(&dl), 9);
    int expected[9];
    three_shard_expected(expected);
    for (int epoch = 0; epoch < 2; epoch++)
        for (int i = 0; i < 9; i++) cr_assert_eq(next_window(&dl), expected[i]);
    dataloader_free(&dl);
}

Test(dataloader, several_shards_shuffled_one_shard_at_a_time) {
    write_three_shards();
    DataLoader dl = open_loader("train_*.bin", 1, 5);
    int expected[9], order[9], sorted_epochs = 0;
    three_shard_expected(expected);
    for (int epoch = 0; epoch < 6; epoch++) {
        read_epoch(&dl, order, expected, 9);
        // A shard, once left, is not come back to within the epoch: only the
        // current shard need be in memory.
        int changes = 0;
        for (int i = 1; i < 9; i++) changes += order[i] / 10000 != order[i - 1] / 10000;
        cr_assert_eq(changes, 2, "epoch %d switches shards %d times", epoch, changes);
        sorted_epochs += order[0] / 10000 == 0 && order[8] / 10000 == 2;
    }
    cr_assert_lt(sorted_epochs, 6, "the shards themselves are never shuffled");
    dataloader_free(&dl);
}

// ---- resume ------------------------------------------------------------------------
// A fresh loader seeked to where another stood after k batches sees the same
// batches from there on, well past the next epoch boundary.
static void check_resume_after(int k) {
    DataLoader a = open_loader("train_*.bin", 1, 77);
    for (int i = 0; i < k; i++) next_window(&a);
    DataPosition pos = dataloader_position(&a);
    cr_assert_eq(pos.epoch, (uint64_t)(k / 9));
    cr_assert_eq(pos.window, (uint64_t)(k % 9));

    DataLoader b = open_loader("train_*.bin", 1, 77);
    char err[ERR_LEN];
    cr_assert_eq(dataloader_seek(&b, pos, err), 0, "%s", err);
    for (int i = 0; i < 2 * 9 + 1; i++)
        cr_assert_eq(next_window(&b), next_window(&a), "after %d batches, then %d more", k, i);
    dataloader_free(&a);
    dataloader_free(&b);
}

Test(dataloader, resume_gives_the_same_batches) {
    write_three_shards();
    int ks[] = {0, 1, 3, 4, 8, 9, 10, 12, 17, 25};  // shard and epoch boundaries included
    for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) check_resume_after(ks[i]);
}

// ---- ranks -------------------------------------------------------------------------
// N ranks, each stepping once, read together what one loader reads in N
// steps, rank r the r-th of them, through shard and epoch boundaries; and
// every rank stands at the single loader's position after them.
static void check_ranks_share_the_order(int world) {
    DataLoader one = open_loader("train_*.bin", 1, 31);
    DataLoader ranks[4];
    for (int r = 0; r < world; r++) {
        ranks[r] = open_loader("train_*.bin", 1, 31);
        dataloader_set_rank(&ranks[r], r, world);
    }
    for (int step = 0; step < 2 * 9 + 2; step++)
        for (int r = 0; r < world; r++) {
            cr_assert_eq(next_window(&ranks[r]), next_window(&one), "step %d, rank %d of %d",
                         step, r, world);
            if (r + 1 < world) continue;
            for (int q = 0; q < world; q++) {
                DataPosition a = dataloader_position(&ranks[q]), b = dataloader_position(&one);
                cr_assert(a.epoch == b.epoch && a.window == b.window,
                          "rank %d of %d is at %llu:%llu, the order at %llu:%llu", q, world,
                          (unsigned long long)a.epoch, (unsigned long long)a.window,
                          (unsigned long long)b.epoch, (unsigned long long)b.window);
            }
        }
    for (int r = 0; r < world; r++) dataloader_free(&ranks[r]);
    dataloader_free(&one);
}

Test(dataloader, ranks_read_their_share_of_one_order) {
    write_three_shards();
    for (int world = 1; world <= 4; world++) check_ranks_share_the_order(world);
}

// A rank resumed at a position reads what it would have read.
Test(dataloader, a_rank_resumes_at_the_shared_position) {
    write_three_shards();
    DataLoader a = open_loader("train_*.bin", 1, 9), b = open_loader("train_*.bin", 1, 9);
    dataloader_set_rank(&a, 2, 3);
    for (int i = 0; i < 5; i++) next_window(&a);
    char err[ERR_LEN];
    cr_assert_eq(dataloader_seek(&b, dataloader_position(&a), err), 0, "%s", err);
    dataloader_set_rank(&b, 2, 3);
    for (int i = 0; i < 7; i++) cr_assert_eq(next_window(&b), next_window(&a), "batch %d", i);
    dataloader_free(&a);
    dataloader_free(&b);
}

Test(dataloader, reset_goes_back_to_the_start) {
    write_three_shards();
    DataLoader a = open_loader("train_*.bin", 1, 3), fresh = open_loader("train_*.bin", 1, 3);
    for (int i = 0; i < 13; i++) next_window(&a);
    dataloader_reset(&a);
    DataPosition pos = dataloader_position(&a);
    cr_assert(pos.epoch == 0 && pos.window == 0);
    for (int i = 0; i < 12; i++) cr_assert_eq(next_window(&a), next_window(&fresh));
    dataloader_free(&a);
    dataloader_free(&fresh);
}

Test(dataloader, seek_past_the_epoch_is_refused) {
    write_three_shards();
    DataLoader dl = open_loader("train_*.bin", 1, 3);
    char err[ERR_LEN];
    DataPosition pos = {.epoch = 0, .window = 9};
    cr_assert_eq(dataloader_seek(&dl, pos, err), -1);
    cr_assert(strstr(err, "window 9 of an epoch of 9"), "error: %s", err);
    dataloader_free(&dl);
}

// ---- bad input ------------------------------------------------------------------------
static void assert_init_fails_with(const char *pattern, const char *piece1, const char *piece2) {
    DataLoader dl;
    char err[ERR_LEN];
    int rc = dataloader_init(&dl, tmp_path(pattern), B, T, VOCAB, 1, 0, err);
    cr_assert_eq(rc, -1, "expected a failure");
    assert_error_says(err, piece1, piece2);
}

Test(dataloader, no_matching_file_names_the_pattern) {
    assert_init_fails_with("nothing_*.bin", "nothing_*.bin", "no file matches");
}

Test(dataloader, a_shard_too_small_for_one_window_is_named) {
    write_shard("d_0.bin", 0, 2, 0);
    int32_t few[BT];  // B*T tokens: one short of a window
    for (int i = 0; i < BT; i++) few[i] = i;
    char err[ERR_LEN];
    cr_assert_eq(shard_write(tmp_path("d_1.bin"), few, BT, err), 0, "%s", err);
    assert_init_fails_with("d_*.bin", "d_1.bin", "too few for one window of B*T + 1 = 9");
}

Test(dataloader, a_bad_shard_header_is_named) {
    write_shard("d_0.bin", 0, 2, 0);
    write_shard("d_1.bin", 0, 2, 0);
    patch_bytes(tmp_path("d_1.bin"), 0, "", 1);  // zeroes the magic's lowest byte
    assert_init_fails_with("d_*.bin", "d_1.bin", "bad magic");
}

Test(dataloader, a_token_outside_the_vocabulary_is_named_when_its_shard_loads) {
    write_shard("one.bin", 100, 3, 0);  // tokens 100 .. 124
    DataLoader dl;
    char err[ERR_LEN];
    cr_assert_eq(dataloader_init(&dl, tmp_path("one.bin"), B, T, 110, 0, 0, err), 0, "%s", err);
    int32_t inputs[BT], targets[BT];
    cr_assert_eq(dataloader_next(&dl, inputs, targets, err), -1);
    cr_assert(strstr(err, "one.bin") && strstr(err, "token 10 is 110"), "error: %s", err);
    DataPosition pos = dataloader_position(&dl);
    cr_assert(pos.epoch == 0 && pos.window == 0, "a failed batch must not advance");
    dataloader_free(&dl);
}

Test(dataloader, batch_shape_must_be_positive) {
    write_shard("one.bin", 0, 3, 0);
    DataLoader dl;
    char err[ERR_LEN];
    cr_assert_eq(dataloader_init(&dl, tmp_path("one.bin"), 0, T, VOCAB, 0, 0, err), -1);
    cr_assert(strstr(err, "B = 0"), "error: %s", err);
}
