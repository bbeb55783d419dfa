// test_train_state.c: the training state (version 2) round-trips, names its
// model by step and checksum, refuses version 1 and non-finite moments with a
// message that says why, and the latest complete checkpoint of a directory
// is found.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "files/checkpoint.h"
#include "file_helpers.h"
#include "files/train_state.h"

TestSuite(train_state, .init = make_tmpdir, .fini = remove_tmpdir);

enum { N = 10 };

static const TrainProgress PROGRESS = {.step = 42, .data = {3, 17}, .sampler_rng = 0x123456789abull,
                                       .B = 4, .T = 16, .model_checksum = 0xfedcba9876543210ull};

static const char *write_good_state(void) {
    float m[N], v[N];
    for (int i = 0; i < N; i++) m[i] = 0.5f * i, v[i] = 0.25f * i;
    const char *path = tmp_path("state_000042.bin");
    char err[ERR_LEN];
    cr_assert_eq(train_state_write(path, &PROGRESS, m, v, N, err), 0, "%s", err);
    return path;
}

Test(train_state, round_trip_keeps_the_model_s_checksum) {
    const char *path = write_good_state();
    float m[N], v[N];
    TrainProgress p;
    char err[ERR_LEN];
    cr_assert_eq(train_state_read(path, &p, m, v, N, err), 0, "%s", err);
    cr_assert(p.step == 42 && p.data.epoch == 3 && p.data.window == 17 && p.B == 4 && p.T == 16);
    cr_assert_eq(p.sampler_rng, PROGRESS.sampler_rng);
    cr_assert_eq(p.model_checksum, PROGRESS.model_checksum);
    cr_assert_eq(m[3], 1.5f);
    cr_assert_eq(v[9], 2.25f);
    int32_t want[15] = {TRAIN_STATE_MAGIC, 2, 42, N, 0, 3, 0, 17, 0, 0x456789ab, 0x123, 4, 16,
                        (int32_t)0x76543210, (int32_t)0xfedcba98};
    assert_header(path, 256, want, 15);
    size_t n;
    cr_assert_eq(train_state_read_progress(path, &p, &n, err), 0, "%s", err);
    cr_assert_eq(n, N);
    cr_assert_eq(p.model_checksum, PROGRESS.model_checksum);
}

Test(train_state, version_1_is_refused_saying_why) {
    const char *path = write_good_state();
    patch_int32(path, 1, 1);
    float m[N], v[N];
    TrainProgress p;
    char err[ERR_LEN];
    assert_fails_with(train_state_read(path, &p, m, v, N, err), err, path, "version 1",
                      "--init-from");
}

Test(train_state, non_finite_moments_are_neither_written_nor_read) {
    float m[N] = {0}, v[N] = {0};
    m[4] = NAN;
    const char *path = tmp_path("state_000001.bin");
    char err[ERR_LEN];
    assert_fails_with(train_state_write(path, &PROGRESS, m, v, N, err), err, path,
                      "first moment", "element 4");
    cr_assert_neq(access(path, F_OK), 0, "nothing written");
    cr_assert_neq(access(tmp_path("state_000001.bin.tmp"), F_OK), 0, "no temporary left");

    path = write_good_state();
    patch_float(path, 256 + N + 2, INFINITY);  // v[2]
    TrainProgress p;
    assert_fails_with(train_state_read(path, &p, m, v, N, err), err, path, "second moment",
                      "element 2");
}

Test(train_state, a_fifo_is_refused_without_waiting_for_a_writer, .timeout = 10) {
    const char *path = tmp_path("state_000042.bin");
    make_fifo(path);
    float m[N], v[N];
    TrainProgress p;
    char err[ERR_LEN];
    assert_fails_with(train_state_read(path, &p, m, v, N, err), err, path,
                      "not a regular file but a FIFO", "training state");
    size_t n;
    assert_fails_with(train_state_read_progress(path, &p, &n, err), err, path, "a FIFO", NULL);
}

Test(train_state, a_huge_parameter_count_is_refused) {
    const char *path = write_good_state();
    patch_int32(path, 4, 0x7fffffff);  // the count's high word
    TrainProgress p;
    size_t n;
    char err[ERR_LEN];
    assert_fails_with(train_state_read_progress(path, &p, &n, err), err, path, "corrupt header",
                      "parameters");
    patch_int32(path, 4, 1);  // 2^32 + 10: a length error
    assert_fails_with(train_state_read_progress(path, &p, &n, err), err, path, "expected",
                      "fp32 moments");
}

Test(train_state, the_checksum_of_a_file_is_that_of_its_parameters) {
    GPT2Config cfg = {.max_seq_len = 8, .vocab_size = 60, .padded_vocab_size = 64,
                      .num_layers = 2, .num_heads = 2, .channels = 8, .tied = 0};
    size_t n = gpt2_num_params(&cfg);
    float *params = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) params[i] = (float)i / 7.0f;
    const char *path = tmp_path("model_000001.bin");
    char err[ERR_LEN];
    cr_assert_eq(checkpoint_write(path, &cfg, params, err), 0, "%s", err);
    uint64_t from_file;
    cr_assert_eq(checkpoint_file_checksum(path, &from_file, err), 0, "%s", err);
    cr_assert_eq(from_file, checkpoint_params_checksum(params, n));
    params[n / 2] = nextafterf(params[n / 2], 1e9f);  // one bit of one value
    cr_assert_neq(from_file, checkpoint_params_checksum(params, n));
    free(params);
}

Test(train_state, latest_checkpoint_is_the_latest_complete_pair) {
    char model[1024];
    cr_assert_eq(latest_checkpoint(tmpdir, model, sizeof model), -1, "empty directory");
    const char *names[] = {"model_000010.bin", "state_000010.bin", "model_000020.bin",
                           "state_000020.bin", "model_000030.bin", "state_000040.bin",
                           "state_000030.bin.tmp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        write_bytes(tmp_path(names[i]), "x", 1);
    // 40 lacks its model (a save cut short between its renames), 30 its state
    // (removed, say).
    cr_assert_eq(latest_checkpoint(tmpdir, model, sizeof model), 20);
    cr_assert_str_eq(model, tmp_path("model_000020.bin"));
    cr_assert_eq(step_of_model_path(model), 20);
    cr_assert_eq(step_of_model_path("dir/model_x.bin"), -1);
}
