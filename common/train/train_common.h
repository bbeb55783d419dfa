// train_common.h: the parts of a training run that do not depend on where the
// model runs: checking the command line against the files it names, opening
// the data, saving and loading checkpoints, and the checks a run makes as it
// goes (a diverged loss, a stop signal). The CPU trainer (train_cpu.h,
// train_gpt2_cpu.c) and the GPU trainer (train_gpu.h, train_gpt2.c) share them.
//
// A trainer's main, in order:
//   line_buffered_stdout();
//   train_options_parse(...)  -> exit 2 on a bad flag
//   prepare_run(&opt, err)    -> exit 2: flags against files, the checkpoint
//                                directory made and tested, before any device
//   stop_signals_install();   (stop_signal.h)
//   ... build the trainer, then per step:
//   check_step_finite(...)    -> exit 1, nothing saved, on a diverged step
//   check_val_loss_finite(...) -> exit 1 on a validation loss that is not finite
//   if (stop_requested()) ... save, report_stopped_run, exit stop_exit_status()
#ifndef TRAIN_COMMON_H
#define TRAIN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "data/dataloader.h"
#include "train/train_options.h"
#include "files/train_state.h"

// ---- before anything is built ---------------------------------------------------

// stdout line by line, even into a file or a pipe (where C buffers whole
// blocks, and a log would show nothing until the first few steps were done).
void line_buffered_stdout(void);

// Everything about the command line that needs the files it names, checked
// before a model is built or a device is touched, so that a mistake costs
// nothing. In order:
//   --resume DIR  becomes DIR's latest complete checkpoint (a model with its
//                 state: save_run's models always have one);
//   --init-from / --resume: the model's shape becomes the checkpoint's; a
//                 shape flag that was given (train_options.h's GIVEN_ bits)
//                 must agree with it, and the checkpoint's vocabulary with the
//                 data's; T, when not given, is the model's max_seq_len;
//   --resume:     the state beside the model must be there and be its pair;
//                 B and T, when not given, are the state's, and must agree when
//                 given; --steps must be beyond the resumed step;
//   the data:     the training and validation shards are there; --val-batches
//                 is cut to the batches the validation shards hold;
//   checkpoints:  when on: a resumed run saves beside the checkpoint it
//                 resumed unless --checkpoint-dir is given (GIVEN_CHECKPOINT_DIR);
//                 a new run refuses a directory that holds model_*.bin files
//                 (another run's: saving there would write over them, and
//                 --resume DIR would mix the two runs), naming the latest
//                 step and the ways out; then the directory is created (with
//                 its parents) and tested for writing, and what an interrupted
//                 save left there is removed (prepare_checkpoint_dir).
// Prints a line for each value it changes and each file it removes. Returns
// 0, or -1 with a reason in err naming the flag or file and what is wrong.
int prepare_run(TrainOptions *opt, char *err);

// Creates dir and its missing parents, checks that a file can be written in
// it, and removes what a save cut short (a killed process, a power cut) left
// there: the model_*.bin.tmp and state_*.bin.tmp files, and a state_NNNNNN.bin
// without its model_NNNNNN.bin (the save died between its renames: the state
// is complete, but a state alone resumes nothing, and removing it keeps the
// directory to pairs). Each removal is printed. Errors name the directory.
int prepare_checkpoint_dir(const char *dir, char *err);

// ---- data, model, state ----------------------------------------------------------

// Opens the shuffled training loader and, when opt->val_every > 0, the
// sequential validation loader. *has_val tells whether val was opened.
int open_data(const TrainOptions *opt, DataLoader *train, DataLoader *val, int *has_val,
              char *err);

// Reads a model checkpoint for a run with sequence length T: fills *cfg and
// returns fresh host parameters in *params (free() them).
int load_model_for_run(const char *path, int T, GPT2Config *cfg, float **params, char *err);

// Reads the training state beside a model file (state_NNNNNN.bin beside
// model_NNNNNN.bin) of shape cfg into s (allocated here, in the file's
// layout: adam_state_free it), *p, and chapter 13's FP8 state into *fp8
// (fp8_state_free it; empty when the file has none; fp8 NULL: left out),
// and checks that it is that model's pair (its step and the checksum of the
// model file's parameters, train_state.h) and that it was saved with this
// run's B and T. A missing state is reported with the latest complete
// checkpoint beside it.
int load_state_for_run(const char *model_path, const TrainOptions *opt, const GPT2Config *cfg,
                       TrainProgress *p, AdamState *s, Fp8State *fp8, char *err);

// Writes model_NNNNNN.bin and state_NNNNNN.bin (NNNNNN = p->step) into dir,
// creating it if needed, as a pair: both are written whole under temporary
// names and synced, then renamed, the state first and the model last, then
// the directory is synced (sync_directory, util.h). The model's rename is the
// commit point: a model present means its state is complete beside it. A
// process that dies between the renames leaves a state without its model,
// which no reader takes for a checkpoint (--resume DIR takes the pair before)
// and prepare_checkpoint_dir removes; a power cut loses no rename that save_run
// returned from. The state records the model's checksum. Non-finite parameters or moments are
// refused and nothing is written. The model path goes to model_path (cap
// bytes) if not NULL. The state is s's and fp8's (train_state.h: version 2,
// or 3 with 8-bit moments, or 4 with chapter 13's FP8 state; fp8 NULL or
// empty: none); its parameters are s->layout.num_params.
int save_run(const char *dir, const GPT2Config *cfg, const float *params, const AdamState *s,
             const Fp8State *fp8, const TrainProgress *p, char *model_path, size_t cap,
             char *err);

// ---- as the run goes -------------------------------------------------------------

// --data-delay-us: waits `us` microseconds (nothing for 0), as a read from
// slow storage would after each training batch. The CPU is free meanwhile:
// the thread sleeps, as one blocked in a read does.
void simulated_storage_delay(int us);

// After step `step`: fails, naming the step and the value, when the loss or
// the gradient norm is NaN or infinite. The run has diverged: stop, exit 1,
// save nothing (the parameters are already ruined by that step's update).
int check_step_finite(int step, float loss, float grad_norm, char *err);

// After the validation at step `step`: fails, naming the step and the value,
// when the validation loss is NaN or infinite. The model has diverged as
// surely as when the training loss does (check_step_finite): stop, exit 1.
int check_val_loss_finite(int step, float val_loss, char *err);

// The model's parameter count for the start-up line, saying whether lm_head
// is tied: "124.44M parameters (tied: lm_head is wte)", or for an untied model
// "163.04M parameters (untied: lm_head is 38.60M of them; tied, as in GPT-2,
// 124.44M)".
void describe_param_count(const GPT2Config *cfg, char *buf, size_t cap);

// On stderr: the signal that stopped the run after `step` of `steps`, and
// what was saved (saved_model: the model file, or NULL for nothing).
void report_stopped_run(int step, int steps, const char *saved_model);

// Prints a sample of `drawn` tokens (ids, after the prompt) drawn after
// `step`, and on stderr, when a stop cut it short of the n asked for, by
// which signal and where.
struct Tokenizer;
void report_sample(const struct Tokenizer *tok, const int32_t *ids, int drawn, int n, int step);

// The tokenizer that prints samples, from the files opt names, loaded before
// a device is looked for: *tok, or NULL when --sample-tokens is 0. Returns
// -1 with a reason in err when the files cannot be read.
int load_sample_tokenizer(const TrainOptions *opt, struct Tokenizer **tok, char *err);

#endif
