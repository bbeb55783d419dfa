// fuzz.h: what the libFuzzer harnesses share (tests/fuzz/README.md).
//
// Our readers take a path, not a buffer, because the trainer reads files: so
// each input is written to a file of this process's own, and the reader is
// given its name. Besides "does not crash" (ASan and UBSan watch for that),
// every harness checks the README's promise that a reader which refuses a
// file says why, naming the file: a refusal with an empty reason, or one
// that does not name the file, aborts, and libFuzzer keeps the input.
#ifndef FUZZ_H
#define FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "util/util.h"

// The input, written to a file named for this process (and `tag`, for a
// harness that needs two files at once). Returns the file's path.
static inline const char *fuzz_input_file(const char *tag, const uint8_t *data, size_t size) {
    static char paths[2][256];
    static int next = 0;
    char *path = paths[next++ % 2];
    snprintf(path, sizeof paths[0], "/tmp/llm_fuzz_%d_%s", (int)getpid(), tag);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror(path);
        abort();
    }
    return path;
}

// A refusal must say why, and name what it refuses (`name`; NULL: no name).
static inline void fuzz_check_refusal(int rc, const char *err, const char *name) {
    if (rc == 0) return;
    if (err[0] == '\0') {
        fprintf(stderr, "fuzz: refused with no reason\n");
        abort();
    }
    if (name != NULL && strstr(err, name) == NULL) {
        fprintf(stderr, "fuzz: the reason does not name %s: %s\n", name, err);
        abort();
    }
}

// Where the harnesses that need GPT-2's real tokenizer find its files:
// $FUZZ_ENCODER and $FUZZ_BPE, else data/raw/ (make fuzz fetches them).
static inline const char *fuzz_data_path(const char *env, const char *fallback) {
    const char *p = getenv(env);
    return p != NULL ? p : fallback;
}
#endif
