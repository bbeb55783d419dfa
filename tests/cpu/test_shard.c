// test_shard.c: token shards round-trip, and every kind of bad file is
// refused with a message naming the file and the problem.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "file_helpers.h"
#include "files/shard.h"
#include "util/util.h"

TestSuite(shard, .init = make_tmpdir, .fini = remove_tmpdir);

// ---- a known good shard -------------------------------------------------------
enum { N = 1000, VOCAB = 50257 };

static const char *write_good_shard(void) {
    int32_t tokens[N];
    for (int i = 0; i < N; i++) tokens[i] = (i * 7919) % VOCAB;
    const char *path = tmp_path("good.bin");
    char err[ERR_LEN];
    cr_assert_eq(shard_write(path, tokens, N, err), 0, "%s", err);
    return path;
}

// ---- round trips ------------------------------------------------------------------
Test(shard, round_trip_gives_the_same_tokens_and_bytes) {
    const char *path = write_good_shard();
    cr_assert_eq(file_size(path), SHARD_HEADER_BYTES + 2 * N);

    uint16_t *tokens;
    size_t n;
    char err[ERR_LEN];
    cr_assert_eq(shard_read(path, VOCAB, &tokens, &n, err), 0, "%s", err);
    cr_assert_eq(n, N);
    for (int i = 0; i < N; i++) cr_assert_eq(tokens[i], (i * 7919) % VOCAB, "token %d", i);

    int32_t wide[N];
    for (int i = 0; i < N; i++) wide[i] = tokens[i];
    const char *again = tmp_path("again.bin");
    cr_assert_eq(shard_write(again, wide, n, err), 0, "%s", err);
    assert_same_bytes(path, again);
    free(tokens);
}

Test(shard, header_is_llm_c_s) {
    const char *path = write_good_shard();
    int32_t want[3] = {20240520, 1, N};
    assert_header(path, SHARD_HEADER_INTS, want, 3);
}

Test(shard, round_trip_of_the_extremes) {
    int32_t tokens[] = {0, 65535, 1, 65534};
    const char *path = tmp_path("extremes.bin");
    char err[ERR_LEN];
    cr_assert_eq(shard_write(path, tokens, 4, err), 0, "%s", err);
    uint16_t *got;
    size_t n;
    cr_assert_eq(shard_read(path, 65536, &got, &n, err), 0, "%s", err);
    cr_assert_eq(n, 4);
    for (int i = 0; i < 4; i++) cr_assert_eq(got[i], tokens[i]);
    free(got);
}

Test(shard, an_empty_shard_round_trips) {
    const char *path = tmp_path("none.bin");
    char err[ERR_LEN];
    cr_assert_eq(shard_write(path, NULL, 0, err), 0, "%s", err);
    cr_assert_eq(file_size(path), SHARD_HEADER_BYTES);
    uint16_t *got;
    size_t n = 99;
    cr_assert_eq(shard_read(path, VOCAB, &got, &n, err), 0, "%s", err);
    cr_assert_eq(n, 0);
    free(got);
}

Test(shard, read_header_gives_the_count) {
    const char *path = write_good_shard();
    size_t n = 0;
    char err[ERR_LEN];
    cr_assert_eq(shard_read_header(path, &n, err), 0, "%s", err);
    cr_assert_eq(n, N);
}

// ---- the writer refuses what a shard cannot hold --------------------------------
Test(shard, writer_rejects_ids_outside_uint16) {
    int32_t too_big[] = {1, 2, 65536};
    int32_t negative[] = {-1};
    const char *path = tmp_path("bad.bin");
    char err[ERR_LEN];
    assert_fails_with(shard_write(path, too_big, 3, err), err, path, "token 2 is 65536", "65535");
    assert_fails_with(shard_write(path, negative, 1, err), err, path, "token 0 is -1", NULL);
    cr_assert_neq(access(path, F_OK), 0, "a refused shard must not be written");
}

// ---- the reader refuses bad files -----------------------------------------------
static int read_shard(const char *path, int vocab, char *err) {
    uint16_t *tokens = (uint16_t *)1;  // must come back NULL on failure
    size_t n = 7;
    int rc = shard_read(path, vocab, &tokens, &n, err);
    if (rc != 0) {
        cr_assert_null(tokens);
        cr_assert_eq(n, 0);
    }
    free(tokens);
    return rc;
}

Test(shard, wrong_magic) {
    const char *path = write_good_shard();
    patch_int32(path, 0, 20240326);
    char err[ERR_LEN];
    assert_fails_with(read_shard(path, VOCAB, err), err, path, "bad magic 20240326",
                      "expected 20240520");
}

Test(shard, wrong_version) {
    const char *path = write_good_shard();
    patch_int32(path, 1, 2);
    char err[ERR_LEN];
    assert_fails_with(read_shard(path, VOCAB, err), err, path, "unsupported version 2",
                      "expected 1");
}

Test(shard, negative_count) {
    const char *path = write_good_shard();
    patch_int32(path, 2, -5);
    char err[ERR_LEN];
    assert_fails_with(read_shard(path, VOCAB, err), err, path, "negative token count -5", NULL);
}

Test(shard, truncated_file) {
    const char *path = write_good_shard();
    truncate_to(path, SHARD_HEADER_BYTES + 2 * N - 2);
    char err[ERR_LEN];
    assert_wrong_length(read_shard(path, VOCAB, err), err, path, 3022, 3024);
}

Test(shard, file_shorter_than_the_header) {
    const char *path = write_good_shard();
    truncate_to(path, 100);
    char err[ERR_LEN];
    assert_fails_with(read_shard(path, VOCAB, err), err, path, "100 bytes",
                      "shorter than the 1024-byte");
}

Test(shard, empty_file) {
    const char *path = tmp_path("empty.bin");
    write_bytes(path, NULL, 0);
    char err[ERR_LEN];
    assert_fails_with(read_shard(path, VOCAB, err), err, path, "empty file", NULL);
}

Test(shard, missing_file) {
    const char *path = tmp_path("no_such_file.bin");
    char err[ERR_LEN];
    assert_fails_with(read_shard(path, VOCAB, err), err, path, "cannot open", NULL);
}

Test(shard, a_directory_is_named_as_one) {
    const char *path = tmp_path("train_000.bin");
    cr_assert_eq(mkdir(path, 0755), 0);
    char err[ERR_LEN];
    assert_fails_with(read_shard(path, VOCAB, err), err, path, "is a directory", NULL);
    size_t n;
    assert_fails_with(shard_read_header(path, &n, err), err, path, "is a directory", NULL);
}

Test(shard, a_fifo_is_refused_without_waiting_for_a_writer, .timeout = 10) {
    const char *path = tmp_path("train_000.bin");
    make_fifo(path);
    char err[ERR_LEN];
    assert_fails_with(read_shard(path, VOCAB, err), err, path, "not a regular file but a FIFO",
                      "token shard");
    size_t n;
    assert_fails_with(shard_read_header(path, &n, err), err, path, "a FIFO", NULL);
}

Test(shard, extra_trailing_bytes) {
    const char *path = write_good_shard();
    append_bytes(path, 3);
    char err[ERR_LEN];
    assert_wrong_length(read_shard(path, VOCAB, err), err, path, 3027, 3024);
}

Test(shard, token_outside_the_vocabulary) {
    int32_t tokens[] = {3, 1, 4, 1, 64, 9, 99};
    const char *path = tmp_path("oov.bin");
    char err[ERR_LEN];
    cr_assert_eq(shard_write(path, tokens, 7, err), 0, "%s", err);
    assert_fails_with(read_shard(path, 64, err), err, path, "token 4 is 64", "[0, 64)");
    cr_assert_eq(read_shard(path, 100, err), 0, "%s", err);
}

// ---- the real data, when `make test` has prepared it -------------------------------
// The counts pin down the tokenizer and tools/prepare_data together: they are
// what tiktoken's encode_ordinary gives for the same documents.
static void check_real_shard(const char *name, size_t want_tokens) {
    const char *dir = getenv("DATA_DIR");
    if (!dir) {
        remove_tmpdir();  // a skipped test never reaches the suite's .fini
        cr_skip_test("DATA_DIR is not set (make test sets it)");
    }
    char path[1024];
    snprintf(path, sizeof(path), "%s/tinyshakespeare/%s", dir, name);
    uint16_t *tokens;
    size_t n;
    char err[ERR_LEN];
    cr_assert_eq(shard_read(path, 50257, &tokens, &n, err), 0, "%s", err);
    cr_assert_eq(n, want_tokens, "%s: %zu tokens, expected %zu", path, n, want_tokens);
    cr_assert_eq(tokens[0], 50256, "%s must start with the end-of-text token", path);
    free(tokens);
}

Test(shard, tinyshakespeare_train_reads_back) { check_real_shard("train.bin", 301579); }
Test(shard, tinyshakespeare_val_reads_back) { check_real_shard("val.bin", 29228); }
