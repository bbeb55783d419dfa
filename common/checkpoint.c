// checkpoint.c: see checkpoint.h.
#include "checkpoint.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "binfile.h"
#include "util.h"

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

int checkpoint_write(const char *path, const GPT2Config *cfg, const float *params, char *err) {
    char why[ERR_LEN];
    if (gpt2_config_validate(cfg, why) != 0) return fail(err, "%s: %s", path, why);
    int32_t header[CHECKPOINT_HEADER_INTS];
    header_from_config(cfg, header);

    AtomicFile af;
    if (binfile_create(&af, path, header, err) != 0) return -1;
    if (atomic_write(&af, params, gpt2_num_params(cfg) * sizeof(float), err) != 0) return -1;
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

// Names the first tensor holding a NaN or an infinity.
static int check_finite(const char *path, const GPT2Config *cfg, const float *params, char *err) {
    size_t sizes[NUM_PARAM_TENSORS], offset = 0;
    gpt2_param_sizes(cfg, sizes);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        for (size_t i = 0; i < sizes[t]; i++) {
            float v = params[offset + i];
            if (!isfinite(v))
                return fail(err, "%s: tensor %s has a non-finite value (%f) at element %zu", path,
                            gpt2_param_names[t], v, i);
        }
        offset += sizes[t];
    }
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
    if (rc == 0) rc = check_finite(path, &got, buf, err);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    *cfg = got;
    *params = buf;
    return 0;
}
