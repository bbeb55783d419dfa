// train_state.h: what a resumed run needs besides the model: the optimizer's
// moments, the step count, the data loader's position and the sampler's RNG.
//
// A checkpoint of step N is two files in one directory:
//   model_NNNNNN.bin  the model, in llm.c's format (checkpoint.h)
//   state_NNNNNN.bin  this file:
//     header  256 int32  [0] = TRAIN_STATE_MAGIC   [1] = TRAIN_STATE_VERSION
//                        [2] = steps completed     [3],[4] = num_params (low, high 32 bits)
//                        [5],[6] = data epoch      [7],[8] = data window   (low, high)
//                        [9],[10] = sampler RNG state (low, high)
//                        [11] = B   [12] = T       the rest zero
//     m       float32    AdamW's first moment, num_params values
//     v       float32    AdamW's second moment, num_params values
// Both are written atomically (temporary file, then rename), the state file
// last, so a state file never exists without its model.
#ifndef TRAIN_STATE_H
#define TRAIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "dataloader.h"

#define TRAIN_STATE_MAGIC 20241121
#define TRAIN_STATE_VERSION 1

typedef struct {
    int step;             // optimizer steps completed
    DataPosition data;    // the training loader's position
    uint64_t sampler_rng; // Rng state of the text sampler
    int B, T;
} TrainProgress;

int train_state_write(const char *path, const TrainProgress *p, const float *m, const float *v,
                      size_t num_params, char *err);

// Reads into m and v, which hold num_params floats each; the file must have
// been written for exactly that many parameters.
int train_state_read(const char *path, TrainProgress *p, float *m, float *v, size_t num_params,
                     char *err);

// "DIR/model_000042.bin" and "DIR/state_000042.bin".
void checkpoint_paths(const char *dir, int step, char *model_path, char *state_path, size_t cap);

// The state file beside a model file: model_NNNNNN.bin -> state_NNNNNN.bin in
// the same directory. Fails when the name does not follow that pattern.
int state_path_for_model(const char *model_path, char *state_path, size_t cap, char *err);

#endif
