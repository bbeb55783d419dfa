// checkpoint.c: see checkpoint.h.
#include "files/checkpoint.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "files/binfile.h"
#include "util/util.h"

_Static_assert(CHECKPOINT_HEADER_INTS == BINFILE_HEADER_INTS, "checkpoint.h and binfile.h agree");

static void header_from_config(const GPT2Config *cfg, int32_t header[CHECKPOINT_HEADER_INTS]) {
    memset(header, 0, CHECKPOINT_HEADER_BYTES);
    header[0] = CHECKPOINT_MAGIC;
    header[1] = CHECKPOINT_VERSION_FP32;
    header[2] = cfg->max_seq_len;
    header[3] = cfg->vocab_size;
    header[4] = cfg->num_layers;
    header[5] = cfg->num_heads;
    header[6] = cfg->channels;
    header[7] = cfg->padded_vocab_size;
    header[8] = cfg->tied ? 0 : 1;
}

static GPT2Config config_from_header(const int32_t header[CHECKPOINT_HEADER_INTS]) {
    GPT2Config cfg = {
        .max_seq_len = header[2],
        .vocab_size = header[3],
        .num_layers = header[4],
        .num_heads = header[5],
        .channels = header[6],
        .padded_vocab_size = header[7],
        .tied = header[8] == 0,
    };
    return cfg;
}

// Names the first tensor holding a NaN or an infinity; `after` ends the message.
static int check_finite(const char *path, const GPT2Config *cfg, const float *params,
                        const char *after, char *err) {
    size_t sizes[NUM_PARAM_TENSORS], offset = 0;
    gpt2_param_sizes(cfg, sizes);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (size_t i = 0; i < sizes[t]; i++) {
            float v = params[offset + i];
            if (!isfinite(v))
                return fail(err, "%s: tensor %s has a non-finite value (%f) at element %zu%s",
                            path, gpt2_param_names[t], v, i, after);
        }
        offset += sizes[t];
    }
    return 0;
}

int checkpoint_write_unrenamed(AtomicFile *af, const char *path, const GPT2Config *cfg,
                               const float *params, char *err) {
    af->fp = NULL;
    af->slot = -1;
    char why[ERR_LEN];
    if (gpt2_config_validate(cfg, why) != 0) return fail(err, "%s: %s", path, why);
    if (check_finite(path, cfg, params, ": not written (has the run diverged?)", err) != 0)
        return -1;
    int32_t header[CHECKPOINT_HEADER_INTS];
    header_from_config(cfg, header);
    if (binfile_create(af, path, header, err) != 0) return -1;
    if (atomic_write(af, params, gpt2_num_params(cfg) * sizeof(float), err) != 0) return -1;
    return atomic_finish(af, err);
}

int checkpoint_write(const char *path, const GPT2Config *cfg, const float *params, char *err) {
    AtomicFile af;
    if (checkpoint_write_unrenamed(&af, path, cfg, params, err) != 0) return -1;
    return atomic_commit(&af, err);
}

// Everything the header alone can tell us beyond the magic: version, flag, config.
static int check_header(const char *path, const int32_t header[CHECKPOINT_HEADER_INTS],
                        GPT2Config *cfg, char *err) {
    if (header[1] == CHECKPOINT_VERSION_BF16)
        return fail(err,
                    "%s: version %d (bf16 parameters) is not supported yet, expected %d (fp32)",
                    path, header[1], CHECKPOINT_VERSION_FP32);
    if (header[1] != CHECKPOINT_VERSION_FP32)
        return fail(err, "%s: unsupported version %d, expected %d (fp32)", path, header[1],
                    CHECKPOINT_VERSION_FP32);
    if (header[8] != 0 && header[8] != 1)
        return fail(err, "%s: header[8] (untied flag) must be 0 or 1, got %d", path, header[8]);
    *cfg = config_from_header(header);
    char why[ERR_LEN];
    if (gpt2_config_validate(cfg, why) != 0) return fail(err, "%s: bad config: %s", path, why);
    return 0;
}

// Opens path and checks all but the parameters' values: the header and the
// file's exact length. On success f is at the first parameter.
static int open_checkpoint(const char *path, BinFile *f, GPT2Config *cfg, char *err) {
    int32_t header[CHECKPOINT_HEADER_INTS];
    if (binfile_open(f, path, header, CHECKPOINT_MAGIC, "model checkpoint", err) != 0) return -1;
    int rc = check_header(path, header, cfg, err);
    if (rc == 0) {
        size_t n = gpt2_num_params(cfg);
        rc = binfile_expect_length(f, CHECKPOINT_HEADER_BYTES + n * sizeof(float), err,
                                   "(header + %zu fp32 parameters)", n);
    }
    if (rc != 0) binfile_close(f);
    return rc;
}

int checkpoint_read(const char *path, GPT2Config *cfg, float **params, char *err) {
    *params = NULL;
    BinFile f;
    GPT2Config got;
    if (open_checkpoint(path, &f, &got, err) != 0) return -1;
    size_t n = gpt2_num_params(&got);
    float *buf = xmalloc(n * sizeof(float));
    int rc = binfile_read(&f, buf, sizeof(float), n, "parameters", err);
    binfile_close(&f);
    if (rc == 0) rc = check_finite(path, &got, buf, "", err);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    *cfg = got;
    *params = buf;
    return 0;
}

int checkpoint_read_config(const char *path, GPT2Config *cfg, char *err) {
    BinFile f;
    if (open_checkpoint(path, &f, cfg, err) != 0) return -1;
    binfile_close(&f);
    return 0;
}

// ---- the fingerprint -----------------------------------------------------------
// FNV-1a's step (xor, then multiply by its 64-bit prime) over the values'
// 32-bit patterns, one value per step: about four times faster than FNV-1a
// over bytes, and fed the same way from memory and from a file in pieces.
// A final mix spreads the last values' bits over the whole result.
#define CHECKSUM_START 0xcbf29ce484222325ull
#define CHECKSUM_PRIME 0x100000001b3ull

static uint64_t checksum_add(uint64_t h, const float *values, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &values[i], sizeof bits);
        h = (h ^ bits) * CHECKSUM_PRIME;
    }
    return h;
}

static uint64_t checksum_end(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

uint64_t checkpoint_params_checksum(const float *params, size_t n) {
    return checksum_end(checksum_add(CHECKSUM_START, params, n));
}

int checkpoint_file_checksum(const char *path, uint64_t *checksum, char *err) {
    BinFile f;
    GPT2Config cfg;
    if (open_checkpoint(path, &f, &cfg, err) != 0) return -1;
    enum { PIECE = 1 << 20 };  // values per read: 4 MiB
    float *piece = xmalloc(PIECE * sizeof(float));
    uint64_t h = CHECKSUM_START;
    int rc = 0;
    for (size_t left = gpt2_num_params(&cfg); left > 0 && rc == 0;) {
        size_t n = left < PIECE ? left : PIECE;
        rc = binfile_read(&f, piece, sizeof(float), n, "parameters", err);
        h = checksum_add(h, piece, n);
        left -= n;
    }
    binfile_close(&f);
    free(piece);
    *checksum = checksum_end(h);
    return rc;
}
