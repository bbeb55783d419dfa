// test_debug_state.c: llm.c's debug state round-trips (tied and untied, padded
// and not), its gradients have the checkpoint's padded layout, a state written
// the way llm.c writes one is read, and every kind of bad file is refused with
// a message naming the file and the problem.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/debug_state.h"
#include "file_helpers.h"
#include "llm_c_writer.h"
#include "util/util.h"

TestSuite(debug_state, .init = make_tmpdir, .fini = remove_tmpdir);

// ---- tiny models and batches --------------------------------------------------------
static GPT2Config tiny_config(int tied, int padded) {
    GPT2Config c = {.max_seq_len = 8, .vocab_size = 60, .padded_vocab_size = padded ? 64 : 60,
                    .num_layers = 2, .num_heads = 2, .channels = 8, .tied = tied};
    return c;
}

enum { B = 2, T = 4 };

// A state with made-up but valid contents; release with debug_state_free.
static DebugState make_state(const GPT2Config *cfg, uint64_t seed) {
    DebugState ds = {.B = B, .T = T, .loss = 3.25f};
    size_t n = B * T, V = cfg->vocab_size;
    Rng rng;
    rng_seed(&rng, seed);
    ds.x = xmalloc(n * sizeof(int32_t));
    ds.y = xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        ds.x[i] = (int32_t)rng_below(&rng, V);
        ds.y[i] = (int32_t)rng_below(&rng, V);
    }
    ds.logits = xmalloc(n * V * sizeof(float));
    for (size_t i = 0; i < n * V; i++) ds.logits[i] = rng_normal(&rng);
    ds.num_grads = debug_grads_size(cfg);
    ds.grads = xmalloc(ds.num_grads * sizeof(float));
    for (size_t i = 0; i < ds.num_grads; i++) ds.grads[i] = rng_normal(&rng);
    return ds;
}

static const char *write_good_state(const GPT2Config *cfg) {
    DebugState ds = make_state(cfg, 11);
    const char *path = tmp_path("state.bin");
    char err[ERR_LEN];
    cr_assert_eq(debug_state_write(path, cfg, &ds, err), 0, "%s", err);
    debug_state_free(&ds);
    return path;
}

// Where each part starts in the file, in 4-byte words (patch_int32's and
// patch_float's unit).
static long x_at(void) { return DEBUG_STATE_HEADER_INTS; }
static long y_at(void) { return x_at() + B * T; }
static long logits_at(void) { return y_at() + B * T; }
static long loss_at(const GPT2Config *cfg) { return logits_at() + B * T * cfg->vocab_size; }
static long grads_at(const GPT2Config *cfg) { return loss_at(cfg) + 1; }

static int read_state(const char *path, const GPT2Config *cfg, char *err) {
    DebugState ds;
    int rc = debug_state_read(path, cfg, &ds, err);
    if (rc != 0)
        cr_assert(ds.x == NULL && ds.y == NULL && ds.logits == NULL && ds.grads == NULL,
                  "a failed read must leave the state empty");
    debug_state_free(&ds);
    return rc;
}

// ---- round trips ------------------------------------------------------------------
static void check_round_trip(int tied, int padded) {
    GPT2Config cfg = tiny_config(tied, padded);
    DebugState ds = make_state(&cfg, 5);
    const char *path = tmp_path("state.bin");
    char err[ERR_LEN];
    cr_assert_eq(debug_state_write(path, &cfg, &ds, err), 0, "%s", err);
    cr_assert_eq(file_size(path), 4 * (grads_at(&cfg) + (long)ds.num_grads));

    DebugState got;
    cr_assert_eq(debug_state_read(path, &cfg, &got, err), 0, "%s", err);
    size_t n = B * T, V = cfg.vocab_size;
    cr_assert_eq(got.B, B);
    cr_assert_eq(got.T, T);
    cr_assert_eq(memcmp(got.x, ds.x, n * sizeof(int32_t)), 0);
    cr_assert_eq(memcmp(got.y, ds.y, n * sizeof(int32_t)), 0);
    cr_assert_eq(memcmp(got.logits, ds.logits, n * V * sizeof(float)), 0);
    cr_assert_eq(got.loss, ds.loss);
    cr_assert_eq(got.num_grads, ds.num_grads);
    cr_assert_eq(memcmp(got.grads, ds.grads, ds.num_grads * sizeof(float)), 0);

    const char *again = tmp_path("again.bin");
    cr_assert_eq(debug_state_write(again, &cfg, &got, err), 0, "%s", err);
    assert_same_bytes(path, again);
    debug_state_free(&ds);
    debug_state_free(&got);
}

Test(debug_state, round_trip_tied_unpadded) { check_round_trip(1, 0); }
Test(debug_state, round_trip_tied_padded) { check_round_trip(1, 1); }
Test(debug_state, round_trip_untied_unpadded) { check_round_trip(0, 0); }
Test(debug_state, round_trip_untied_padded) { check_round_trip(0, 1); }

Test(debug_state, header_is_llm_c_s) {
    GPT2Config cfg = tiny_config(1, 1);
    const char *path = write_good_state(&cfg);
    int32_t want[4] = {20240327, 2, B, T};
    assert_header(path, DEBUG_STATE_HEADER_INTS, want, 4);
}

// ---- the gradients' layout: the checkpoint's ---------------------------------------
Test(debug_state, gradients_have_the_checkpoint_s_padded_layout) {
    size_t C = 8;
    for (int tied = 0; tied <= 1; tied++) {
        GPT2Config cfg = tiny_config(tied, 1);
        cr_assert_eq(debug_grads_size(&cfg), gpt2_num_params(&cfg));
        size_t sizes[NUM_PARAM_TENSORS], params[NUM_PARAM_TENSORS], real[NUM_PARAM_TENSORS];
        debug_grad_sizes(&cfg, sizes);
        gpt2_param_sizes(&cfg, params);
        debug_grad_real_sizes(&cfg, real);
        cr_assert_eq(memcmp(sizes, params, sizeof sizes), 0);
        cr_assert_eq(sizes[0], 64 * C, "wte has Vp rows");
        cr_assert_eq(real[0], 60 * C, "of which V are real");
        cr_assert_eq(real[PARAM_LM_HEAD], tied ? 0 : 60 * C);
        for (int t = 1; t < PARAM_LM_HEAD; t++) cr_assert_eq(real[t], sizes[t], "tensor %d", t);
    }
}

Test(debug_state, copies_zero_the_padding_rows) {
    for (int tied = 0; tied <= 1; tied++) {
        GPT2Config cfg = tiny_config(tied, 1);
        DebugState ds = make_state(&cfg, 9);  // random padding rows too
        size_t np = gpt2_num_params(&cfg), C = cfg.channels, V = cfg.vocab_size;
        size_t sizes[NUM_PARAM_TENSORS];
        gpt2_param_sizes(&cfg, sizes);
        float *model = xmalloc(np * sizeof(float)), *file = xmalloc(np * sizeof(float));
        debug_grads_to_param_layout(&cfg, ds.grads, model);
        debug_grads_from_param_layout(&cfg, model, file);
        // Real rows as they were, padding rows zero, every tensor where it was.
        size_t head = np - sizes[PARAM_LM_HEAD];
        for (size_t i = 0; i < np; i++) {
            int padding = (i >= V * C && i < sizes[0]) || (!tied && i >= head + V * C);
            cr_assert_eq(model[i], padding ? 0.0f : ds.grads[i], "element %zu", i);
            cr_assert_eq(file[i], model[i], "element %zu", i);
        }
        // One tensor at a time gives the same as the whole buffer.
        size_t offset = 0;
        for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
            float *one = xmalloc((sizes[t] + 1) * sizeof(float));
            debug_grad_copy_out(&cfg, ds.grads, t, one);
            cr_assert_eq(memcmp(one, model + offset, sizes[t] * sizeof(float)), 0, "tensor %d", t);
            offset += sizes[t];
            free(one);
        }
        free(model);
        free(file);
        debug_state_free(&ds);
    }
}

// ---- llm.c's files --------------------------------------------------------------------
// GPT-2's vocabulary padded as llm.c pads it, on a model small enough for a test.
static GPT2Config llm_c_config(void) {
    GPT2Config c = {.max_seq_len = 8, .vocab_size = 50257, .padded_vocab_size = 50304,
                    .num_layers = 1, .num_heads = 2, .channels = 4, .tied = 1};
    return c;
}

// A state with made-up contents, as llm.c's write_state lays it out; the
// gradients as PyTorch holds them (wte with V rows) go to grads_v_rows.
static void write_llm_c_made_up_state(const char *path, const GPT2Config *cfg,
                                      float **grads_v_rows, size_t *n) {
    size_t N = B * T, V = cfg->vocab_size, pad = (size_t)(cfg->padded_vocab_size - V) *
                                                   cfg->channels;
    *n = gpt2_num_params(cfg) - (cfg->tied ? 1 : 2) * pad;
    int32_t x[B * T], y[B * T];
    for (size_t i = 0; i < N; i++) x[i] = (int32_t)(i * 7919 % V), y[i] = (int32_t)(V - 1 - i);
    float *logits = xmalloc(N * V * sizeof(float));
    for (size_t i = 0; i < N * V; i++) logits[i] = (float)(i % 97) / 97.0f;
    *grads_v_rows = xmalloc(*n * sizeof(float));
    for (size_t i = 0; i < *n; i++) (*grads_v_rows)[i] = (float)(i % 89) - 44.0f;
    write_llm_c_state(path, cfg, B, T, x, y, logits, 2.5f, *grads_v_rows);
    free(logits);
}

Test(debug_state, reads_a_state_written_as_llm_c_writes_it) {
    GPT2Config cfg = llm_c_config();
    const char *path = tmp_path("llm_c_state.bin");
    float *want;
    size_t n;
    write_llm_c_made_up_state(path, &cfg, &want, &n);
    // llm.c's length: header, x, y, logits (B,T,V), loss, gradients with Vp rows.
    long expected = 1024 + 4 * (2 * B * T + (long)B * T * 50257 + 1 + (long)gpt2_num_params(&cfg));
    cr_assert_eq(file_size(path), expected);

    DebugState ds;
    char err[ERR_LEN];
    cr_assert_eq(debug_state_read(path, &cfg, &ds, err), 0, "%s", err);
    cr_assert_eq(ds.loss, 2.5f);
    cr_assert_eq(ds.num_grads, gpt2_num_params(&cfg));
    // wte's real rows, its zero padding rows, then every other tensor.
    size_t wte_real = 50257 * 4, wte = 50304 * 4;
    cr_assert_eq(memcmp(ds.grads, want, wte_real * sizeof(float)), 0);
    for (size_t i = wte_real; i < wte; i++) cr_assert_eq(ds.grads[i], 0.0f);
    cr_assert_eq(memcmp(ds.grads + wte, want + wte_real, (n - wte_real) * sizeof(float)), 0);
    debug_state_free(&ds);
    free(want);
}

Test(debug_state, writes_what_llm_c_writes) {
    GPT2Config cfg = llm_c_config();
    const char *theirs = tmp_path("llm_c_state.bin"), *ours = tmp_path("ours.bin");
    float *want;
    size_t n;
    write_llm_c_made_up_state(theirs, &cfg, &want, &n);
    DebugState ds;
    char err[ERR_LEN];
    cr_assert_eq(debug_state_read(theirs, &cfg, &ds, err), 0, "%s", err);
    cr_assert_eq(debug_state_write(ours, &cfg, &ds, err), 0, "%s", err);
    assert_same_bytes(theirs, ours);
    debug_state_free(&ds);
    free(want);
}

Test(debug_state, the_old_unpadded_layout_is_refused_saying_so) {
    GPT2Config cfg = llm_c_config();
    const char *path = tmp_path("old.bin");
    float *want;
    size_t n;
    write_llm_c_made_up_state(path, &cfg, &want, &n);
    // Cut wte's 47 padding rows out of the file: the layout of this project's
    // earlier tools/pytorch_reference.py.
    size_t len;
    char err[ERR_LEN];
    char *bytes = read_file(path, &len, err);
    cr_assert_not_null(bytes, "%s", err);
    size_t grads = 1024 + 4 * (2 * B * T + (size_t)B * T * 50257 + 1), wte_real = 50257 * 4 * 4;
    size_t pad = 47 * 4 * 4;
    memmove(bytes + grads + wte_real, bytes + grads + wte_real + pad,
            len - grads - wte_real - pad);
    write_bytes(path, bytes, len - pad);
    free(bytes);
    free(want);
    DebugState ds;
    assert_fails_with(debug_state_read(path, &cfg, &ds, err), err, path, "V = 50257 rows",
                      "Vp = 50304");
}

// ---- the reader refuses bad files -----------------------------------------------
Test(debug_state, wrong_magic) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    patch_int32(path, 0, 20240326);
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &cfg, err), err, path, "bad magic 20240326",
                      "expected 20240327");
}

Test(debug_state, wrong_version) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    patch_int32(path, 1, 1);
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &cfg, err), err, path, "unsupported version 1",
                      "expected 2");
}

Test(debug_state, batch_shape_must_be_positive_and_fit_the_model) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    char err[ERR_LEN];
    patch_int32(path, 2, 0);
    assert_fails_with(read_state(path, &cfg, err), err, path, "B must be positive", "got 0");
    patch_int32(path, 2, B);
    patch_int32(path, 3, -4);
    assert_fails_with(read_state(path, &cfg, err), err, path, "T must be positive", "got -4");
    patch_int32(path, 3, 9);
    assert_fails_with(read_state(path, &cfg, err), err, path, "T = 9", "max_seq_len 8");
}

Test(debug_state, a_huge_batch_in_the_header_is_a_length_error) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    patch_int32(path, 2, 2147483647);
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &cfg, err), err, path, "expected", "B = 2147483647");
}

Test(debug_state, truncated_file) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    long full = file_size(path);
    truncate_to(path, full - 1);
    char err[ERR_LEN];
    assert_wrong_length(read_state(path, &cfg, err), err, path, full - 1, full);
}

Test(debug_state, file_shorter_than_the_header) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    truncate_to(path, 8);
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &cfg, err), err, path, "8 bytes",
                      "shorter than the 1024-byte");
}

Test(debug_state, empty_file) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = tmp_path("empty.bin");
    write_bytes(path, NULL, 0);
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &cfg, err), err, path, "empty file", NULL);
}

Test(debug_state, missing_file) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = tmp_path("no_such_state.bin");
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &cfg, err), err, path, "cannot open", NULL);
}

Test(debug_state, a_directory_is_named_as_one) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = tmp_path("state_dir.bin");
    cr_assert_eq(mkdir(path, 0755), 0);
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &cfg, err), err, path, "is a directory", NULL);
}

Test(debug_state, a_fifo_is_refused_without_waiting_for_a_writer, .timeout = 10) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = tmp_path("state.bin");
    make_fifo(path);
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &cfg, err), err, path, "not a regular file but a FIFO",
                      "debug state");
}

Test(debug_state, extra_trailing_bytes) {
    GPT2Config cfg = tiny_config(1, 0);
    const char *path = write_good_state(&cfg);
    long full = file_size(path);
    append_bytes(path, 4);
    char err[ERR_LEN];
    assert_wrong_length(read_state(path, &cfg, err), err, path, full + 4, full);
}

Test(debug_state, a_model_of_another_shape_is_a_length_error) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    GPT2Config tied = tiny_config(1, 1);
    char err[ERR_LEN];
    assert_fails_with(read_state(path, &tied, err), err, path, "expected", "gradient values");
}

Test(debug_state, token_outside_the_vocabulary) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    char err[ERR_LEN];
    patch_int32(path, x_at() + 3, 60);  // V = 60: padding ids are not real tokens
    assert_fails_with(read_state(path, &cfg, err), err, path, "x[3] is 60", "[0, 60)");
    patch_int32(path, x_at() + 3, 0);
    patch_int32(path, y_at() + 5, -1);
    assert_fails_with(read_state(path, &cfg, err), err, path, "y[5] is -1", NULL);
}

Test(debug_state, non_finite_values_are_named) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_state(&cfg);
    char err[ERR_LEN];
    patch_float(path, logits_at() + 10, NAN);
    assert_fails_with(read_state(path, &cfg, err), err, path, "logits", "element 10");
    patch_float(path, logits_at() + 10, 0);
    patch_float(path, loss_at(&cfg), INFINITY);
    assert_fails_with(read_state(path, &cfg, err), err, path, "loss", "non-finite");
    patch_float(path, loss_at(&cfg), 1);
    size_t sizes[NUM_PARAM_TENSORS];
    debug_grad_sizes(&cfg, sizes);
    patch_float(path, grads_at(&cfg) + (long)(sizes[0] + sizes[1] + 2), NAN);
    assert_fails_with(read_state(path, &cfg, err), err, path, "gradient of ln1w", "element 2");
}

// ---- the writer refuses what it could not read back -----------------------------
Test(debug_state, writer_checks_its_input) {
    GPT2Config cfg = tiny_config(0, 1);
    DebugState ds = make_state(&cfg, 3);
    const char *path = tmp_path("bad.bin");
    char err[ERR_LEN];
    ds.num_grads--;
    assert_fails_with(debug_state_write(path, &cfg, &ds, err), err, path, "gradient values",
                      "expected");
    ds.num_grads++;
    ds.y[1] = 60;
    assert_fails_with(debug_state_write(path, &cfg, &ds, err), err, path, "y[1] is 60", NULL);
    cr_assert_neq(access(path, F_OK), 0, "a refused state must not be written");
    debug_state_free(&ds);
    debug_state_free(&ds);  // freeing twice is safe
}
