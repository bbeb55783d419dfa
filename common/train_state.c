// train_state.c: see train_state.h.
#include "train_state.h"

#include <stdio.h>
#include <string.h>

#include "binfile.h"
#include "util.h"

static void put_u64(int32_t *h, int at, uint64_t x) {
    h[at] = (int32_t)(uint32_t)(x & 0xffffffffu);
    h[at + 1] = (int32_t)(uint32_t)(x >> 32);
}

static uint64_t get_u64(const int32_t *h, int at) {
    return (uint64_t)(uint32_t)h[at] | ((uint64_t)(uint32_t)h[at + 1] << 32);
}

int train_state_write(const char *path, const TrainProgress *p, const float *m, const float *v,
                      size_t num_params, char *err) {
    int32_t header[BINFILE_HEADER_INTS] = {0};
    header[0] = TRAIN_STATE_MAGIC;
    header[1] = TRAIN_STATE_VERSION;
    header[2] = p->step;
    put_u64(header, 3, num_params);
    put_u64(header, 5, p->data.epoch);
    put_u64(header, 7, p->data.window);
    put_u64(header, 9, p->sampler_rng);
    header[11] = p->B;
    header[12] = p->T;
    AtomicFile af;
    if (binfile_create(&af, path, header, err)) return -1;
    if (atomic_write(&af, m, num_params * sizeof(float), err)) return -1;
    if (atomic_write(&af, v, num_params * sizeof(float), err)) return -1;
    return atomic_commit(&af, err);
}

int train_state_read(const char *path, TrainProgress *p, float *m, float *v, size_t num_params,
                     char *err) {
    BinFile f;
    int32_t header[BINFILE_HEADER_INTS];
    if (binfile_open(&f, path, header, TRAIN_STATE_MAGIC, "training state", err)) return -1;
    int rc;
    if (header[1] != TRAIN_STATE_VERSION) {
        rc = fail(err, "%s: unsupported version %d, expected %d", path, header[1],
                  TRAIN_STATE_VERSION);
    } else if (get_u64(header, 3) != num_params) {
        rc = fail(err, "%s: written for %llu parameters, but the model has %zu", path,
                  (unsigned long long)get_u64(header, 3), num_params);
    } else if (header[2] < 0 || header[11] <= 0 || header[12] <= 0) {
        rc = fail(err, "%s: corrupt header (step %d, B %d, T %d)", path, header[2], header[11],
                  header[12]);
    } else {
        rc = binfile_expect_length(&f, BINFILE_HEADER_BYTES + 2 * num_params * sizeof(float), err,
                                   "(header + 2 x %zu fp32 moments)", num_params);
    }
    if (!rc) rc = binfile_read(&f, m, sizeof(float), num_params, "first moments", err);
    if (!rc) rc = binfile_read(&f, v, sizeof(float), num_params, "second moments", err);
    binfile_close(&f);
    if (rc) return -1;
    p->step = header[2];
    p->data.epoch = get_u64(header, 5);
    p->data.window = get_u64(header, 7);
    p->sampler_rng = get_u64(header, 9);
    p->B = header[11];
    p->T = header[12];
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
