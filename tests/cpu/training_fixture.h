// training_fixture.h: what the CPU and GPU training tests share: a learnable
// corpus in shards of a fresh temporary directory, and a tiny model's options.
#ifndef TRAINING_FIXTURE_H
#define TRAINING_FIXTURE_H

#include <criterion/criterion.h>
#include <stdio.h>

#include "file_helpers.h"
#include "files/shard.h"
#include "train/train_options.h"

// train_000.bin: a fixed random sequence of 29 tokens (V = 64), repeated to
// 4000 tokens; val_000.bin: its first 1000. A model that learns the motif
// predicts far better than chance (ln 64 = 4.16).
static inline void make_learnable_shards(void) {
    make_tmpdir();
    Rng rng;
    rng_seed(&rng, 99);
    int32_t motif[29], tokens[4000];
    for (int i = 0; i < 29; i++) motif[i] = (int32_t)rng_below(&rng, 64);
    for (int i = 0; i < 4000; i++) tokens[i] = motif[i % 29];
    char err[ERR_LEN];
    cr_assert(shard_write(tmp_path("train_000.bin"), tokens, 4000, err) == 0, "%s", err);
    cr_assert(shard_write(tmp_path("val_000.bin"), tokens, 1000, err) == 0, "%s", err);
}

// L=2, H=2, C=32, T=16, V=64; B=4, so 62 windows of B*T per epoch.
static inline TrainOptions tiny_train_options(int steps) {
    TrainOptions o = train_options_default();
    snprintf(o.train_pattern, sizeof o.train_pattern, "%s", tmp_path("train_*.bin"));
    snprintf(o.val_pattern, sizeof o.val_pattern, "%s", tmp_path("val_*.bin"));
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", tmp_path("ckpt"));
    o.model = (GPT2Config){.max_seq_len = 16, .vocab_size = 64, .padded_vocab_size = 64,
                           .num_layers = 2, .num_heads = 2, .channels = 32, .tied = 0};
    o.B = 4;
    o.T = 16;
    o.steps = steps;
    o.lr = (LrSchedule){.max_lr = 1e-2f, .min_lr_fraction = 0.1f, .warmup_steps = 5,
                        .total_steps = steps};
    o.val_every = 10;
    o.val_batches = 2;
    return o;
}

#endif
