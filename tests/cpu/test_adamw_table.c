// test_adamw_table.c: chapter 09's table of tensors (common/optim/adamw_table.h),
// the exercise of chapter 09: every value of every tensor belongs to exactly
// one block of the launch, in its own tensor, found the way the kernel finds
// it (the last tensor whose first_block <= b); empty tensors are left out but
// keep their place in the buffer; the decay flags follow their tensors.
#include <criterion/criterion.h>
#include <stdlib.h>

#include "optim/adamw_table.h"
#include "model/gpt2_config.h"

// The kernel's lookup: the tensor of block b.
static int tensor_of_block(const AdamWTensors *t, unsigned int b) {
    int k = 0;
    while (k + 1 < t->count && b >= t->first_block[k + 1]) k++;
    return k;
}

// Walks the launch block by block, as the kernel does, and counts how often
// each value of the buffer (total values) is updated, and checks that a block
// never leaves its tensor.
static void check_coverage(const AdamWTensors *t, size_t total, size_t per_block) {
    unsigned char *seen = calloc(total, 1);
    for (unsigned int b = 0; b < t->blocks; b++) {
        const int k = tensor_of_block(t, b);
        const size_t start = t->offset[k] + (size_t)(b - t->first_block[k]) * per_block;
        const size_t end = t->offset[k] + t->size[k];
        cr_assert(start < end, "block %u starts past the end of tensor %d: an empty block", b, k);
        for (size_t i = start; i < end && i < start + per_block; i++) {
            cr_assert(i < total);
            seen[i]++;
        }
    }
    for (size_t i = 0; i < total; i++)
        cr_assert_eq(seen[i], 1, "value %zu is updated %d times", i, seen[i]);
    free(seen);
}

Test(adamw_table, odd_sizes_and_an_empty_tensor) {
    const size_t sizes[] = {4099, 1, 0, 4, 5000, 8, 17, 3001};
    const int decay[] = {1, 0, 1, 0, 1, 1, 0, 1};
    size_t total = 0;
    for (int i = 0; i < 8; i++) total += sizes[i];
    AdamWTensors t;
    adamw_table_build(&t, sizes, decay, 8, 256);
    cr_assert_eq(t.count, 7, "the empty tensor is left out");
    cr_assert_eq(t.offset[2], 4100, "the empty tensor still has its place: 4099 + 1 + 0");
    cr_assert_eq(t.size[2], 4);
    cr_assert_eq(t.decay[2], 0);
    cr_assert_eq(t.decay[3], 1);
    cr_assert_eq(t.first_block[1], 17, "ceil(4099 / 256) blocks before the second tensor");
    cr_assert_eq(t.blocks, 17 + 1 + 1 + 20 + 1 + 1 + 12);
    check_coverage(&t, total, 256);
}

// GPT-2 124M tied, at chapter 09's bf16 blocks of 2048 values: 16 tensors,
// lm_head left out, every one of the 124.48M values once.
Test(adamw_table, gpt2_124m_tied) {
    GPT2Config c = {.max_seq_len = 1024, .vocab_size = 50257, .padded_vocab_size = 50304,
                    .num_layers = 12, .num_heads = 12, .channels = 768, .tied = 1};
    size_t sizes[NUM_PARAM_TENSORS];
    int decay[NUM_PARAM_TENSORS];
    gpt2_param_sizes(&c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) decay[i] = gpt2_param_is_decayed(i);
    AdamWTensors t;
    adamw_table_build(&t, sizes, decay, NUM_PARAM_TENSORS, 2048);
    cr_assert_eq(t.count, NUM_PARAM_TENSORS - 1, "every tensor but the tied lm_head");
    cr_assert_eq(t.offset[0], 0);
    cr_assert_eq(t.size[0], (size_t)50304 * 768, "wte first");
    check_coverage(&t, gpt2_num_params(&c), 2048);
}

Test(adamw_table, nothing_to_update) {
    const size_t sizes[] = {0, 0};
    const int decay[] = {1, 1};
    AdamWTensors t;
    adamw_table_build(&t, sizes, decay, 2, 1024);
    cr_assert_eq(t.count, 0);
    cr_assert_eq(t.blocks, 0);
}
