// file_helpers.h: what the tests of file readers share: a fresh temporary
// directory per test, ways to damage a file behind its writer's back, and
// assertions on files and on error messages.
//
// Each test file that includes this gets its own copy (everything is static),
// and must define _POSIX_C_SOURCE 200809L before its first #include (mkdtemp,
// truncate, lstat, opendir). A suite uses the directory like so:
//   TestSuite(shard, .init = make_tmpdir, .fini = remove_tmpdir);
//   ... tmp_path("good.bin") ...
// Criterion runs every test in a process of its own, so one test's directory
// and files never meet another's.
#ifndef FILE_HELPERS_H
#define FILE_HELPERS_H

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#error "define _POSIX_C_SOURCE 200809L before the first #include"
#endif

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

// ---- a fresh temporary directory per test -------------------------------------
// The running test's directory, "/tmp/test_<suite>_XXXXXX" once made.
static char tmpdir[64];

// A suite's .init: makes tmpdir.
static inline void make_tmpdir(void) {
    const char *suite = criterion_current_suite ? criterion_current_suite->name : "files";
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_%.32s_XXXXXX", suite);
    cr_assert_not_null(mkdtemp(tmpdir), "cannot create a temporary directory");
}

// Removes path and, if it is a directory, everything in it.
static inline void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        char child[1024];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            if (snprintf(child, sizeof(child), "%s/%s", path, e->d_name) < (int)sizeof(child))
                remove_tree(child);
        }
        closedir(d);
    }
    rmdir(path);
}

// A suite's .fini: removes tmpdir and everything in it. A test that skips
// itself must call it first, since a skipped test never reaches the .fini.
static inline void remove_tmpdir(void) {
    remove_tree(tmpdir);
    cr_assert_neq(access(tmpdir, F_OK), 0, "%s: cannot remove", tmpdir);
}

// "<tmpdir>/<name>", in one of four rotating buffers: enough for any one test.
static inline const char *tmp_path(const char *name) {
    static char paths[4][512];
    static int next = 0;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

// ---- making and damaging files ----------------------------------------------------
// Creates (or replaces) path holding exactly these bytes; n = 0 makes it empty.
static inline void write_bytes(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp, "%s: cannot create", path);
    if (n) cr_assert_eq(fwrite(data, 1, n, fp), n, "%s: cannot write", path);
    fclose(fp);
}

// A FIFO (a named pipe) at path, with no writer: an ordinary open of it waits
// for one, here forever. A test that reads one gives itself a .timeout, so
// that a reader that waits fails the test instead of hanging it.
static inline void make_fifo(const char *path) {
    cr_assert_eq(mkfifo(path, 0644), 0, "%s: cannot make a FIFO", path);
}

// Overwrites n bytes at byte_offset with data; the file keeps its length.
static inline void patch_bytes(const char *path, long byte_offset, const void *data, size_t n) {
    FILE *fp = fopen(path, "r+b");
    cr_assert_not_null(fp, "%s: cannot open", path);
    cr_assert_eq(fseek(fp, byte_offset, SEEK_SET), 0);
    cr_assert_eq(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

// Overwrites the index'th 4-byte word: a header field or a payload element.
static inline void patch_int32(const char *path, long index, int32_t value) {
    patch_bytes(path, index * 4, &value, 4);
}

static inline void patch_float(const char *path, long index, float value) {
    patch_bytes(path, index * 4, &value, 4);
}

// Appends n zero bytes.
static inline void append_bytes(const char *path, size_t n) {
    FILE *fp = fopen(path, "ab");
    cr_assert_not_null(fp, "%s: cannot open", path);
    for (size_t i = 0; i < n; i++) fputc(0, fp);
    fclose(fp);
}

// Cuts (or zero-extends) path to exactly length bytes.
static inline void truncate_to(const char *path, long length) {
    cr_assert_eq(truncate(path, length), 0, "%s: cannot truncate to %ld bytes", path, length);
}

// ---- assertions ------------------------------------------------------------------
static inline long file_size(const char *path) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s: cannot stat", path);
    return (long)st.st_size;
}

static inline void assert_same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char err[ERR_LEN];
    char *da = read_file(a, &na, err), *db = read_file(b, &nb, err);
    cr_assert(da && db, "%s", err);
    cr_assert_eq(na, nb, "%s is %zu bytes, %s is %zu", a, na, b, nb);
    cr_assert_eq(memcmp(da, db, na), 0, "%s and %s differ", a, b);
    free(da);
    free(db);
}

// path must start with a header of header_ints int32 whose first n are want's
// and the rest zero.
static inline void assert_header(const char *path, int header_ints, const int32_t *want, int n) {
    size_t len;
    char err[ERR_LEN];
    int32_t *h = (int32_t *)read_file(path, &len, err);
    cr_assert_not_null(h, "%s", err);
    cr_assert_geq(len, 4 * (size_t)header_ints, "%s: %zu bytes, shorter than its header", path,
                  len);
    for (int i = 0; i < n; i++)
        cr_assert_eq(h[i], want[i], "%s: header[%d] = %d, expected %d", path, i, h[i], want[i]);
    for (int i = n; i < header_ints; i++)
        cr_assert_eq(h[i], 0, "%s: header[%d] = %d, expected 0", path, i, h[i]);
    free(h);
}

// err must contain piece1 and, unless it is NULL, piece2.
static inline void assert_error_says(const char *err, const char *piece1, const char *piece2) {
    cr_assert(strstr(err, piece1), "error \"%s\" does not say \"%s\"", err, piece1);
    if (piece2) cr_assert(strstr(err, piece2), "error \"%s\" does not say \"%s\"", err, piece2);
}

// rc must be -1 and err must contain the path and every one of the pieces.
static inline void assert_fails_with(int rc, const char *err, const char *path,
                                     const char *piece1, const char *piece2) {
    cr_assert_eq(rc, -1, "expected a failure, got rc %d", rc);
    cr_assert(strstr(err, path), "error \"%s\" does not name %s", err, path);
    assert_error_says(err, piece1, piece2);
}

// The failure of a file of the wrong length: as assert_fails_with, and err
// must say "file is <actual> bytes" and "expected <expected>".
static inline void assert_wrong_length(int rc, const char *err, const char *path, long actual,
                                       long expected) {
    char want_actual[64], want_expected[64];
    snprintf(want_actual, sizeof(want_actual), "file is %ld bytes", actual);
    snprintf(want_expected, sizeof(want_expected), "expected %ld", expected);
    assert_fails_with(rc, err, path, want_actual, want_expected);
}

#endif
