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
// Version 4 (chapter 13): the same header, [15] as in version 3 (0: every
// moment fp32), and the FP8 layers' scaling state (fp8_layers.h, fp8.h):
//                        [16] = FP8 tensors: the model's layers x 12
//                               (TRAIN_STATE_FP8_PER_LAYER: the four linear
//                               layers' weight, input and gradient)
//                        [17] = H, the amaxes each tensor keeps (fp8.h's
//                               FP8_HISTORY, 16)
//                        [18] = 1 once a step has ended (the next step casts
//                               with delayed scales), 0 before the first
// then the moments, laid out as version 2's when [15] is 0, else as
// version 3's; then, tensor by tensor, (2 + H) float32 each:
//     scale       the scale of its next cast (real = stored * scale)
//     amax        its largest |x| in the step so far (0 between steps)
//     history     H amaxes, of the last H steps, the latest first
// in fp8_layers.h's order: layer by layer; in a layer the linear layers
// qkv, attention's projection, fc, fc's projection; in each, the weight,
// the input and the gradient: 72 bytes a tensor, 864 a layer.
// A delayed scale is the largest of the history, so without it a resumed
// run would cast with other scales than the run that never stopped, and
// drift from it: this is what makes chapter 13's resume bit-identical.
// A reader checks, besides the header's common fields: [16] a positive
// multiple of 12, and against the model: its layers x 12; 1 <= H <= 1024;
// [18] 0 or 1; the file's length exactly the header, the moments and the
// tensors' (2 + H) floats; every scale finite and positive, every amax
// finite and not negative. The GPU trainer writes version 4 whenever its
// model runs FP8 GEMMs (8-bit moments or not), and checks that H is its
// build's FP8_HISTORY (refusing the state if not: the histories would not
// mean the same steps). Which runs take the FP8 state, and why the others
// leave it, is train_gpu.c's restore_fp8_scales: a run with FP8 GEMMs
// restores it; one without (chapters before 13, --no-fp8, the fp32 build, a
// GPU without FP8 tensor cores, the CPU trainer) leaves it out, saying so,
// since it casts nothing; and a run with FP8 resuming a version 2 or 3
// state starts its scales afresh, as a new run does (its first step with
// current scaling), saying so too.
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
#define TRAIN_STATE_VERSION_FP8 4

// Version 4's sizes: FP8 tensors a layer (4 linear layers x 3 operands), and
// the longest amax history a reader takes (a bound for a corrupt header).
#define TRAIN_STATE_FP8_PER_LAYER 12
#define TRAIN_STATE_FP8_MAX_HISTORY 1024

typedef struct {
    int step;                // optimizer steps completed
    DataPosition data;       // the training loader's position
    uint64_t sampler_rng;    // Rng state of the text sampler
    int B, T;
    uint64_t model_checksum; // of the model saved with it (save_run fills it in)
} TrainProgress;

// Chapter 13's FP8 scaling state on the host, as version 4 keeps it: for
// each FP8 tensor its scale, amax and history (above). tensors = 0: none,
// a run without FP8 GEMMs (values NULL).
typedef struct {
    int tensors;        // the model's layers x TRAIN_STATE_FP8_PER_LAYER, or 0
    int history;        // H: the amaxes each tensor keeps
    int history_ready;  // 1 once a step has ended
    float *values;      // tensors x (2 + history): scale, amax, history[H]
} Fp8State;

// Allocates values for `tensors` tensors of `history` amaxes each, all 0,
// history_ready 0. fp8_state_free frees them (and leaves an empty state);
// both are safe on an empty state.
void fp8_state_alloc(Fp8State *s, int tensors, int history);
void fp8_state_free(Fp8State *s);

// Tensor i's 2 + history floats: scale, amax, history.
float *fp8_state_tensor(const Fp8State *s, int i);

// Writes the state (atomically). The moments must be finite: a state is
// never written for a run that has diverged.
int train_state_write(const char *path, const TrainProgress *p, const float *m, const float *v,
                      size_t num_params, char *err);

// The same, up to the rename (see checkpoint_write_unrenamed).
int train_state_write_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                const float *m, const float *v, size_t num_params, char *err);

// Reads into m and v, which hold num_params floats each; the file must have
// been written for exactly that many parameters, as version 2 (fp32
// moments: a version 3 or 4 state is refused, saying so).
int train_state_read(const char *path, TrainProgress *p, float *m, float *v, size_t num_params,
                     char *err);

// Chapter 10: writes s as version 3, or, when it has no 8-bit moments, as
// version 2 (train_state_write_unrenamed).
int train_state_write_adam_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                     const AdamState *s, char *err);

// Chapter 13: writes s and the FP8 state as version 4; or, when fp8 is NULL
// or empty, as train_state_write_adam_unrenamed does (version 2 or 3). The
// FP8 state's values must be valid (finite; scales positive, amaxes not
// negative), as the reader checks them.
int train_state_write_run_unrenamed(AtomicFile *af, const char *path, const TrainProgress *p,
                                    const AdamState *s, const Fp8State *fp8, char *err);

// Reads a version 2, 3 or 4 state of a model of shape cfg into s, allocated
// here in the file's own layout (adam_state_free it; adam_state_convert it
// to another), and version 4's FP8 state into *fp8 (fp8_state_free it; empty
// for versions 2 and 3). fp8 may be NULL: the FP8 state is then checked as
// any payload is, and left out.
int train_state_read_run(const char *path, const GPT2Config *cfg, TrainProgress *p,
                         AdamState *s, Fp8State *fp8, char *err);

// train_state_read_run without the FP8 state (fp8 NULL).
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
