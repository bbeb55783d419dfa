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

// The header both versions share (train_state.h).
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

// Opens path and checks its header and its length; on success f is at the
// first moment, and *p and *num_params hold what the header says.
static int open_state(const char *path, BinFile *f, TrainProgress *p, size_t *num_params,
                      int *version, unsigned *mask, char *err) {
    int32_t h[BINFILE_HEADER_INTS];
    if (binfile_open(f, path, h, TRAIN_STATE_MAGIC, "training state", err)) return -1;
    uint64_t n = get_u64(h, 3);
    int rc = 0;
    if (h[1] == 1)
        rc = fail(err, "%s: a version 1 training state, written before states named their "
                       "model: it cannot be checked against the model beside it, so it is not "
                       "resumed (--init-from MODEL starts from the weights alone, with fresh "
                       "optimizer moments)", path);
    else if (h[1] != TRAIN_STATE_VERSION && h[1] != TRAIN_STATE_VERSION_8BIT)
        rc = fail(err, "%s: unsupported version %d, expected %d or %d", path, h[1],
                  TRAIN_STATE_VERSION, TRAIN_STATE_VERSION_8BIT);
    else if (h[2] < 0 || h[11] <= 0 || h[12] <= 0)
        rc = fail(err, "%s: corrupt header (step %d, B %d, T %d)", path, h[2], h[11], h[12]);
    else if (n > (SIZE_MAX - BINFILE_HEADER_BYTES) / (2 * sizeof(float)))
        rc = fail(err, "%s: corrupt header: %llu parameters", path, (unsigned long long)n);
    else if (h[1] == TRAIN_STATE_VERSION)
        rc = binfile_expect_length(f, BINFILE_HEADER_BYTES + 2 * n * sizeof(float), err,
                                   "(header + 2 x %llu fp32 moments)", (unsigned long long)n);
    if (rc) {
        binfile_close(f);
        return -1;
    }
    *num_params = (size_t)n;
    if (version) *version = h[1];
    if (mask) *mask = (unsigned)h[15];
    *p = (TrainProgress){.step = h[2], .data = {get_u64(h, 5), get_u64(h, 7)},
                         .sampler_rng = get_u64(h, 9), .B = h[11], .T = h[12],
                         .model_checksum = get_u64(h, 13)};
    return 0;
}

int train_state_read_progress(const char *path, TrainProgress *p, size_t *num_params,
                              char *err) {
    BinFile f;
    if (open_state(path, &f, p, num_params, NULL, NULL, err)) return -1;
    binfile_close(&f);
    return 0;
}

int train_state_read(const char *path, TrainProgress *p, float *m, float *v, size_t num_params,
                     char *err) {
    BinFile f;
    TrainProgress got;
    size_t n;
    int version;
    if (open_state(path, &f, &got, &n, &version, NULL, err)) return -1;
    int rc = 0;
    if (version != TRAIN_STATE_VERSION)
        rc = fail(err, "%s: a version %d state (8-bit moments, chapter 10): this trainer reads "
                       "fp32 moments only", path, version);
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

// ---- chapter 10: the AdamState of adam_state.h ---------------------------------------

// ANCHOR: state_write_8bit
int train_state_write_adam_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                     const AdamState *s, char *err) {
    const AdamLayout *l = &s->layout;
    if (l->q8_values == 0)  // chapters 00-09's layout: version 2, as before
        return train_state_write_unrenamed(af, path, p, s->m, s->v, l->num_params, err);
    af->fp = NULL;
    af->slot = -1;
    const char *after = ": not written (has the run diverged?)";
    if (check_finite(path, "first moment", s->m, l->fp32_values, after, err) ||
        check_finite(path, "second moment", s->v, l->fp32_values, after, err) ||
        check_finite(path, "first moment's scales", s->m_absmax, l->q8_blocks, after, err) ||
        check_finite(path, "second moment's scales", s->v_absmax, l->q8_blocks, after, err))
        return -1;
    int32_t header[BINFILE_HEADER_INTS];
    fill_header(header, TRAIN_STATE_VERSION_8BIT, p, l->num_params);
    header[15] = (int32_t)adam_layout_mask(l);
    if (binfile_create(af, path, header, err)) return -1;
    if (atomic_write(af, s->m, l->fp32_values * sizeof(float), err) ||
        atomic_write(af, s->v, l->fp32_values * sizeof(float), err) ||
        atomic_write(af, s->m_q, l->q8_values, err) || atomic_write(af, s->v_q, l->q8_values, err) ||
        atomic_write(af, s->m_absmax, l->q8_blocks * sizeof(float), err) ||
        atomic_write(af, s->v_absmax, l->q8_blocks * sizeof(float), err))
        return -1;
    return atomic_finish(af, err);
}
// ANCHOR_END: state_write_8bit

// The payload of a version 3 state, in its layout's buffers.
static int read_8bit_payload(BinFile *f, const char *path, AdamState *s, char *err) {
    const AdamLayout *l = &s->layout;
    const size_t bytes = 2 * l->fp32_values * sizeof(float) + 2 * l->q8_values +
                         2 * l->q8_blocks * sizeof(float);
    if (binfile_expect_length(f, BINFILE_HEADER_BYTES + bytes, err,
                              "(header + %zu fp32 and %zu 8-bit moments of each kind, and %zu "
                              "scales)", l->fp32_values, l->q8_values, l->q8_blocks) ||
        binfile_read(f, s->m, sizeof(float), l->fp32_values, "first moments", err) ||
        binfile_read(f, s->v, sizeof(float), l->fp32_values, "second moments", err) ||
        binfile_read(f, s->m_q, 1, l->q8_values, "8-bit first moments", err) ||
        binfile_read(f, s->v_q, 1, l->q8_values, "8-bit second moments", err) ||
        binfile_read(f, s->m_absmax, sizeof(float), l->q8_blocks, "first moments' scales", err) ||
        binfile_read(f, s->v_absmax, sizeof(float), l->q8_blocks, "second moments' scales", err))
        return -1;
    return check_finite(path, "first moment", s->m, l->fp32_values, "", err) ||
                   check_finite(path, "second moment", s->v, l->fp32_values, "", err) ||
                   check_finite(path, "first moment's scales", s->m_absmax, l->q8_blocks, "",
                                err) ||
                   check_finite(path, "second moment's scales", s->v_absmax, l->q8_blocks, "",
                                err)
               ? -1
               : 0;
}

int train_state_read_adam(const char *path, const GPT2Config *cfg, TrainProgress *p,
                          AdamState *s, char *err) {
    BinFile f;
    TrainProgress got;
    size_t n;
    int version;
    unsigned mask;
    if (open_state(path, &f, &got, &n, &version, &mask, err)) return -1;
    const size_t want = gpt2_num_params(cfg);
    int rc = 0;
    if (n != want)
        rc = fail(err, "%s: written for %zu parameters, but the model has %zu", path, n, want);
    else if (version == TRAIN_STATE_VERSION_8BIT &&
             (mask >> NUM_PARAM_TENSORS != 0 || mask == 0))
        rc = fail(err, "%s: corrupt header: quantized tensors 0x%x", path, mask);
    if (rc) {
        binfile_close(&f);
        return -1;
    }
    AdamLayout layout = adam_layout_masked(cfg, version == TRAIN_STATE_VERSION ? 0 : mask);
    adam_state_alloc(s, &layout);
    if (version == TRAIN_STATE_VERSION) {
        rc = binfile_read(&f, s->m, sizeof(float), n, "first moments", err) ||
             binfile_read(&f, s->v, sizeof(float), n, "second moments", err) ||
             check_finite(path, "first moment", s->m, n, "", err) ||
             check_finite(path, "second moment", s->v, n, "", err);
    } else {
        rc = read_8bit_payload(&f, path, s, err);
    }
    binfile_close(&f);
    if (rc) {
        adam_state_free(s);
        return -1;
    }
    *p = got;
    return 0;
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
