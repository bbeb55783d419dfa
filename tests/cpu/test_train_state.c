// test_train_state.c: the training state (version 2) round-trips, names its
// model by step and checksum, refuses version 1 and non-finite moments with a
// message that says why, and the latest complete checkpoint of a directory
// is found. Version 4 (chapter 13's FP8 scales and amax histories) round-
// trips with fp32 and 8-bit moments, is written only with an FP8 state,
// leaves versions 2 and 3 readable, and is refused, saying why, when cut
// short or grown, when its sizes are out of range or another model's, and
// when it holds a value no cast makes.
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

// ---- version 4: chapter 13's FP8 state --------------------------------------------
// A two-layer model (24 FP8 tensors) and chapter 13's history of 16 steps.
static const GPT2Config FP8_MODEL = {.max_seq_len = 8, .vocab_size = 60, .padded_vocab_size = 64,
                                     .num_layers = 2, .num_heads = 2, .channels = 8, .tied = 0};
enum { FP8_TENSORS = 2 * TRAIN_STATE_FP8_PER_LAYER, HISTORY = 16, FLOATS = 2 + HISTORY };

// What chapter 13 holds between steps: power-of-two scales, a history of
// amaxes, no amax yet for the next step.
static Fp8State some_fp8_state(void) {
    Fp8State s;
    fp8_state_alloc(&s, FP8_TENSORS, HISTORY);
    s.history_ready = 1;
    for (int i = 0; i < s.tensors; i++) {
        float *t = fp8_state_tensor(&s, i);
        t[0] = ldexpf(1.0f, i % 7 - 3);
        for (int h = 0; h < HISTORY; h++) t[2 + h] = 0.01f * (float)(1 + (i * 5 + h) % 11);
    }
    return s;
}

// Moments of FP8_MODEL in the layout of `mask` (its tensors' moments 8-bit).
static AdamState some_moments(unsigned mask) {
    AdamLayout l = adam_layout_masked(&FP8_MODEL, mask);
    float *m = xmalloc(l.num_params * sizeof(float)), *v = xmalloc(l.num_params * sizeof(float));
    for (size_t i = 0; i < l.num_params; i++)
        m[i] = 0.001f * (float)(i % 13) - 0.006f, v[i] = 1e-5f * (float)(1 + i % 7);
    AdamState s;
    adam_state_alloc(&s, &l);
    adam_state_from_full(&s, m, v);
    free(m), free(v);
    return s;
}

// Writes moments s and fp8 (NULL: none) to path, as save_run does.
static int write_run(const char *path, const AdamState *s, const Fp8State *fp8, char *err) {
    AtomicFile af;
    if (train_state_write_run_unrenamed(&af, path, &PROGRESS, s, fp8, err)) return -1;
    return atomic_commit(&af, err);
}

// A version 4 state of FP8_MODEL, written afresh; returns its path (a
// buffer of its own: tmp_path's are reused).
static const char *write_fp8_state(unsigned mask) {
    static char path[512];
    snprintf(path, sizeof path, "%s", tmp_path("state_000042.bin"));
    AdamState s = some_moments(mask);
    Fp8State fp8 = some_fp8_state();
    char err[ERR_LEN];
    cr_assert_eq(write_run(path, &s, &fp8, err), 0, "%s", err);
    adam_state_free(&s), fp8_state_free(&fp8);
    return path;
}

static int header_int(const char *path, int i) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    int32_t x;
    cr_assert_eq(fseek(f, 4L * i, SEEK_SET), 0);
    cr_assert_eq(fread(&x, 4, 1, f), 1);
    fclose(f);
    return x;
}

// The word where FP8 tensor i's floats start, in a state of fp32 moments.
static long fp8_word(int i) { return 256 + 2 * (long)gpt2_num_params(&FP8_MODEL) + i * FLOATS; }

static void assert_read_run_fails(const char *path, const char *piece1, const char *piece2) {
    TrainProgress p;
    AdamState s;
    Fp8State fp8;
    char err[ERR_LEN];
    assert_fails_with(train_state_read_run(path, &FP8_MODEL, &p, &s, &fp8, err), err, path,
                      piece1, piece2);
}

// Byte for byte, with fp32 moments and with 8-bit ones (chapter 13 runs
// chapter 10's optimizer): the header says version 4, the mask, the FP8
// tensors, the history and history_ready; the file is exactly as long as
// train_state.h says; the FP8 values and the moments come back as written.
Test(train_state, version_4_round_trips_the_fp8_state_byte_for_byte) {
    const unsigned masks[] = {0, 1u << PARAM_QKVW};
    for (int k = 0; k < 2; k++) {
        AdamState s = some_moments(masks[k]), r;
        Fp8State fp8 = some_fp8_state(), got;
        const char *path = tmp_path("state_000042.bin");
        char err[ERR_LEN];
        cr_assert_eq(write_run(path, &s, &fp8, err), 0, "%s", err);
        const size_t n = gpt2_num_params(&FP8_MODEL);
        int32_t want[19] = {TRAIN_STATE_MAGIC, 4, 42, (int32_t)n, 0, 3, 0, 17, 0, 0x456789ab,
                            0x123, 4, 16, (int32_t)0x76543210, (int32_t)0xfedcba98,
                            (int32_t)masks[k], FP8_TENSORS, HISTORY, 1};
        assert_header(path, 256, want, 19);
        const AdamLayout *l = &s.layout;
        const long moments = 2 * (long)l->fp32_values * 4 + 2 * (long)l->q8_values +
                             2 * (long)l->q8_blocks * 4;
        cr_assert_eq(file_size(path), 1024 + moments + FP8_TENSORS * FLOATS * 4, "%ld bytes",
                     file_size(path));
        TrainProgress p;
        cr_assert_eq(train_state_read_run(path, &FP8_MODEL, &p, &r, &got, err), 0, "%s", err);
        cr_assert(p.step == 42 && p.model_checksum == PROGRESS.model_checksum);
        cr_assert(adam_layout_equal(&r.layout, l), "the file's layout");
        cr_assert(memcmp(r.m, s.m, l->fp32_values * sizeof(float)) == 0);
        cr_assert(memcmp(r.v, s.v, l->fp32_values * sizeof(float)) == 0);
        cr_assert(memcmp(r.m_q, s.m_q, l->q8_values) == 0);
        cr_assert(memcmp(r.v_absmax, s.v_absmax, l->q8_blocks * sizeof(float)) == 0);
        cr_assert(got.tensors == FP8_TENSORS && got.history == HISTORY && got.history_ready == 1);
        cr_assert(memcmp(got.values, fp8.values, FP8_TENSORS * FLOATS * sizeof(float)) == 0,
                  "the FP8 scales and histories");
        adam_state_free(&s), adam_state_free(&r), fp8_state_free(&fp8), fp8_state_free(&got);
    }
}

// A state saved before the first step (a stop at once) has history_ready 0.
Test(train_state, version_4_keeps_a_history_not_yet_ready) {
    AdamState s = some_moments(0), r;
    Fp8State fp8, got;
    fp8_state_alloc(&fp8, FP8_TENSORS, HISTORY);
    for (int i = 0; i < FP8_TENSORS; i++) fp8_state_tensor(&fp8, i)[0] = 1.0f;  // as allocated
    const char *path = tmp_path("state_000000.bin");
    char err[ERR_LEN];
    cr_assert_eq(write_run(path, &s, &fp8, err), 0, "%s", err);
    TrainProgress p;
    cr_assert_eq(train_state_read_run(path, &FP8_MODEL, &p, &r, &got, err), 0, "%s", err);
    cr_assert_eq(got.history_ready, 0);
    cr_assert_eq(fp8_state_tensor(&got, FP8_TENSORS - 1)[0], 1.0f);
    adam_state_free(&s), adam_state_free(&r), fp8_state_free(&fp8), fp8_state_free(&got);
}

// Without an FP8 state (NULL, or empty: a run without FP8 GEMMs) the writer
// writes what it wrote before version 4: 2, or 3 with 8-bit moments.
Test(train_state, a_state_without_fp8_is_still_version_2_or_3) {
    const unsigned masks[] = {0, 1u << PARAM_QKVW};
    const int versions[] = {TRAIN_STATE_VERSION, TRAIN_STATE_VERSION_8BIT};
    Fp8State empty = {0};
    for (int k = 0; k < 2; k++) {
        AdamState s = some_moments(masks[k]);
        const char *path = tmp_path("state_000042.bin");
        char err[ERR_LEN];
        cr_assert_eq(write_run(path, &s, NULL, err), 0, "%s", err);
        cr_assert_eq(header_int(path, 1), versions[k]);
        cr_assert_eq(write_run(path, &s, &empty, err), 0, "%s", err);
        cr_assert_eq(header_int(path, 1), versions[k]);
        adam_state_free(&s);
    }
}

// Versions 2 and 3, as the trainers wrote them before version 4, still
// read, with an empty FP8 state (a resumed FP8 run starts its scales afresh).
Test(train_state, versions_2_and_3_still_read_with_no_fp8_state) {
    const size_t n = gpt2_num_params(&FP8_MODEL);
    float *m = xmalloc(n * sizeof(float)), *v = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) m[i] = 0.5f * (float)(i % 9), v[i] = 0.25f * (float)(i % 5);
    const char *path = tmp_path("state_000042.bin");
    char err[ERR_LEN];
    cr_assert_eq(train_state_write(path, &PROGRESS, m, v, n, err), 0, "%s", err);  // version 2
    TrainProgress p;
    AdamState r;
    Fp8State got = {.tensors = -1};
    cr_assert_eq(train_state_read_run(path, &FP8_MODEL, &p, &r, &got, err), 0, "%s", err);
    cr_assert(got.tensors == 0 && got.values == NULL, "an FP8 state from version 2");
    cr_assert(memcmp(r.m, m, n * sizeof(float)) == 0 && memcmp(r.v, v, n * sizeof(float)) == 0);
    adam_state_free(&r);

    AdamState s = some_moments(1u << PARAM_QKVW);  // version 3
    AtomicFile af;
    cr_assert_eq(train_state_write_adam_unrenamed(&af, path, &PROGRESS, &s, err), 0, "%s", err);
    cr_assert_eq(atomic_commit(&af, err), 0, "%s", err);
    cr_assert_eq(header_int(path, 1), TRAIN_STATE_VERSION_8BIT);
    got.tensors = -1;
    cr_assert_eq(train_state_read_run(path, &FP8_MODEL, &p, &r, &got, err), 0, "%s", err);
    cr_assert(got.tensors == 0 && got.values == NULL, "an FP8 state from version 3");
    cr_assert(memcmp(r.m_q, s.m_q, s.layout.q8_values) == 0);
    adam_state_free(&r), adam_state_free(&s);
    free(m), free(v);
}

// The readers of less: the header alone (prepare_run) and the moments alone
// (the CPU trainer: it casts nothing) take version 4; the reader of version
// 2's fp32 moments refuses it, saying what it is.
Test(train_state, readers_of_less_take_version_4_as_far_as_they_go) {
    const char *path = write_fp8_state(0);
    TrainProgress p;
    size_t n;
    char err[ERR_LEN];
    cr_assert_eq(train_state_read_progress(path, &p, &n, err), 0, "%s", err);
    cr_assert(n == gpt2_num_params(&FP8_MODEL) && p.step == 42);
    AdamState r;
    cr_assert_eq(train_state_read_adam(path, &FP8_MODEL, &p, &r, err), 0, "%s", err);
    cr_assert_eq(r.layout.num_params, n);
    adam_state_free(&r);
    float *m = xmalloc(n * sizeof(float)), *v = xmalloc(n * sizeof(float));
    assert_fails_with(train_state_read(path, &p, m, v, n, err), err, path, "version 4",
                      "FP8 scales");
    free(m), free(v);
}

// Cut short or grown, by one float or by the whole FP8 state: refused, by
// the header's reader too where the header alone sets the length (fp32
// moments), and by the full reader with 8-bit moments.
Test(train_state, a_version_4_state_of_the_wrong_length_is_refused) {
    const char *path = write_fp8_state(0);
    const long full = file_size(path);
    TrainProgress p;
    size_t n;
    char err[ERR_LEN];
    const long lengths[] = {full - 4, full - FP8_TENSORS * FLOATS * 4, full + 4};
    for (int i = 0; i < 3; i++) {
        path = write_fp8_state(0);
        if (lengths[i] < full) truncate_to(path, lengths[i]);
        else append_bytes(path, (size_t)(lengths[i] - full));
        assert_wrong_length(train_state_read_progress(path, &p, &n, err), err, path, lengths[i],
                            full);
        assert_read_run_fails(path, "expected", "FP8 state");
    }
    path = write_fp8_state(1u << PARAM_QKVW);
    truncate_to(path, file_size(path) - 4);
    assert_read_run_fails(path, "expected", "bytes of FP8 state");
    truncate_to(path, 1024);
    assert_read_run_fails(path, "expected", NULL);
}

// Each of version 4's sizes out of its range, or of another model than the
// one it is read for: refused, saying which.
Test(train_state, version_4_headers_of_wrong_sizes_are_refused) {
    const char *path = write_fp8_state(0);
    patch_int32(path, 16, 13);  // not a whole number of layers
    assert_read_run_fails(path, "corrupt header", "13 FP8 tensors");
    patch_int32(path, 16, 0);
    assert_read_run_fails(path, "corrupt header", "0 FP8 tensors");
    path = write_fp8_state(0);
    patch_int32(path, 17, 0);
    assert_read_run_fails(path, "corrupt header", "amax histories of 0 steps");
    patch_int32(path, 17, TRAIN_STATE_FP8_MAX_HISTORY + 1);
    assert_read_run_fails(path, "corrupt header", "expected 1 to 1024");
    patch_int32(path, 17, 0x7fffffff);  // (2 + H) must not overflow on the way
    assert_read_run_fails(path, "corrupt header", "amax histories");
    patch_int32(path, 17, HISTORY / 2);  // in range: then the length is wrong
    assert_read_run_fails(path, "expected", "FP8 state");
    path = write_fp8_state(0);
    patch_int32(path, 18, 2);
    assert_read_run_fails(path, "corrupt header", "history_ready 2");
    // Three layers' FP8 state, the length to match: the state of another model.
    path = write_fp8_state(0);
    patch_int32(path, 16, 3 * TRAIN_STATE_FP8_PER_LAYER);
    append_bytes(path, TRAIN_STATE_FP8_PER_LAYER * FLOATS * 4);
    assert_read_run_fails(path, "FP8 scales of 36 tensors", "2 layers has 24");
    // Another model altogether: its parameter count says so first.
    path = write_fp8_state(0);
    GPT2Config wider = FP8_MODEL;
    wider.channels = 16;
    TrainProgress p;
    AdamState s;
    Fp8State fp8;
    char err[ERR_LEN];
    assert_fails_with(train_state_read_run(path, &wider, &p, &s, &fp8, err), err, path,
                      "written for", "parameters");
    patch_int32(path, 1, 5);
    assert_read_run_fails(path, "unsupported version 5", "expected 2, 3 or 4");
}

// A scale that is not positive and finite, an amax that is negative or not
// finite: no cast makes one. The writer refuses to write it (nothing left
// behind), the reader to read it, naming the tensor.
Test(train_state, fp8_values_no_cast_makes_are_neither_written_nor_read) {
    AdamState s = some_moments(0);
    const char *path = tmp_path("state_000042.bin");
    char err[ERR_LEN];
    const struct {
        int tensor, at;
        float x;
        const char *says;
    } bad[] = {{3, 0, 0.0f, "FP8 tensor 3's scale is 0"},
               {5, 0, INFINITY, "FP8 tensor 5's scale is inf"},
               {7, 1, NAN, "FP8 tensor 7's amax is nan"},
               {23, 2 + HISTORY - 1, -0.5f, "FP8 tensor 23's amax history is -0.5"}};
    for (int i = 0; i < 4; i++) {
        Fp8State fp8 = some_fp8_state();
        fp8_state_tensor(&fp8, bad[i].tensor)[bad[i].at] = bad[i].x;
        assert_fails_with(write_run(path, &s, &fp8, err), err, path, bad[i].says,
                          "not written");
        cr_assert_neq(access(path, F_OK), 0, "written");
        cr_assert_neq(access(tmp_path("state_000042.bin.tmp"), F_OK), 0, "a temporary left");
        fp8_state_free(&fp8);

        path = write_fp8_state(0);
        patch_float(path, fp8_word(bad[i].tensor) + bad[i].at, bad[i].x);
        assert_read_run_fails(path, bad[i].says, NULL);
        unlink(path);
    }
    adam_state_free(&s);
}
