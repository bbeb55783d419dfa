// test_checkpoint.c: model checkpoints round-trip (tied and untied, padded and
// not), are laid out as llm.c's, and every kind of bad file is refused with a
// message naming the file and the problem.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/checkpoint.h"
#include "file_helpers.h"
#include "util/util.h"

TestSuite(checkpoint, .init = make_tmpdir, .fini = remove_tmpdir);

// ---- tiny models ------------------------------------------------------------------
// Tied and unpadded (llm.c's kind of file) and untied and padded (ours).
static GPT2Config tiny_config(int tied, int padded) {
    GPT2Config c = {.max_seq_len = 8, .vocab_size = 60, .padded_vocab_size = padded ? 64 : 60,
                    .num_layers = 2, .num_heads = 2, .channels = 8, .tied = tied};
    return c;
}

// Random parameters, with wte's and lm_head's padding rows zero as a model keeps them.
static float *random_params(const GPT2Config *cfg, uint64_t seed) {
    size_t n = gpt2_num_params(cfg);
    float *p = xmalloc(n * sizeof(float));
    Rng rng;
    rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) p[i] = rng_normal(&rng);
    size_t sizes[NUM_PARAM_TENSORS], C = cfg->channels, V = cfg->vocab_size;
    gpt2_param_sizes(cfg, sizes);
    size_t lm_head = n - sizes[PARAM_LM_HEAD];
    for (size_t i = V * C; i < sizes[0]; i++) p[i] = 0;
    for (size_t i = V * C; i < sizes[PARAM_LM_HEAD]; i++) p[lm_head + i] = 0;
    return p;
}

static const char *write_good_checkpoint(const GPT2Config *cfg) {
    float *params = random_params(cfg, 7);
    const char *path = tmp_path("model.bin");
    char err[ERR_LEN];
    cr_assert_eq(checkpoint_write(path, cfg, params, err), 0, "%s", err);
    free(params);
    return path;
}

// Where element i of tensor t is in the file, in 4-byte words (patch_float's unit).
static long param_index(const GPT2Config *cfg, int t, size_t i) {
    size_t sizes[NUM_PARAM_TENSORS], offset = 0;
    gpt2_param_sizes(cfg, sizes);
    for (int k = 0; k < t; k++) offset += sizes[k];
    return CHECKPOINT_HEADER_INTS + (long)(offset + i);
}

static int read_checkpoint(const char *path, char *err) {
    GPT2Config cfg;
    float *params = (float *)1;  // must come back NULL on failure
    int rc = checkpoint_read(path, &cfg, &params, err);
    if (rc != 0) cr_assert_null(params);
    free(params);
    return rc;
}

// ---- round trips ------------------------------------------------------------------
static void check_round_trip(int tied, int padded) {
    GPT2Config cfg = tiny_config(tied, padded);
    float *params = random_params(&cfg, 42);
    const char *path = tmp_path("model.bin");
    char err[ERR_LEN];
    cr_assert_eq(checkpoint_write(path, &cfg, params, err), 0, "%s", err);
    size_t n = gpt2_num_params(&cfg);
    cr_assert_eq(file_size(path), CHECKPOINT_HEADER_BYTES + 4 * (long)n);

    GPT2Config got;
    float *read;
    cr_assert_eq(checkpoint_read(path, &got, &read, err), 0, "%s", err);
    cr_assert_eq(memcmp(&got, &cfg, sizeof(cfg)), 0, "the config changed in the round trip");
    cr_assert_eq(memcmp(read, params, n * sizeof(float)), 0, "the parameters changed");

    const char *again = tmp_path("again.bin");
    cr_assert_eq(checkpoint_write(again, &got, read, err), 0, "%s", err);
    assert_same_bytes(path, again);
    free(params);
    free(read);
}

Test(checkpoint, round_trip_tied_unpadded) { check_round_trip(1, 0); }
Test(checkpoint, round_trip_tied_padded) { check_round_trip(1, 1); }
Test(checkpoint, round_trip_untied_unpadded) { check_round_trip(0, 0); }
Test(checkpoint, round_trip_untied_padded) { check_round_trip(0, 1); }

Test(checkpoint, header_is_llm_c_s_plus_the_untied_flag) {
    for (int tied = 0; tied <= 1; tied++) {
        GPT2Config cfg = tiny_config(tied, 1);
        const char *path = write_good_checkpoint(&cfg);
        int32_t want[9] = {20240326, 3, 8, 60, 2, 2, 8, 64, tied ? 0 : 1};
        assert_header(path, CHECKPOINT_HEADER_INTS, want, 9);
    }
}

Test(checkpoint, a_tied_file_has_exactly_llm_c_s_16_tensors) {
    GPT2Config cfg = tiny_config(1, 1);
    const char *path = write_good_checkpoint(&cfg);
    size_t C = 8, L = 2, Vp = 64, T = 8;
    size_t llm_c_params = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
    cr_assert_eq(file_size(path), 1024 + 4 * (long)llm_c_params);
}

// ---- the reader refuses bad files -----------------------------------------------
Test(checkpoint, wrong_magic) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_checkpoint(&cfg);
    patch_int32(path, 0, 20240520);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "bad magic 20240520",
                      "expected 20240326");
}

Test(checkpoint, wrong_version) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_checkpoint(&cfg);
    patch_int32(path, 1, 4);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "unsupported version 4",
                      "expected 3");
}

Test(checkpoint, bf16_version_is_not_supported_yet) {
    GPT2Config cfg = tiny_config(1, 1);
    const char *path = write_good_checkpoint(&cfg);
    patch_int32(path, 1, 5);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "version 5 (bf16",
                      "not supported yet");
}

Test(checkpoint, untied_flag_must_be_0_or_1) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_checkpoint(&cfg);
    patch_int32(path, 8, 2);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "header[8]", "got 2");
}

Test(checkpoint, flipping_the_untied_flag_changes_the_expected_length) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_checkpoint(&cfg);
    patch_int32(path, 8, 0);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "expected", "bytes");
}

Test(checkpoint, bad_config) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_checkpoint(&cfg);
    patch_int32(path, 5, 3);  // 8 channels in 3 heads
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "divisible by num_heads (3)", NULL);
    patch_int32(path, 5, 2);
    patch_int32(path, 7, 59);  // padded below the real vocabulary
    assert_fails_with(read_checkpoint(path, err), err, path, "padded_vocab_size (59)", NULL);
    patch_int32(path, 7, 64);
    patch_int32(path, 4, -1);
    assert_fails_with(read_checkpoint(path, err), err, path, "num_layers", "-1");
}

Test(checkpoint, truncated_file) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_checkpoint(&cfg);
    long full = file_size(path);
    truncate_to(path, full - 4);
    char err[ERR_LEN];
    assert_wrong_length(read_checkpoint(path, err), err, path, full - 4, full);
}

Test(checkpoint, file_shorter_than_the_header) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_checkpoint(&cfg);
    truncate_to(path, 1000);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "1000 bytes",
                      "shorter than the 1024-byte");
}

Test(checkpoint, empty_file) {
    const char *path = tmp_path("empty.bin");
    write_bytes(path, NULL, 0);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "empty file", NULL);
}

Test(checkpoint, missing_file) {
    const char *path = tmp_path("no_such_model.bin");
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "cannot open", NULL);
}

Test(checkpoint, a_directory_is_named_as_one) {
    const char *path = tmp_path("model_dir.bin");
    cr_assert_eq(mkdir(path, 0755), 0);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "is a directory", NULL);
}

Test(checkpoint, a_fifo_is_refused_without_waiting_for_a_writer, .timeout = 10) {
    const char *path = tmp_path("model_000001.bin");
    make_fifo(path);
    char err[ERR_LEN];
    assert_fails_with(read_checkpoint(path, err), err, path, "not a regular file but a FIFO",
                      "a model checkpoint must be one");
    GPT2Config cfg;
    assert_fails_with(checkpoint_read_config(path, &cfg, err), err, path, "a FIFO", NULL);
    uint64_t checksum;
    assert_fails_with(checkpoint_file_checksum(path, &checksum, err), err, path, "a FIFO", NULL);
}

Test(checkpoint, extra_trailing_bytes) {
    GPT2Config cfg = tiny_config(1, 0);
    const char *path = write_good_checkpoint(&cfg);
    long full = file_size(path);
    append_bytes(path, 4);
    char err[ERR_LEN];
    assert_wrong_length(read_checkpoint(path, err), err, path, full + 4, full);
}

Test(checkpoint, non_finite_parameter_names_its_tensor) {
    GPT2Config cfg = tiny_config(0, 1);
    const char *path = write_good_checkpoint(&cfg);
    char err[ERR_LEN];
    patch_float(path, param_index(&cfg, 4, 17), NAN);
    assert_fails_with(read_checkpoint(path, err), err, path, "tensor qkvw", "element 17");
    patch_float(path, param_index(&cfg, 4, 17), 0.5f);
    patch_float(path, param_index(&cfg, PARAM_LM_HEAD, 3), -INFINITY);
    assert_fails_with(read_checkpoint(path, err), err, path, "tensor lm_head", "element 3");
}
