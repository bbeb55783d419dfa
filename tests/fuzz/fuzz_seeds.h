// fuzz_seeds.h: the files the binary-format harnesses start from, each
// written by our own writers at a shape of fuzz_shapes.h. A fuzzer that
// starts from valid files reaches the checks past the header at once; one
// that starts from nothing rarely gets past the magic number, and one whose
// seeds are all of one kind rarely finds the others: the train_state
// harness once ran 1.1M inputs without reading a version 3 payload, since
// its one seed was version 2 and a version 3 file is a different length.
//
// make_seeds.c writes every seed; tests/cpu/test_fuzz_seeds.c reads them
// back with the real readers and checks that each still reaches what it is
// here for (a version 3 payload, an untied shape, a bad shape), so that a
// change to a writer or a shape cannot quietly take that from the fuzzer.
// Everything is static: each includer has its own copy.
#ifndef FUZZ_SEEDS_H
#define FUZZ_SEEDS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "optim/adam_state.h"
#include "files/checkpoint.h"
#include "files/debug_state.h"
#include "fuzz_shapes.h"
#include "files/shard.h"
#include "files/train_state.h"
#include "util/util.h"

// n values that are not all alike: scale * (i mod 13) - 0.5.
static float *fuzz_seed_ramp(size_t n, float scale) {
    float *v = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = scale * (float)(i % 13) - 0.5f;
    return v;
}

static int seed_checkpoint(const char *path, char *err) {
    GPT2Config cfg = fuzz_tiny_config();
    float *params = fuzz_seed_ramp(gpt2_num_params(&cfg), 0.02f);
    int rc = checkpoint_write(path, &cfg, params, err);
    free(params);
    return rc;
}

static int seed_shard(const char *path, char *err) {
    int32_t tokens[] = {1, 2, 3, 50256, 0, 6};
    return shard_write(path, tokens, 6, err);
}

// ---- debug states: the shape's bytes, then the file ------------------------------

// The shape of the untied seed: the tiny shape untied, with two layers and
// one head, so that the layers' and the heads' counts vary too.
static GPT2Config fuzz_untied_config(void) {
    GPT2Config cfg = fuzz_tiny_config();
    cfg.tied = 0;
    cfg.num_layers = 2;
    cfg.num_heads = 1;
    return cfg;
}

// A shape the reader must refuse ("bad model config"): 3 heads do not divide
// 4 channels. Its seed's file is the tiny shape's, valid but for that: one
// byte from a valid input, and the fuzzer gets both sides of the check.
static GPT2Config fuzz_bad_config(void) {
    GPT2Config cfg = fuzz_tiny_config();
    cfg.num_heads = 3;
    return cfg;
}

// A debug state of one batch of 1 x 2 for `file_cfg`, written to path, then
// rewritten with `cfg`'s bytes (fuzz_config_to_bytes) in front.
static int write_debug_seed(const char *path, const GPT2Config *cfg,
                            const GPT2Config *file_cfg, char *err) {
    enum { B = 1, T = 2 };
    int32_t x[B * T] = {1, 2}, y[B * T] = {2, 3};
    size_t n = gpt2_num_params(file_cfg);
    DebugState ds = {.B = B, .T = T, .x = x, .y = y, .loss = 1.5f, .num_grads = n};
    ds.logits = fuzz_seed_ramp((size_t)B * T * file_cfg->vocab_size, 0.1f);
    ds.grads = fuzz_seed_ramp(n, 0.01f);
    // llm.c writes the padding rows zero; so does the seed.
    debug_grads_from_param_layout(file_cfg, ds.grads, ds.grads);
    int rc = debug_state_write(path, file_cfg, &ds, err);
    free(ds.logits);
    free(ds.grads);
    if (rc) return -1;
    uint8_t shape[FUZZ_CONFIG_BYTES];
    if (fuzz_config_to_bytes(cfg, shape)) return fail(err, "%s: a shape too large", path);
    size_t len;
    char *file = read_file(path, &len, err);
    if (file == NULL) return -1;
    FILE *f = fopen(path, "wb");
    rc = f == NULL || fwrite(shape, 1, sizeof shape, f) != sizeof shape ||
         fwrite(file, 1, len, f) != len;
    if (f != NULL && fclose(f) != 0) rc = 1;
    free(file);
    return rc ? fail(err, "%s: cannot write", path) : 0;
}

static int seed_debug_tied(const char *path, char *err) {
    GPT2Config cfg = fuzz_tiny_config();
    return write_debug_seed(path, &cfg, &cfg, err);
}

static int seed_debug_untied(const char *path, char *err) {
    GPT2Config cfg = fuzz_untied_config();
    return write_debug_seed(path, &cfg, &cfg, err);
}

static int seed_debug_bad_config(const char *path, char *err) {
    GPT2Config bad = fuzz_bad_config(), tiny = fuzz_tiny_config();
    return write_debug_seed(path, &bad, &tiny, err);
}

// ---- training states --------------------------------------------------------------

// The state of step 3 of a model of shape cfg whose moments are in layout l
// (the 8-bit ones quantized from fp32 moments, as chapter 10 saves them),
// with chapter 13's FP8 state when fp8 is not NULL: written by the trainer's
// own writer, as version 2 or 3 by the layout, or 4 with an FP8 state.
static int write_run_seed(const char *path, const GPT2Config *cfg, const AdamLayout *l,
                          const Fp8State *fp8, char *err) {
    size_t n = gpt2_num_params(cfg);
    float *params = fuzz_seed_ramp(n, 0.02f), *m = fuzz_seed_ramp(n, 0.001f);
    float *v = fuzz_seed_ramp(n, 0.0f);
    for (size_t i = 0; i < n; i++) v[i] = 1e-4f * (float)(1 + i % 7);  // never negative
    TrainProgress p = {.step = 3, .B = 1, .T = 2,
                       .model_checksum = checkpoint_params_checksum(params, n)};
    AdamState s;
    adam_state_alloc(&s, l);
    adam_state_from_full(&s, m, v);
    AtomicFile af;
    int rc = train_state_write_run_unrenamed(&af, path, &p, &s, fp8, err);
    if (rc == 0) rc = atomic_commit(&af, err);
    adam_state_free(&s);
    free(params);
    free(m);
    free(v);
    return rc;
}

static int write_state_seed(const char *path, const GPT2Config *cfg, const AdamLayout *l,
                            char *err) {
    return write_run_seed(path, cfg, l, NULL, err);
}

// fp32 moments, version 2, of the tiny shape.
static int seed_state_fp32(const char *path, char *err) {
    GPT2Config cfg = fuzz_tiny_config();
    AdamLayout l = adam_layout_for(&cfg, 0);
    return write_state_seed(path, &cfg, &l, err);
}

// Version 3 as chapter 10 writes it, at the smallest shape where it
// quantizes anything: fcw's and fcprojw's moments 8-bit (mask 0x1400).
static int seed_state_8bit(const char *path, char *err) {
    GPT2Config cfg = fuzz_8bit_config();
    AdamLayout l = adam_layout_for(&cfg, 1);
    return write_state_seed(path, &cfg, &l, err);
}

// Version 3 at the tiny shape, with one tensor's moments 8-bit: qkvw's, 48
// values in one block of 256 (mask 0x10). Chapter 10 never quantizes a
// tensor so small, but the reader takes the mask from the file, and this
// file is 3.5 KB, not 57: a sixteenth of the bytes for the fuzzer to mutate.
static int seed_state_8bit_tiny(const char *path, char *err) {
    GPT2Config cfg = fuzz_tiny_config();
    AdamLayout l = adam_layout_masked(&cfg, 1u << PARAM_QKVW);
    return write_state_seed(path, &cfg, &l, err);
}

// Version 4 as chapter 13 writes it at the tiny shape (one layer: 12 FP8
// tensors of 16 amaxes, 864 bytes), with the moments of layout l: scales
// that are powers of two, histories that are not all alike, history_ready 1.
static int write_fp8_seed(const char *path, const AdamLayout *l, char *err) {
    GPT2Config cfg = fuzz_tiny_config();
    Fp8State fp8;
    fp8_state_alloc(&fp8, cfg.num_layers * TRAIN_STATE_FP8_PER_LAYER, 16);
    fp8.history_ready = 1;
    for (int i = 0; i < fp8.tensors; i++) {
        float *t = fp8_state_tensor(&fp8, i);
        t[0] = (float)(1 << (i % 4)) / 8.0f;
        for (int h = 0; h < fp8.history; h++) t[2 + h] = 0.01f * (float)(1 + (i + h) % 9);
    }
    int rc = write_run_seed(path, &cfg, l, &fp8, err);
    fp8_state_free(&fp8);
    return rc;
}

// Version 4 with fp32 moments (the header alone sets its length).
static int seed_state_fp8(const char *path, char *err) {
    GPT2Config cfg = fuzz_tiny_config();
    AdamLayout l = adam_layout_for(&cfg, 0);
    return write_fp8_seed(path, &l, err);
}

// Version 4 with qkvw's moments 8-bit, as the tiny version 3 seed: chapter
// 13 runs chapter 10's optimizer, so its states have both.
static int seed_state_fp8_8bit_tiny(const char *path, char *err) {
    GPT2Config cfg = fuzz_tiny_config();
    AdamLayout l = adam_layout_masked(&cfg, 1u << PARAM_QKVW);
    return write_fp8_seed(path, &l, err);
}

// ---- the seeds --------------------------------------------------------------------
typedef struct {
    const char *harness;  // tests/fuzz/fuzz_HARNESS.c
    const char *name;     // its file's name in build/fuzz/seeds/HARNESS/
    int (*write)(const char *path, char *err);
} FuzzSeed;

static const FuzzSeed fuzz_seeds[] = {
    {"checkpoint", "tiny", seed_checkpoint},
    {"shard", "six_tokens", seed_shard},
    {"debug_state", "tied", seed_debug_tied},
    {"debug_state", "untied", seed_debug_untied},
    {"debug_state", "bad_config", seed_debug_bad_config},
    {"train_state", "fp32", seed_state_fp32},
    {"train_state", "8bit", seed_state_8bit},
    {"train_state", "8bit_tiny", seed_state_8bit_tiny},
    {"train_state", "fp8", seed_state_fp8},
    {"train_state", "fp8_8bit_tiny", seed_state_fp8_8bit_tiny},
};
enum { FUZZ_NUM_SEEDS = sizeof fuzz_seeds / sizeof fuzz_seeds[0] };

// Writes the seed `name` of `harness` to path; dies if there is none.
static inline int fuzz_seed_write(const char *harness, const char *name, const char *path,
                                  char *err) {
    for (int i = 0; i < FUZZ_NUM_SEEDS; i++)
        if (strcmp(fuzz_seeds[i].harness, harness) == 0 && strcmp(fuzz_seeds[i].name, name) == 0)
            return fuzz_seeds[i].write(path, err);
    die("fuzz_seeds.h: no seed %s/%s", harness, name);
}
#endif
