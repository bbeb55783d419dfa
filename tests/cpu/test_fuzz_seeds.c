// test_fuzz_seeds.c: the fuzzers' seeds (tests/fuzz/fuzz_seeds.h) still
// reach what they are there for, read as their harnesses read them, with
// the real readers: the train_state harness's version 3 payload, of chapter
// 10's layout and of a one-tensor mask, and version 4's FP8 state, with
// both kinds of moments; the debug_state harness's tied and
// untied shapes and its "bad model config". A fuzzer whose seeds stop short
// of a path finds nothing there and says nothing (issue 22: 1.1M inputs
// without one version 3 payload); this test says so.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <stdlib.h>

#include "../fuzz/fuzz_seeds.h"
#include "file_helpers.h"

TestSuite(fuzz_seeds, .init = make_tmpdir, .fini = remove_tmpdir);

// The seed's bytes (free them), written where a test can look at them.
static uint8_t *seed_bytes(const char *harness, const char *name, size_t *len) {
    const char *path = tmp_path(name);
    char err[ERR_LEN];
    cr_assert_eq(fuzz_seed_write(harness, name, path, err), 0, "%s", err);
    uint8_t *data = (uint8_t *)read_file(path, len, err);
    cr_assert_not_null(data, "%s", err);
    return data;
}

// ---- train_state ------------------------------------------------------------------

// Reads the seed as fuzz_train_state.c does: for the shape its header's count
// picks, with train_state_read_run (its FP8 state into *fp8, or left out with
// fp8 NULL). Returns that shape; *version is the header's.
static GPT2Config read_state_seed(const char *name, AdamState *s, Fp8State *fp8,
                                  int *version) {
    size_t len;
    uint8_t *data = seed_bytes("train_state", name, &len);
    GPT2Config cfg = fuzz_train_state_config(data, len);
    int32_t header[2];
    memcpy(header, data, sizeof header);
    *version = header[1];
    free(data);
    TrainProgress p;
    char err[ERR_LEN];
    cr_assert_eq(train_state_read_run(tmp_path(name), &cfg, &p, s, fp8, err), 0, "%s: %s", name,
                 err);
    cr_assert_eq(p.step, 3);
    return cfg;
}

Test(fuzz_seeds, the_8bit_state_is_chapter_10_s_version_3) {
    AdamState s;
    int version;
    GPT2Config cfg = read_state_seed("8bit", &s, NULL, &version);
    cr_assert_eq(version, TRAIN_STATE_VERSION_8BIT);
    GPT2Config q8 = fuzz_8bit_config();
    cr_assert(memcmp(&cfg, &q8, sizeof cfg) == 0, "read for fuzz_8bit_config's shape");
    const unsigned want = 1u << PARAM_FCW | 1u << PARAM_FCPROJW;
    cr_assert_eq(adam_layout_mask(&s.layout), want, "mask 0x%x, expected fcw and fcprojw (0x%x)",
                 adam_layout_mask(&s.layout), want);
    // What chapter 10 itself quantizes at that shape: the seed is its layout.
    AdamLayout ch10 = adam_layout_for(&cfg, 1);
    cr_assert_eq(adam_layout_mask(&ch10), want, "chapter 10 quantizes 0x%x at C = %d",
                 adam_layout_mask(&ch10), cfg.channels);
    cr_assert_eq(s.layout.q8_blocks, 2 * 4096 / 256);
    adam_state_free(&s);
}

Test(fuzz_seeds, the_tiny_8bit_state_is_version_3_with_one_tensor) {
    AdamState s;
    int version;
    GPT2Config cfg = read_state_seed("8bit_tiny", &s, NULL, &version);
    cr_assert_eq(version, TRAIN_STATE_VERSION_8BIT);
    cr_assert_eq(cfg.channels, fuzz_tiny_config().channels, "read for the tiny shape");
    cr_assert_eq(adam_layout_mask(&s.layout), 1u << PARAM_QKVW, "mask 0x%x, expected qkvw's",
                 adam_layout_mask(&s.layout));
    cr_assert_eq(s.layout.q8_blocks, 1);
    adam_state_free(&s);
}

Test(fuzz_seeds, the_fp32_state_is_version_2) {
    AdamState s;
    int version;
    read_state_seed("fp32", &s, NULL, &version);
    cr_assert_eq(version, TRAIN_STATE_VERSION);
    cr_assert_eq(s.layout.q8_values, 0);
    adam_state_free(&s);
}

// Chapter 13's version 4, with fp32 moments and with 8-bit ones: both reach
// the FP8 state's payload, one layer's 12 tensors of 16 amaxes.
Test(fuzz_seeds, the_fp8_states_are_chapter_13_s_version_4) {
    const char *names[] = {"fp8", "fp8_8bit_tiny"};
    const unsigned masks[] = {0, 1u << PARAM_QKVW};
    for (int i = 0; i < 2; i++) {
        AdamState s;
        Fp8State fp8;
        int version;
        GPT2Config cfg = read_state_seed(names[i], &s, &fp8, &version);
        cr_assert_eq(version, TRAIN_STATE_VERSION_FP8, "%s", names[i]);
        cr_assert_eq(cfg.channels, fuzz_tiny_config().channels, "read for the tiny shape");
        cr_assert_eq(adam_layout_mask(&s.layout), masks[i], "%s: mask 0x%x", names[i],
                     adam_layout_mask(&s.layout));
        cr_assert(fp8.tensors == TRAIN_STATE_FP8_PER_LAYER && fp8.history == 16 &&
                      fp8.history_ready == 1,
                  "%s: %d FP8 tensors of %d, ready %d", names[i], fp8.tensors, fp8.history,
                  fp8.history_ready);
        adam_state_free(&s), fp8_state_free(&fp8);
    }
}

// ---- debug_state ------------------------------------------------------------------

// Reads the seed as fuzz_debug_state.c does: the shape from its first
// FUZZ_CONFIG_BYTES bytes, the rest the file. Returns debug_state_read's rc.
static int read_debug_seed(const char *name, GPT2Config *cfg, DebugState *ds, char *err) {
    size_t len;
    uint8_t *data = seed_bytes("debug_state", name, &len);
    cr_assert_gt(len, FUZZ_CONFIG_BYTES);
    *cfg = fuzz_config_from_bytes(data);
    write_bytes(tmp_path("file"), data + FUZZ_CONFIG_BYTES, len - FUZZ_CONFIG_BYTES);
    free(data);
    return debug_state_read(tmp_path("file"), cfg, ds, err);
}

Test(fuzz_seeds, the_tied_debug_state_reads_with_padding) {
    GPT2Config cfg;
    DebugState ds;
    char err[ERR_LEN];
    cr_assert_eq(read_debug_seed("tied", &cfg, &ds, err), 0, "%s", err);
    cr_assert_eq(cfg.tied, 1);
    cr_assert_gt(cfg.padded_vocab_size, cfg.vocab_size, "padded, so the old layout is told apart");
    debug_state_free(&ds);
}

Test(fuzz_seeds, the_untied_debug_state_reads_with_lm_head) {
    GPT2Config cfg;
    DebugState ds;
    char err[ERR_LEN];
    cr_assert_eq(read_debug_seed("untied", &cfg, &ds, err), 0, "%s", err);
    cr_assert_eq(cfg.tied, 0);
    cr_assert_gt(cfg.padded_vocab_size, cfg.vocab_size);
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(&cfg, sizes);
    cr_assert_gt(sizes[PARAM_LM_HEAD], 0);
    cr_assert_eq(ds.num_grads, gpt2_num_params(&cfg), "lm_head's gradient read too");
    debug_state_free(&ds);
}

Test(fuzz_seeds, the_bad_config_debug_state_is_refused_for_its_shape) {
    GPT2Config cfg;
    DebugState ds;
    char err[ERR_LEN];
    int rc = read_debug_seed("bad_config", &cfg, &ds, err);
    assert_fails_with(rc, err, tmp_path("file"), "bad model config", "divisible by num_heads");
    // Its file is the tied seed's: the shape alone is what is wrong.
    GPT2Config good = fuzz_tiny_config();
    cr_assert_eq(debug_state_read(tmp_path("file"), &good, &ds, err), 0, "%s", err);
    debug_state_free(&ds);
}
