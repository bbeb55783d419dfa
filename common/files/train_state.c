// train_state.c: see train_state.h.
#define _POSIX_C_SOURCE 200809L  // opendir, readdir
#include "files/train_state.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/binfile.h"

static void put_u64(int32_t *h, int at, uint64_t x) {
    h[at] = (int32_t)(uint32_t)(x & 0xffffffffu);
    h[at + 1] = (int32_t)(uint32_t)(x >> 32);
}

static uint64_t get_u64(const int32_t *h, int at) {
    return (uint64_t)(uint32_t)h[at] | ((uint64_t)(uint32_t)h[at + 1] << 32);
}

// The first non-finite moment, named; `after` ends the message.
static int check_finite(const char *path, const char *what, const float *x, size_t n,
                        const char *after, char *err) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return fail(err, "%s: AdamW's %s has a non-finite value (%f) at element %zu%s", path,
                        what, x[i], i, after);
    return 0;
}

// ---- chapter 13: the FP8 scaling state ------------------------------------------------

void fp8_state_alloc(Fp8State *s, int tensors, int history) {
    *s = (Fp8State){.tensors = tensors, .history = history};
    s->values = xcalloc((size_t)tensors * ((size_t)history + 2), sizeof(float));
}

void fp8_state_free(Fp8State *s) {
    free(s->values);
    *s = (Fp8State){0};
}

float *fp8_state_tensor(const Fp8State *s, int i) {
    return s->values + (size_t)i * ((size_t)s->history + 2);
}

static size_t fp8_state_bytes(int tensors, int history) {
    return (size_t)tensors * ((size_t)history + 2) * sizeof(float);
}

// The first value a cast could not have made, named: a scale that is not a
// positive finite float, or an amax (this step's or the history's) that is
// not a finite one >= 0. `after` ends the message.
static int check_fp8_values(const char *path, const Fp8State *s, const char *after, char *err) {
    for (int i = 0; i < s->tensors; i++) {
        const float *t = fp8_state_tensor(s, i);
        if (!(isfinite(t[0]) && t[0] > 0))
            return fail(err, "%s: FP8 tensor %d's scale is %g, not a positive finite value%s",
                        path, i, t[0], after);
        for (int h = 1; h < 2 + s->history; h++)
            if (!(isfinite(t[h]) && t[h] >= 0))
                return fail(err, "%s: FP8 tensor %d's %s is %g, not a finite value >= 0%s",
                            path, i, h == 1 ? "amax" : "amax history", t[h], after);
    }
    return 0;
}

// ---- writing ----------------------------------------------------------------------------

// The header every version shares (train_state.h).
static void fill_header(int32_t header[BINFILE_HEADER_INTS], int version, const TrainProgress *p,
                        size_t num_params) {
    memset(header, 0, BINFILE_HEADER_INTS * sizeof(int32_t));
    header[0] = TRAIN_STATE_MAGIC;
    header[1] = version;
    header[2] = p->step;
    put_u64(header, 3, num_params);
    put_u64(header, 5, p->data.epoch);
    put_u64(header, 7, p->data.window);
    put_u64(header, 9, p->sampler_rng);
    header[11] = p->B;
    header[12] = p->T;
    put_u64(header, 13, p->model_checksum);
}

int train_state_write_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                const float *m, const float *v, size_t num_params, char *err) {
    af->fp = NULL;
    af->slot = -1;
    const char *after = ": not written (has the run diverged?)";
    if (check_finite(path, "first moment", m, num_params, after, err) ||
        check_finite(path, "second moment", v, num_params, after, err))
        return -1;
    int32_t header[BINFILE_HEADER_INTS];
    fill_header(header, TRAIN_STATE_VERSION, p, num_params);
    if (binfile_create(af, path, header, err)) return -1;
    if (atomic_write(af, m, num_params * sizeof(float), err)) return -1;
    if (atomic_write(af, v, num_params * sizeof(float), err)) return -1;
    return atomic_finish(af, err);
}

int train_state_write(const char *path, const TrainProgress *p, const float *m, const float *v,
                      size_t num_params, char *err) {
    AtomicFile af;
    if (train_state_write_unrenamed(&af, path, p, m, v, num_params, err)) return -1;
    return atomic_commit(&af, err);
}

// ---- reading ----------------------------------------------------------------------------

// What a header says of the payload that follows it.
typedef struct {
    int version;
    size_t num_params;
    unsigned mask;                            // [15]: the 8-bit tensors (versions 3 and 4)
    int fp8_tensors, fp8_history, fp8_ready;  // [16] to [18]: version 4's, else 0
} StateHeader;

// Version 4's FP8 fields, each within its range (train_state.h).
static int check_fp8_header(const char *path, const int32_t *h, char *err) {
    if (h[16] <= 0 || h[16] % TRAIN_STATE_FP8_PER_LAYER != 0)
        return fail(err, "%s: corrupt header: %d FP8 tensors, expected a positive multiple of %d "
                         "(4 linear layers x 3 operands a layer)", path, h[16],
                    TRAIN_STATE_FP8_PER_LAYER);
    if (h[17] < 1 || h[17] > TRAIN_STATE_FP8_MAX_HISTORY)
        return fail(err, "%s: corrupt header: FP8 amax histories of %d steps, expected 1 to %d",
                    path, h[17], TRAIN_STATE_FP8_MAX_HISTORY);
    if (h[18] != 0 && h[18] != 1)
        return fail(err, "%s: corrupt header: FP8 history_ready %d, expected 0 or 1", path, h[18]);
    return 0;
}

// Opens path and checks its header, and its length where the header alone
// sets it (fp32 moments: version 2, and version 4 without 8-bit moments;
// the others need the model's layout: train_state_read_run). On success f
// is at the first moment, and *p and *out hold what the header says.
static int open_state(const char *path, BinFile *f, TrainProgress *p, StateHeader *out,
                      char *err) {
    int32_t h[BINFILE_HEADER_INTS];
    if (binfile_open(f, path, h, TRAIN_STATE_MAGIC, "training state", err)) return -1;
    const uint64_t n = get_u64(h, 3);
    const int version = h[1];
    int rc = 0;
    if (version == 1)
        rc = fail(err, "%s: a version 1 training state, written before states named their "
                       "model: it cannot be checked against the model beside it, so it is not "
                       "resumed (--init-from MODEL starts from the weights alone, with fresh "
                       "optimizer moments)", path);
    else if (version < TRAIN_STATE_VERSION || version > TRAIN_STATE_VERSION_FP8)
        rc = fail(err, "%s: unsupported version %d, expected %d, %d or %d", path, version,
                  TRAIN_STATE_VERSION, TRAIN_STATE_VERSION_8BIT, TRAIN_STATE_VERSION_FP8);
    else if (h[2] < 0 || h[11] <= 0 || h[12] <= 0)
        rc = fail(err, "%s: corrupt header (step %d, B %d, T %d)", path, h[2], h[11], h[12]);
    else if (version == TRAIN_STATE_VERSION_FP8)
        rc = check_fp8_header(path, h, err);
    const int fp8 = version == TRAIN_STATE_VERSION_FP8;
    const size_t fp8_bytes = fp8 && rc == 0 ? fp8_state_bytes(h[16], h[17]) : 0;
    const int fp32_moments = version == TRAIN_STATE_VERSION || (fp8 && h[15] == 0);
    if (rc == 0 && n > (SIZE_MAX - BINFILE_HEADER_BYTES - fp8_bytes) / (2 * sizeof(float)))
        rc = fail(err, "%s: corrupt header: %llu parameters", path, (unsigned long long)n);
    else if (rc == 0 && fp32_moments)
        rc = binfile_expect_length(f, BINFILE_HEADER_BYTES + 2 * n * sizeof(float) + fp8_bytes,
                                   err, "(header + 2 x %llu fp32 moments%s)",
                                   (unsigned long long)n, fp8 ? " + the FP8 state" : "");
    if (rc) {
        binfile_close(f);
        return -1;
    }
    *out = (StateHeader){.version = version, .num_params = (size_t)n,
                         .mask = version == TRAIN_STATE_VERSION ? 0 : (unsigned)h[15]};
    if (fp8) out->fp8_tensors = h[16], out->fp8_history = h[17], out->fp8_ready = h[18];
    *p = (TrainProgress){.step = h[2], .data = {get_u64(h, 5), get_u64(h, 7)},
                         .sampler_rng = get_u64(h, 9), .B = h[11], .T = h[12],
                         .model_checksum = get_u64(h, 13)};
    return 0;
}

int train_state_read_progress(const char *path, TrainProgress *p, size_t *num_params,
                              char *err) {
    BinFile f;
    StateHeader h;
    if (open_state(path, &f, p, &h, err)) return -1;
    binfile_close(&f);
    *num_params = h.num_params;
    return 0;
}

int train_state_read(const char *path, TrainProgress *p, float *m, float *v, size_t num_params,
                     char *err) {
    BinFile f;
    TrainProgress got;
    StateHeader h;
    if (open_state(path, &f, &got, &h, err)) return -1;
    const size_t n = h.num_params;
    int rc = 0;
    if (h.version != TRAIN_STATE_VERSION)
        rc = fail(err, "%s: a version %d state (%s): this trainer reads fp32 moments only", path,
                  h.version, h.version == TRAIN_STATE_VERSION_8BIT ? "8-bit moments, chapter 10"
                                                                   : "FP8 scales, chapter 13");
    else if (n != num_params)
        rc = fail(err, "%s: written for %zu parameters, but the model has %zu", path, n,
                  num_params);
    if (!rc) rc = binfile_read(&f, m, sizeof(float), n, "first moments", err);
    if (!rc) rc = binfile_read(&f, v, sizeof(float), n, "second moments", err);
    binfile_close(&f);
    if (!rc) rc = check_finite(path, "first moment", m, n, "", err);
    if (!rc) rc = check_finite(path, "second moment", v, n, "", err);
    if (rc) return -1;
    *p = got;
    return 0;
}

// ---- chapters 10 and 13: the AdamState of adam_state.h, the FP8 state ------------------

// The moments of s, in its layout, all finite (versions 3 and 4).
static int check_moments(const char *path, const AdamState *s, const char *after, char *err) {
    const AdamLayout *l = &s->layout;
    return check_finite(path, "first moment", s->m, l->fp32_values, after, err) ||
                   check_finite(path, "second moment", s->v, l->fp32_values, after, err) ||
                   check_finite(path, "first moment's scales", s->m_absmax, l->q8_blocks, after,
                                err) ||
                   check_finite(path, "second moment's scales", s->v_absmax, l->q8_blocks, after,
                                err)
               ? -1
               : 0;
}

// Their bytes in a file: the fp32 moments, then (with 8-bit ones) the 8-bit
// moments and their scales.
static size_t moments_bytes(const AdamLayout *l) {
    return 2 * l->fp32_values * sizeof(float) + 2 * l->q8_values +
           2 * l->q8_blocks * sizeof(float);
}

static int write_moments(AtomicFile *af, const AdamState *s, char *err) {
    const AdamLayout *l = &s->layout;
    if (atomic_write(af, s->m, l->fp32_values * sizeof(float), err) ||
        atomic_write(af, s->v, l->fp32_values * sizeof(float), err))
        return -1;
    if (l->q8_values == 0) return 0;
    return atomic_write(af, s->m_q, l->q8_values, err) ||
                   atomic_write(af, s->v_q, l->q8_values, err) ||
                   atomic_write(af, s->m_absmax, l->q8_blocks * sizeof(float), err) ||
                   atomic_write(af, s->v_absmax, l->q8_blocks * sizeof(float), err)
               ? -1
               : 0;
}

// ANCHOR: state_write_8bit
// Version 3 (8-bit moments) or 4 (FP8 state, fp8 not NULL): the header,
// the moments, the FP8 state.
static int write_masked_state(AtomicFile *af, const char *path, const TrainProgress *p,
                              const AdamState *s, const Fp8State *fp8, char *err) {
    const AdamLayout *l = &s->layout;
    af->fp = NULL;
    af->slot = -1;
    const char *after = ": not written (has the run diverged?)";
    if (check_moments(path, s, after, err) || (fp8 && check_fp8_values(path, fp8, after, err)))
        return -1;
    int32_t header[BINFILE_HEADER_INTS];
    fill_header(header, fp8 ? TRAIN_STATE_VERSION_FP8 : TRAIN_STATE_VERSION_8BIT, p,
                l->num_params);
    header[15] = (int32_t)adam_layout_mask(l);
    if (fp8) {
        header[16] = fp8->tensors;
        header[17] = fp8->history;
        header[18] = fp8->history_ready;
    }
    if (binfile_create(af, path, header, err) || write_moments(af, s, err)) return -1;
    if (fp8 && atomic_write(af, fp8->values, fp8_state_bytes(fp8->tensors, fp8->history), err))
        return -1;
    return atomic_finish(af, err);
}
// ANCHOR_END: state_write_8bit

int train_state_write_adam_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                     const AdamState *s, char *err) {
    const AdamLayout *l = &s->layout;
    if (l->q8_values == 0)  // chapters 00-09's layout: version 2, as before
        return train_state_write_unrenamed(af, path, p, s->m, s->v, l->num_params, err);
    return write_masked_state(af, path, p, s, NULL, err);
}

int train_state_write_run_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                    const AdamState *s, const Fp8State *fp8, char *err) {
    if (fp8 == NULL || fp8->tensors == 0)  // no FP8 GEMMs ran: version 2 or 3
        return train_state_write_adam_unrenamed(af, path, p, s, err);
    return write_masked_state(af, path, p, s, fp8, err);
}

// ---- reading versions 2 to 4 into an AdamState -------------------------------------------

// The model's side of the header: its parameter count, and (version 4) its
// layers' FP8 tensors; and the 8-bit tensors a model of that shape can have.
static int check_against_model(const char *path, const StateHeader *h, const GPT2Config *cfg,
                               char *err) {
    const size_t want = gpt2_num_params(cfg);
    if (h->num_params != want)
        return fail(err, "%s: written for %zu parameters, but the model has %zu", path,
                    h->num_params, want);
    if (h->mask >> NUM_PARAM_TENSORS != 0 ||
        (h->version == TRAIN_STATE_VERSION_8BIT && h->mask == 0))
        return fail(err, "%s: corrupt header: quantized tensors 0x%x", path, h->mask);
    const long long fp8_want = (long long)cfg->num_layers * TRAIN_STATE_FP8_PER_LAYER;
    if (h->fp8_tensors != 0 && h->fp8_tensors != fp8_want)
        return fail(err, "%s: FP8 scales of %d tensors, but a model of %d layers has %lld (%d a "
                         "layer): a state of another model", path, h->fp8_tensors,
                    cfg->num_layers, fp8_want, TRAIN_STATE_FP8_PER_LAYER);
    return 0;
}

// The moments, into s (allocated in the file's layout), all finite.
static int read_moments(BinFile *f, const char *path, AdamState *s, char *err) {
    const AdamLayout *l = &s->layout;
    if (binfile_read(f, s->m, sizeof(float), l->fp32_values, "first moments", err) ||
        binfile_read(f, s->v, sizeof(float), l->fp32_values, "second moments", err))
        return -1;
    if (l->q8_values > 0 &&
        (binfile_read(f, s->m_q, 1, l->q8_values, "8-bit first moments", err) ||
         binfile_read(f, s->v_q, 1, l->q8_values, "8-bit second moments", err) ||
         binfile_read(f, s->m_absmax, sizeof(float), l->q8_blocks, "first moments' scales",
                      err) ||
         binfile_read(f, s->v_absmax, sizeof(float), l->q8_blocks, "second moments' scales",
                      err)))
        return -1;
    return check_moments(path, s, "", err);
}

// Version 4's FP8 state, into *fp8 (allocated here), its values checked.
static int read_fp8_state(BinFile *f, const char *path, const StateHeader *h, Fp8State *fp8,
                          char *err) {
    fp8_state_alloc(fp8, h->fp8_tensors, h->fp8_history);
    fp8->history_ready = h->fp8_ready;
    const size_t n = (size_t)h->fp8_tensors * ((size_t)h->fp8_history + 2);
    if (binfile_read(f, fp8->values, sizeof(float), n, "FP8 scales and amax histories", err) ||
        check_fp8_values(path, fp8, "", err)) {
        fp8_state_free(fp8);
        return -1;
    }
    return 0;
}

int train_state_read_run(const char *path, const GPT2Config *cfg, TrainProgress *p,
                         AdamState *s, Fp8State *fp8, char *err) {
    BinFile f;
    TrainProgress got;
    StateHeader h;
    if (open_state(path, &f, &got, &h, err)) return -1;
    if (check_against_model(path, &h, cfg, err)) {
        binfile_close(&f);
        return -1;
    }
    // The length before any allocation (binfile.h): the layout is the model's
    // and the mask's, the FP8 state's size the header's, both checked above.
    AdamLayout layout = adam_layout_masked(cfg, h.mask);
    const size_t fp8_bytes = fp8_state_bytes(h.fp8_tensors, h.fp8_history);
    int rc = binfile_expect_length(&f, BINFILE_HEADER_BYTES + moments_bytes(&layout) + fp8_bytes,
                                   err, "(header + %zu fp32 and %zu 8-bit moments of each kind, "
                                   "%zu scales, and %zu bytes of FP8 state)",
                                   layout.fp32_values, layout.q8_values, layout.q8_blocks,
                                   fp8_bytes);
    if (rc) {
        binfile_close(&f);
        return -1;
    }
    Fp8State scales = {0};
    adam_state_alloc(s, &layout);
    rc = read_moments(&f, path, s, err);
    if (!rc && h.fp8_tensors > 0) rc = read_fp8_state(&f, path, &h, &scales, err);
    binfile_close(&f);
    if (rc) {
        adam_state_free(s);
        return -1;
    }
    if (fp8) *fp8 = scales;
    else fp8_state_free(&scales);
    *p = got;
    return 0;
}

int train_state_read_adam(const char *path, const GPT2Config *cfg, TrainProgress *p,
                          AdamState *s, char *err) {
    return train_state_read_run(path, cfg, p, s, NULL, err);
}

void checkpoint_paths(const char *dir, int step, char *model_path, char *state_path, size_t cap) {
    snprintf(model_path, cap, "%s/model_%06d.bin", dir, step);
    snprintf(state_path, cap, "%s/state_%06d.bin", dir, step);
}

int state_path_for_model(const char *model_path, char *state_path, size_t cap, char *err) {
    const char *slash = strrchr(model_path, '/');
    const char *base = slash ? slash + 1 : model_path;
    if (strncmp(base, "model_", 6) != 0)
        return fail(err, "%s: expected a file named model_NNNNNN.bin, written by the trainer",
                    model_path);
    size_t dir_len = (size_t)(base - model_path);
    if (strlen(model_path) + 1 > cap) return fail(err, "%s: path too long", model_path);
    memcpy(state_path, model_path, dir_len);
    snprintf(state_path + dir_len, cap - dir_len, "state_%s", base + 6);
    return 0;
}

// The step in a file name "<prefix>NNNNNN.bin", or -1.
static int step_in_name(const char *name, const char *prefix) {
    size_t p = strlen(prefix);
    if (strncmp(name, prefix, p) != 0) return -1;
    const char *digits = name + p;
    size_t n = strspn(digits, "0123456789");
    if (n == 0 || n > 9 || strcmp(digits + n, ".bin") != 0) return -1;
    return atoi(digits);
}

int step_of_model_path(const char *model_path) {
    const char *slash = strrchr(model_path, '/');
    return step_in_name(slash ? slash + 1 : model_path, "model_");
}

int latest_checkpoint(const char *dir, char *model_path, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int best = -1;
    char model[1024], state[1024];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int step = step_in_name(e->d_name, "model_");
        if (step <= best) continue;
        checkpoint_paths(dir, step, model, state, sizeof model);
        // save_run puts the state in place before its model, so a model has
        // its state; one without (the state removed by hand, or the save of
        // a trainer that renamed the model first cut short) is passed over.
        if (access(state, F_OK) == 0) best = step;
    }
    closedir(d);
    if (best >= 0) checkpoint_paths(dir, best, model_path, state, cap);
    return best;
}
