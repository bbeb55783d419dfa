// train_state.h: what a resumed run needs besides the model: the optimizer's
// moments, the step count, the data loader's position and the sampler's RNG;
// and which model it belongs to.
//
// A checkpoint of step N is two files in one directory:
//   model_NNNNNN.bin  the model, in llm.c's format (checkpoint.h)
//   state_NNNNNN.bin  this file:
//     header  256 int32  [0] = TRAIN_STATE_MAGIC   [1] = TRAIN_STATE_VERSION (2)
//                        [2] = steps completed     [3],[4] = num_params (low, high 32 bits)
//                        [5],[6] = data epoch      [7],[8] = data window   (low, high)
//                        [9],[10] = sampler RNG state (low, high)
//                        [11] = B   [12] = T
//                        [13],[14] = the model's checksum (low, high): the
//                                    checkpoint_params_checksum of the
//                                    parameters saved beside it
//                        the rest zero
//     m       float32    AdamW's first moment, num_params values
//     v       float32    AdamW's second moment, num_params values
// The state names its model by the step and the checksum, so a resumed run
// can refuse a state that belongs to another step or another run, however the
// files were renamed or copied. (train_common.c's save_run writes the pair,
// load_state_for_run checks it.)
//
// Version 3 (chapter 10): the same header, and [15] = the tensors whose
// moments are 8-bit (bit i: tensor i of gpt2_config.h); then AdamState's
// buffers in its layout (adam_state.h: adam_layout_masked of the model's
// shape and that mask):
//     m, v                float32    the fp32 moments, fp32_values each
//     m_q, v_q            uint8      the 8-bit moments, q8_values each
//     m_absmax, v_absmax  float32    their scales, q8_blocks each
// A state without 8-bit moments is written as version 2.
//
// Version 1 (before the checksum) is refused with a message that says so: it
// cannot tell whose moments it holds, and resuming with another model's
// moments trains silently wrong. Its model still loads with --init-from.
#ifndef TRAIN_STATE_H
#define TRAIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "optim/adam_state.h"
#include "data/dataloader.h"
#include "model/gpt2_config.h"
#include "util/util.h"

#define TRAIN_STATE_MAGIC 20241121
#define TRAIN_STATE_VERSION 2
#define TRAIN_STATE_VERSION_8BIT 3

typedef struct {
    int step;                // optimizer steps completed
    DataPosition data;       // the training loader's position
    uint64_t sampler_rng;    // Rng state of the text sampler
    int B, T;
    uint64_t model_checksum; // of the model saved with it (save_run fills it in)
} TrainProgress;

// Writes the state (atomically). The moments must be finite: a state is
// never written for a run that has diverged.
int train_state_write(const char *path, const TrainProgress *p, const float *m, const float *v,
                      size_t num_params, char *err);

// The same, up to the rename (see checkpoint_write_unrenamed).
int train_state_write_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                const float *m, const float *v, size_t num_params, char *err);

// Reads into m and v, which hold num_params floats each; the file must have
// been written for exactly that many parameters, as version 2 (fp32
// moments: a version 3 state is refused, saying so).
int train_state_read(const char *path, TrainProgress *p, float *m, float *v, size_t num_params,
                     char *err);

// Chapter 10: writes s as version 3, or, when it has no 8-bit moments, as
// version 2 (train_state_write_unrenamed).
int train_state_write_adam_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                     const AdamState *s, char *err);

// Reads a version 2 or 3 state of a model of shape cfg into s, allocated
// here in the file's own layout (adam_state_free it; adam_state_convert it
// to another).
int train_state_read_adam(const char *path, const GPT2Config *cfg, TrainProgress *p,
                          AdamState *s, char *err);

// Reads the header only (after the same checks, but for the count of
// parameters, which it returns in *num_params): cheap, for a command line.
int train_state_read_progress(const char *path, TrainProgress *p, size_t *num_params,
                              char *err);

// "DIR/model_000042.bin" and "DIR/state_000042.bin".
void checkpoint_paths(const char *dir, int step, char *model_path, char *state_path, size_t cap);

// The state file beside a model file: model_NNNNNN.bin -> state_NNNNNN.bin in
// the same directory. Fails when the name does not follow that pattern.
int state_path_for_model(const char *model_path, char *state_path, size_t cap, char *err);

// The step in a model file's name: model_000042.bin -> 42; -1 when the name
// does not follow the pattern.
int step_of_model_path(const char *model_path);

// The latest complete checkpoint in dir: the model_NNNNNN.bin of the highest
// step whose state_NNNNNN.bin is there too (a state without its model is
// what a save cut short between its two renames leaves: train_common.h's
// save_run). Returns its step, with its path in model_path; -1 when there is
// none (or dir cannot be read).
int latest_checkpoint(const char *dir, char *model_path, size_t cap);

#endif
