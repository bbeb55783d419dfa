// train_gpu.h: the training loop around the GPU model (gpt2_gpu.h): the same
// steps as the CPU trainer (train_cpu.h), timed phase by phase with CUDA
// events, with the chapter's optimizations switched on.
#ifndef TRAIN_GPU_H
#define TRAIN_GPU_H

#include "chapters.h"
#include "dataloader.h"
#include "gpt2_gpu.h"
#include "train_options.h"
#include "util.h"

typedef struct {
    TrainOptions opt;
    Optimizations optim;
    GpuContext ctx;
    GPT2Gpu model;
    DataLoader train, val;
    int has_val;
    int32_t *inputs, *targets;  // host, one batch (B,T)
    int step;                   // optimizer steps completed
    Rng sampler;
    cudaEvent_t events[4];      // forward start, backward start, optimizer start, end
} GpuTrainer;

typedef struct {
    float loss, grad_norm, lr;
    double ms;                  // wall time of the whole step
    double data_ms;             // host: the next batch from the loader
    double forward_ms, backward_ms, optimizer_ms;  // device, from CUDA events
} GpuStepStats;

// Builds the model on the device (random init on the host from opt->seed,
// or opt->init_from, or opt->resume_from with its training state) and the
// data loaders. Returns 0, or -1 with a reason in err.
int gpu_trainer_init(GpuTrainer *tr, const TrainOptions *opt, const Optimizations *optim,
                     char *err);
void gpu_trainer_free(GpuTrainer *tr);

int gpu_trainer_step(GpuTrainer *tr, GpuStepStats *stats, char *err);
int gpu_trainer_val_loss(GpuTrainer *tr, float *loss, char *err);
int gpu_trainer_save(GpuTrainer *tr, char *model_path, size_t cap, char *err);
// n tokens after an end-of-text prompt; out holds n + 1 ids.
void gpu_trainer_sample(GpuTrainer *tr, int32_t *out, int n, int eot);

#endif
