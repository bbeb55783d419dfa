// train_common.c: see train_common.h.
#define _POSIX_C_SOURCE 200809L
#include "train_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "util.h"

int open_data(const TrainOptions *opt, DataLoader *train, DataLoader *val, int *has_val,
              char *err) {
    int V = opt->model.vocab_size;
    *has_val = 0;
    if (dataloader_init(train, opt->train_pattern, opt->B, opt->T, V, 1, opt->seed, err)) return -1;
    if (opt->val_every <= 0) return 0;
    char val_err[ERR_LEN];
    if (dataloader_init(val, opt->val_pattern, opt->B, opt->T, V, 0, 0, val_err)) {
        dataloader_free(train);
        return fail(err, "validation data: %s", val_err);
    }
    *has_val = 1;
    return 0;
}

int load_model_for_run(const char *path, int T, GPT2Config *cfg, float **params, char *err) {
    if (checkpoint_read(path, cfg, params, err)) return -1;
    if (T > cfg->max_seq_len) {
        free(*params);
        *params = NULL;
        return fail(err, "%s: the model's max_seq_len is %d but --seq-len is %d", path,
                    cfg->max_seq_len, T);
    }
    return 0;
}

int load_state_for_run(const char *model_path, const TrainOptions *opt, TrainProgress *p,
                       float *m, float *v, size_t num_params, char *err) {
    char state_path[1024];
    if (state_path_for_model(model_path, state_path, sizeof state_path, err)) return -1;
    if (train_state_read(state_path, p, m, v, num_params, err)) return -1;
    if (p->B != opt->B || p->T != opt->T)
        return fail(err, "%s: saved with B=%d T=%d, but this run has B=%d T=%d", state_path, p->B,
                    p->T, opt->B, opt->T);
    return 0;
}

int save_run(const char *dir, const GPT2Config *cfg, const float *params, const float *m,
             const float *v, size_t num_params, const TrainProgress *p, char *model_path,
             size_t cap, char *err) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return fail(err, "%s: cannot create checkpoint directory: %s", dir, strerror(errno));
    char mpath[1024], spath[1024];
    checkpoint_paths(dir, p->step, mpath, spath, sizeof mpath);
    if (checkpoint_write(mpath, cfg, params, err)) return -1;
    if (train_state_write(spath, p, m, v, num_params, err)) return -1;
    if (model_path) snprintf(model_path, cap, "%s", mpath);
    return 0;
}
