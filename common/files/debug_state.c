// debug_state.c: see debug_state.h.
#include "files/debug_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/binfile.h"
#include "util/util.h"

_Static_assert(DEBUG_STATE_HEADER_INTS == BINFILE_HEADER_INTS,
               "debug_state.h and binfile.h agree");

// ---- the gradients' layout ------------------------------------------------------

void debug_grad_sizes(const GPT2Config *cfg, size_t sizes[NUM_PARAM_TENSORS]) {
    gpt2_param_sizes(cfg, sizes);
}

size_t debug_grads_size(const GPT2Config *cfg) { return gpt2_num_params(cfg); }

void debug_grad_real_sizes(const GPT2Config *cfg, size_t sizes[NUM_PARAM_TENSORS]) {
    gpt2_param_sizes(cfg, sizes);
    size_t real = (size_t)cfg->vocab_size * cfg->channels;
    sizes[0] = real;
    if (!cfg->tied) sizes[PARAM_LM_HEAD] = real;
}

// Where tensor t starts in a buffer whose tensors have these sizes.
static size_t offset_of(const size_t sizes[NUM_PARAM_TENSORS], int t) {
    size_t offset = 0;
    for (int i = 0; i < t; i++) offset += sizes[i];
    return offset;
}

void debug_grad_copy_out(const GPT2Config *cfg, const float *grads, int t, float *out) {
    size_t sizes[NUM_PARAM_TENSORS], real[NUM_PARAM_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    debug_grad_real_sizes(cfg, real);
    // The padded tensor is the real rows followed by the padding rows.
    memcpy(out, grads + offset_of(sizes, t), real[t] * sizeof(float));
    memset(out + real[t], 0, (sizes[t] - real[t]) * sizeof(float));
}

void debug_grads_to_param_layout(const GPT2Config *cfg, const float *grads, float *param_grads) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        debug_grad_copy_out(cfg, grads, t, param_grads + offset_of(sizes, t));
}

void debug_grads_from_param_layout(const GPT2Config *cfg, const float *param_grads, float *grads) {
    debug_grads_to_param_layout(cfg, param_grads, grads);  // the same layout
}

// ---- checks shared by the reader and the writer ----------------------------

// The file's length for a batch of B x T, or -1 if it overflows size_t (a
// corrupt header can hold any B).
static int expected_length(const GPT2Config *cfg, int B, int T, size_t *bytes) {
    size_t n, logits, floats;
    if (__builtin_mul_overflow((size_t)B, (size_t)T, &n)) return -1;
    if (__builtin_mul_overflow(n, (size_t)cfg->vocab_size, &logits)) return -1;
    // 2n int32 tokens + logits + loss + grads, all 4 bytes each.
    if (__builtin_add_overflow(logits, 2 * n + 1 + debug_grads_size(cfg), &floats)) return -1;
    if (__builtin_mul_overflow(floats, (size_t)4, bytes)) return -1;
    return __builtin_add_overflow(*bytes, (size_t)DEBUG_STATE_HEADER_BYTES, bytes) ? -1 : 0;
}

static int check_batch_shape(const char *path, const GPT2Config *cfg, int B, int T, char *err) {
    if (B <= 0) return fail(err, "%s: batch size B must be positive, got %d", path, B);
    if (T <= 0) return fail(err, "%s: sequence length T must be positive, got %d", path, T);
    if (T > cfg->max_seq_len)
        return fail(err, "%s: sequence length T = %d exceeds the model's max_seq_len %d", path, T,
                    cfg->max_seq_len);
    return 0;
}

static int check_tokens(const char *path, const char *what, const int32_t *ids, size_t n, int V,
                        char *err) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return fail(err, "%s: %s[%zu] is %d, outside the vocabulary [0, %d)", path, what, i,
                        (int)ids[i], V);
    return 0;
}

static int check_finite(const char *path, const char *what, const float *v, size_t n,
                        char *err) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return fail(err, "%s: %s has a non-finite value (%f) at element %zu", path, what, v[i],
                        i);
    return 0;
}

static int check_grads_finite(const char *path, const GPT2Config *cfg, const float *grads,
                              char *err) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    char what[64];
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        snprintf(what, sizeof(what), "the gradient of %s", gpt2_param_names[t]);
        if (check_finite(path, what, grads + offset_of(sizes, t), sizes[t], err) != 0) return -1;
    }
    return 0;
}

// Everything after the header: tokens in range, values finite.
static int check_contents(const char *path, const GPT2Config *cfg, const DebugState *ds,
                          char *err) {
    size_t n = (size_t)ds->B * ds->T;
    if (check_tokens(path, "x", ds->x, n, cfg->vocab_size, err) != 0) return -1;
    if (check_tokens(path, "y", ds->y, n, cfg->vocab_size, err) != 0) return -1;
    if (check_finite(path, "logits", ds->logits, n * cfg->vocab_size, err) != 0) return -1;
    if (check_finite(path, "loss", &ds->loss, 1, err) != 0) return -1;
    return check_grads_finite(path, cfg, ds->grads, err);
}

// ---- reading and writing ---------------------------------------------------

int debug_state_write(const char *path, const GPT2Config *cfg, const DebugState *ds, char *err) {
    if (check_batch_shape(path, cfg, ds->B, ds->T, err) != 0) return -1;
    size_t want = debug_grads_size(cfg);
    if (ds->num_grads != want)
        return fail(err, "%s: %zu gradient values, expected %zu for this model", path,
                    ds->num_grads, want);
    if (check_contents(path, cfg, ds, err) != 0) return -1;

    int32_t header[DEBUG_STATE_HEADER_INTS] = {0};
    header[0] = DEBUG_STATE_MAGIC;
    header[1] = DEBUG_STATE_VERSION;
    header[2] = ds->B;
    header[3] = ds->T;
    size_t n = (size_t)ds->B * ds->T;

    AtomicFile af;
    if (binfile_create(&af, path, header, err) != 0 ||
        atomic_write(&af, ds->x, n * sizeof(int32_t), err) != 0 ||
        atomic_write(&af, ds->y, n * sizeof(int32_t), err) != 0 ||
        atomic_write(&af, ds->logits, n * cfg->vocab_size * sizeof(float), err) != 0 ||
        atomic_write(&af, &ds->loss, sizeof(float), err) != 0 ||
        atomic_write(&af, ds->grads, want * sizeof(float), err) != 0)
        return -1;  // a failed write has already removed the temporary
    return atomic_commit(&af, err);
}

// The length of a file whose wte and lm_head gradients have V rows: this
// project's own layout before it adopted llm.c's. Only told apart when
// V < Vp (else the two layouts are one).
static int is_old_unpadded_length(const BinFile *f, const GPT2Config *cfg, size_t expected) {
    if (cfg->padded_vocab_size == cfg->vocab_size) return 0;
    size_t pad = (size_t)(cfg->padded_vocab_size - cfg->vocab_size) * cfg->channels;
    size_t rows = cfg->tied ? 1 : 2;
    return (size_t)f->length == expected - rows * pad * sizeof(float);
}

// Everything the header tells us beyond the magic: version, batch shape, and
// so the file's exact length.
static int check_header(BinFile *f, const GPT2Config *cfg,
                        const int32_t header[DEBUG_STATE_HEADER_INTS], char *err) {
    if (header[1] != DEBUG_STATE_VERSION)
        return fail(err, "%s: unsupported version %d, expected %d", f->path, header[1],
                    DEBUG_STATE_VERSION);
    int B = header[2], T = header[3];
    if (check_batch_shape(f->path, cfg, B, T, err) != 0) return -1;
    size_t expected;
    if (expected_length(cfg, B, T, &expected) != 0)
        return fail(err, "%s: B = %d, T = %d would make the file impossibly large", f->path, B,
                    T);
    if (is_old_unpadded_length(f, cfg, expected))
        return fail(err, "%s: file is %ld bytes, expected %zu: its wte%s gradient has V = %d "
                         "rows, the old layout of this project; llm.c's (and ours now) pads "
                         "it to Vp = %d rows: write the state again with "
                         "tools/pytorch_reference.py", f->path, f->length, expected,
                    cfg->tied ? "" : " and lm_head", cfg->vocab_size, cfg->padded_vocab_size);
    return binfile_expect_length(f, expected, err,
                                 "for B = %d, T = %d, V = %d and %zu gradient values (wte%s "
                                 "with Vp = %d rows)", B, T, cfg->vocab_size,
                                 debug_grads_size(cfg), cfg->tied ? "" : " and lm_head",
                                 cfg->padded_vocab_size);
}

int debug_state_read(const char *path, const GPT2Config *cfg, DebugState *ds, char *err) {
    memset(ds, 0, sizeof(*ds));
    char why[ERR_LEN];
    if (gpt2_config_validate(cfg, why) != 0)
        return fail(err, "%s: bad model config: %s", path, why);
    BinFile f;
    int32_t header[DEBUG_STATE_HEADER_INTS];
    if (binfile_open(&f, path, header, DEBUG_STATE_MAGIC, "debug state", err) != 0) return -1;
    if (check_header(&f, cfg, header, err) != 0) {
        binfile_close(&f);
        return -1;
    }
    ds->B = header[2];
    ds->T = header[3];
    size_t n = (size_t)ds->B * ds->T, V = cfg->vocab_size;
    ds->num_grads = debug_grads_size(cfg);
    ds->x = xmalloc(n * sizeof(int32_t));
    ds->y = xmalloc(n * sizeof(int32_t));
    ds->logits = xmalloc(n * V * sizeof(float));
    ds->grads = xmalloc(ds->num_grads * sizeof(float));
    int rc = binfile_read(&f, ds->x, sizeof(int32_t), n, "inputs", err);
    if (rc == 0) rc = binfile_read(&f, ds->y, sizeof(int32_t), n, "targets", err);
    if (rc == 0) rc = binfile_read(&f, ds->logits, sizeof(float), n * V, "logits", err);
    if (rc == 0) rc = binfile_read(&f, &ds->loss, sizeof(float), 1, "loss values", err);
    if (rc == 0) rc = binfile_read(&f, ds->grads, sizeof(float), ds->num_grads, "gradients", err);
    binfile_close(&f);
    if (rc == 0) rc = check_contents(path, cfg, ds, err);
    if (rc != 0) debug_state_free(ds);
    return rc;
}

void debug_state_free(DebugState *ds) {
    free(ds->x);
    free(ds->y);
    free(ds->logits);
    free(ds->grads);
    memset(ds, 0, sizeof(*ds));
}
