// train_common.h: the parts of a training run that do not depend on where the
// model runs: opening the data, saving and loading checkpoints. The CPU
// trainer (train_cpu.h) and the GPU trainer (train_gpu.h) share them.
#ifndef TRAIN_COMMON_H
#define TRAIN_COMMON_H

#include <stddef.h>

#include "dataloader.h"
#include "train_options.h"
#include "train_state.h"

// Opens the shuffled training loader and, when opt->val_every > 0, the
// sequential validation loader. *has_val tells whether val was opened.
int open_data(const TrainOptions *opt, DataLoader *train, DataLoader *val, int *has_val,
              char *err);

// Reads a model checkpoint for a run with sequence length T: fills *cfg and
// returns fresh host parameters in *params (free() them).
int load_model_for_run(const char *path, int T, GPT2Config *cfg, float **params, char *err);

// Reads the training state beside a model file (state_NNNNNN.bin beside
// model_NNNNNN.bin) into m, v (num_params each) and *p, and checks that it
// was saved with this run's B and T.
int load_state_for_run(const char *model_path, const TrainOptions *opt, TrainProgress *p,
                       float *m, float *v, size_t num_params, char *err);

// Writes model_NNNNNN.bin and state_NNNNNN.bin (NNNNNN = p->step) into dir,
// creating it if needed; the model path goes to model_path (cap bytes) if
// not NULL.
int save_run(const char *dir, const GPT2Config *cfg, const float *params, const float *m,
             const float *v, size_t num_params, const TrainProgress *p, char *model_path,
             size_t cap, char *err);

#endif
