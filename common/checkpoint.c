// checkpoint.c: see checkpoint.h.
#include "checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

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
    if (atomic_open(&af, path, err) != 0) return -1;
    if (atomic_write(&af, header, sizeof(header), err) != 0) return -1;
    if (atomic_write(&af, params, gpt2_num_params(cfg) * sizeof(float), err) != 0) return -1;
    return atomic_commit(&af, err);
}

// Opens path, measures it and reads its header. On success fp is left at the
// first parameter.
static int open_with_header(const char *path, FILE **out, long *length,
                            int32_t header[CHECKPOINT_HEADER_INTS], char *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return fail(err, "%s: cannot open: %s", path, strerror(errno));
    *length = -1;
    if (fseek(fp, 0, SEEK_END) == 0) *length = ftell(fp);
    if (*length < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return fail(err, "%s: cannot determine the file's length", path);
    }
    if (*length == 0) {
        fclose(fp);
        return fail(err, "%s: empty file (0 bytes), expected a %d-byte checkpoint header", path,
                    CHECKPOINT_HEADER_BYTES);
    }
    if (*length < CHECKPOINT_HEADER_BYTES || fread(header, CHECKPOINT_HEADER_BYTES, 1, fp) != 1) {
        fclose(fp);
        return fail(err, "%s: file is %ld bytes, shorter than the %d-byte checkpoint header",
                    path, *length, CHECKPOINT_HEADER_BYTES);
    }
    *out = fp;
    return 0;
}

// Everything the header alone can tell us: magic, version, flag, config.
static int check_header(const char *path, const int32_t header[CHECKPOINT_HEADER_INTS],
                        GPT2Config *cfg, char *err) {
    if (header[0] != CHECKPOINT_MAGIC)
        return fail(err, "%s: bad magic %d, expected %d (not a model checkpoint)", path,
                    header[0], CHECKPOINT_MAGIC);
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

int checkpoint_read(const char *path, GPT2Config *cfg, float **params, char *err) {
    *params = NULL;
    FILE *fp = NULL;
    long length = 0;
    int32_t header[CHECKPOINT_HEADER_INTS];
    if (open_with_header(path, &fp, &length, header, err) != 0) return -1;
    GPT2Config got;
    if (check_header(path, header, &got, err) != 0) {
        fclose(fp);
        return -1;
    }
    size_t n = gpt2_num_params(&got);
    size_t expected = CHECKPOINT_HEADER_BYTES + n * sizeof(float);
    if ((size_t)length != expected) {
        fclose(fp);
        return fail(err, "%s: file is %ld bytes, expected %zu (header + %zu fp32 parameters)",
                    path, length, expected, n);
    }
    float *buf = xmalloc(n * sizeof(float));
    size_t read = fread(buf, sizeof(float), n, fp);
    fclose(fp);
    if (read != n) {
        free(buf);
        return fail(err, "%s: read %zu of %zu parameters (read error)", path, read, n);
    }
    if (check_finite(path, &got, buf, err) != 0) {
        free(buf);
        return -1;
    }
    *cfg = got;
    *params = buf;
    return 0;
}
