// train_cpu.h: the training loop around the CPU reference model: data,
// forward, backward, clipping, AdamW, validation, checkpoints. The program
// train_gpt2_cpu.c drives it; tests drive it too (resume, determinism).
#ifndef TRAIN_CPU_H
#define TRAIN_CPU_H

#include "data/dataloader.h"
#include "model/gpt2_cpu.h"
#include "train/train_options.h"
#include "util/util.h"

typedef struct {
    TrainOptions opt;
    GPT2Cpu model;
    float *m, *v;              // AdamW moments, num_params each
    DataLoader train, val;
    int has_val;
    int32_t *inputs, *targets; // one batch, (B, T)
    int step;                  // optimizer steps completed
    Rng sampler;
} CpuTrainer;

typedef struct {
    float loss, grad_norm, lr;
    double ms;                 // wall time of the step, data loading included
} StepStats;

// At most one OpenMP thread per processor: OMP_NUM_THREADS may ask for
// more than libgomp can start (100000 crashes it in the first parallel
// loop), and more than one per processor only slows the loops. Call it
// before the model runs; it says nothing.
void cpu_threads_cap(void);

// Builds the model (random init from opt->seed, or opt->init_from, or the
// checkpoint opt->resume_from with its training state) and the data loaders.
// Returns 0, or -1 with a reason in err.
int cpu_trainer_init(CpuTrainer *tr, const TrainOptions *opt, char *err);
void cpu_trainer_free(CpuTrainer *tr);

// One optimizer step on the next training batch.
int cpu_trainer_step(CpuTrainer *tr, StepStats *stats, char *err);

// Mean loss over opt.val_batches batches from the start of the val shards.
int cpu_trainer_val_loss(CpuTrainer *tr, float *loss, char *err);

// Writes model_NNNNNN.bin and state_NNNNNN.bin (NNNNNN = steps completed)
// into opt.checkpoint_dir, creating it if needed. The written model path is
// copied to model_path (cap bytes) when model_path is not NULL.
int cpu_trainer_save(CpuTrainer *tr, char *model_path, size_t cap, char *err);

// Generates n tokens after an end-of-text prompt, sampling from the model
// with the trainer's sampler RNG. out holds n + 1 ids (the prompt first).
// Returns the tokens drawn: n, or fewer when a stop is requested meanwhile
// (stop_signal.h), which ends the sample after the token being drawn.
int cpu_trainer_sample(CpuTrainer *tr, int32_t *out, int n, int eot);

#endif
