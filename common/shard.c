// shard.c: see shard.h.
#include "shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int shard_write(const char *path, const int32_t *tokens, size_t n, char *err) {
    if (n > INT32_MAX)
        return fail(err, "%s: %zu tokens do not fit the header's int32 count", path, n);
    uint16_t *narrow = xmalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] > UINT16_MAX) {
            free(narrow);
            return fail(err, "%s: token %zu is %d, outside the uint16 range 0..65535", path, i,
                        (int)tokens[i]);
        }
        narrow[i] = (uint16_t)tokens[i];
    }
    int32_t header[SHARD_HEADER_INTS] = {0};
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = (int32_t)n;

    AtomicFile af;
    int rc = atomic_open(&af, path, err);
    if (rc == 0) rc = atomic_write(&af, header, sizeof(header), err);
    if (rc == 0) rc = atomic_write(&af, narrow, n * sizeof(uint16_t), err);
    if (rc == 0) rc = atomic_commit(&af, err);
    free(narrow);
    return rc;
}

// Opens path and checks its header; on success leaves fp positioned at the
// first token. The length check comes before anything is allocated, so a
// corrupt count can never make us allocate a huge buffer.
static int open_and_check(const char *path, FILE **out, size_t *n, char *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return fail(err, "%s: cannot open: %s", path, strerror(errno));
    long length = -1;
    if (fseek(fp, 0, SEEK_END) == 0) length = ftell(fp);
    if (length < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return fail(err, "%s: cannot determine the file's length", path);
    }
    if (length == 0) {
        fclose(fp);
        return fail(err, "%s: empty file (0 bytes), expected a %d-byte shard header", path,
                    SHARD_HEADER_BYTES);
    }
    int32_t header[SHARD_HEADER_INTS];
    if (length < SHARD_HEADER_BYTES || fread(header, sizeof(header), 1, fp) != 1) {
        fclose(fp);
        return fail(err, "%s: file is %ld bytes, shorter than the %d-byte shard header", path,
                    length, SHARD_HEADER_BYTES);
    }
    int rc = 0;
    if (header[0] != SHARD_MAGIC)
        rc = fail(err, "%s: bad magic %d, expected %d (not a token shard)", path, header[0],
                  SHARD_MAGIC);
    else if (header[1] != SHARD_VERSION)
        rc = fail(err, "%s: unsupported version %d, expected %d", path, header[1], SHARD_VERSION);
    else if (header[2] < 0)
        rc = fail(err, "%s: negative token count %d in the header", path, header[2]);
    else if ((size_t)length != SHARD_HEADER_BYTES + 2 * (size_t)header[2])
        rc = fail(err, "%s: file is %ld bytes, expected %zu (header + %d uint16 tokens)", path,
                  length, SHARD_HEADER_BYTES + 2 * (size_t)header[2], header[2]);
    if (rc != 0) {
        fclose(fp);
        return rc;
    }
    *out = fp;
    *n = (size_t)header[2];
    return 0;
}

int shard_read_header(const char *path, size_t *n, char *err) {
    FILE *fp = NULL;
    if (open_and_check(path, &fp, n, err) != 0) return -1;
    fclose(fp);
    return 0;
}

// The first token at or above vocab_size, or n when there is none.
static size_t first_out_of_vocab(const uint16_t *tokens, size_t n, int vocab_size) {
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= vocab_size) return i;
    return n;
}

int shard_read(const char *path, int vocab_size, uint16_t **tokens, size_t *n, char *err) {
    *tokens = NULL;
    *n = 0;
    FILE *fp = NULL;
    size_t count = 0;
    if (open_and_check(path, &fp, &count, err) != 0) return -1;
    uint16_t *buf = xmalloc(count * sizeof(uint16_t));
    size_t got = fread(buf, sizeof(uint16_t), count, fp);
    fclose(fp);
    if (got != count) {
        free(buf);
        return fail(err, "%s: read %zu of %zu tokens (read error)", path, got, count);
    }
    size_t bad = first_out_of_vocab(buf, count, vocab_size);
    if (bad < count) {
        int value = buf[bad];
        free(buf);
        return fail(err, "%s: token %zu is %d, outside the vocabulary [0, %d)", path, bad, value,
                    vocab_size);
    }
    *tokens = buf;
    *n = count;
    return 0;
}
