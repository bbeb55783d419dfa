// shard.c: see shard.h.
#include "files/shard.h"

#include <stdlib.h>

#include "files/binfile.h"
#include "util/util.h"

_Static_assert(SHARD_HEADER_INTS == BINFILE_HEADER_INTS, "shard.h and binfile.h agree");

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
    int rc = binfile_create(&af, path, header, err);
    if (rc == 0) rc = atomic_write(&af, narrow, n * sizeof(uint16_t), err);
    if (rc == 0) rc = atomic_commit(&af, err);
    free(narrow);
    return rc;
}

// Opens path and checks its header and length; on success f is at the first
// token. The length check comes before anything is allocated, so a corrupt
// count can never make us allocate a huge buffer.
static int open_shard(const char *path, BinFile *f, size_t *n, char *err) {
    int32_t header[SHARD_HEADER_INTS];
    if (binfile_open(f, path, header, SHARD_MAGIC, "token shard", err) != 0) return -1;
    int rc;
    if (header[1] != SHARD_VERSION)
        rc = fail(err, "%s: unsupported version %d, expected %d", path, header[1], SHARD_VERSION);
    else if (header[2] < 0)
        rc = fail(err, "%s: negative token count %d in the header", path, header[2]);
    else
        rc = binfile_expect_length(f, SHARD_HEADER_BYTES + 2 * (size_t)header[2], err,
                                   "(header + %d uint16 tokens)", header[2]);
    if (rc != 0) {
        binfile_close(f);
        return rc;
    }
    *n = (size_t)header[2];
    return 0;
}

int shard_read_header(const char *path, size_t *n, char *err) {
    BinFile f;
    if (open_shard(path, &f, n, err) != 0) return -1;
    binfile_close(&f);
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
    BinFile f;
    size_t count = 0;
    if (open_shard(path, &f, &count, err) != 0) return -1;
    uint16_t *buf = xmalloc(count * sizeof(uint16_t));
    int rc = binfile_read(&f, buf, sizeof(uint16_t), count, "tokens", err);
    binfile_close(&f);
    if (rc != 0) {
        free(buf);
        return -1;
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
