// training_checks.h: the GPU training tests that both builds run, each with
// its chapter and its tolerance: test_gpu_training.c (fp32) and
// test_training_bf16.c (bf16) are thin wrappers around these.
//  - the trainer follows the fp32 CPU trainer's losses;
//  - a run resumed from a checkpoint continues bit-identically: the same
//    losses, the same weights (and, in bf16, the same bf16 copy of them);
//    with chapter 08's workers, taken while they are ahead of the model.
#ifndef TRAINING_CHECKS_H
#define TRAINING_CHECKS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../cpu/training_fixture.h"
#include "gpu_test.h"
#include "train/train_cpu.h"
#include "train/train_gpu.h"

// The suites' .init and .fini: a learnable corpus in a fresh directory, or a
// skip where there is no GPU.
static inline void training_setup(void) {
    gpu_test_init();
    make_learnable_shards();
}

static inline void training_teardown(void) {
    remove_tmpdir();
    gpu_test_fini();
}

// n steps; each step's loss into losses (when not NULL). From chapter 03 on a
// step's numbers are read later: here, after each step.
static inline void gpu_steps(GpuTrainer *tr, int n, float *losses) {
    char err[ERR_LEN];
    for (int i = 0; i < n; i++) {
        GpuStepStats s, read[GPU_MAX_PENDING_STEPS];
        cr_assert(gpu_trainer_step(tr, &s, err) == 0, "%s", err);
        int got = gpu_trainer_read_stats(tr, read);
        cr_assert(got >= 1 && read[got - 1].step == s.step);
        if (losses) losses[i] = read[got - 1].loss;
    }
}

// 10 steps of the GPU trainer with `optim` against the CPU trainer.
static inline void check_follows_cpu_trainer(Optimizations optim, double tol) {
    enum { STEPS = 10 };
    TrainOptions o = tiny_train_options(STEPS);
    CpuTrainer cpu;
    GpuTrainer gpu;
    char err[ERR_LEN];
    cr_assert(cpu_trainer_init(&cpu, &o, err) == 0, "%s", err);
    cr_assert(gpu_trainer_init(&gpu, &o, &optim, err) == 0, "%s", err);
    float cpu_losses[STEPS], gpu_losses[STEPS];
    for (int i = 0; i < STEPS; i++) {
        StepStats s;
        cr_assert(cpu_trainer_step(&cpu, &s, err) == 0, "%s", err);
        cpu_losses[i] = s.loss;
    }
    gpu_steps(&gpu, STEPS, gpu_losses);
    gt_compare("losses of 10 steps", gpu_losses, cpu_losses, STEPS, tol);
    cr_assert(gpu_losses[STEPS - 1] < gpu_losses[0], "the loss did not fall");
    cpu_trainer_free(&cpu);
    gpu_trainer_free(&gpu);
}

// The weights a trainer holds: the master weights (fp32) and the copy the
// kernels read (floatX; the same buffer in the fp32 build), both as floats.
static inline void download_weights(GpuTrainer *tr, float *master, float *working) {
    gpt2_gpu_get_params(&tr->model, master);
    gpt2_gpu_download_floatx(&tr->model, tr->model.params, working, tr->model.num_params);
}

// Chapter 08: gives the workers up to a second to read a few batches past
// the model's, so that a checkpoint taken now must not use the loader's
// position.
static inline void wait_for_workers_ahead(GpuTrainer *tr) {
    for (int i = 0; i < 1000 && data_workers_ahead(&tr->workers) < 3; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    cr_assert(data_workers_ahead(&tr->workers) >= 3, "the workers are not ahead of the model");
}

// 70 steps straight, against 60 steps, a checkpoint, and 10 more in a fresh
// trainer. 62 windows per epoch, so the resumed part crosses an epoch. The
// checkpoint holds the fp32 master weights; in bf16 the working copy is
// rebuilt from them by rounding to nearest even, which is what AdamW stored.
static inline void check_resume_bit_identical(Optimizations optim) {
    enum { TOTAL = 70, FIRST = 60 };
    TrainOptions o = tiny_train_options(TOTAL);
    GpuTrainer straight, first, second;
    char err[ERR_LEN], path[512];
    float ls[TOTAL], lr[TOTAL - FIRST];
    cr_assert(gpu_trainer_init(&straight, &o, &optim, err) == 0, "%s", err);
    gpu_steps(&straight, TOTAL, ls);
    size_t n = straight.model.num_params;
    float *want = xmalloc(n * sizeof(float)), *want_working = xmalloc(n * sizeof(float));
    download_weights(&straight, want, want_working);
    gpu_trainer_free(&straight);

    cr_assert(gpu_trainer_init(&first, &o, &optim, err) == 0, "%s", err);
    gpu_steps(&first, FIRST, NULL);
    if (optim.data_workers) wait_for_workers_ahead(&first);
    cr_assert(gpu_trainer_save(&first, path, sizeof path, err) == 0, "%s", err);
    gpu_trainer_free(&first);
    TrainOptions resumed = o;
    snprintf(resumed.resume_from, sizeof resumed.resume_from, "%s", path);
    cr_assert(gpu_trainer_init(&second, &resumed, &optim, err) == 0, "%s", err);
    cr_assert(second.step == FIRST);
    gpu_steps(&second, TOTAL - FIRST, lr);
    cr_assert(memcmp(ls + FIRST, lr, sizeof lr) == 0, "losses differ after resuming");
    float *got = xmalloc(n * sizeof(float)), *got_working = xmalloc(n * sizeof(float));
    download_weights(&second, got, got_working);
    gt_assert_identical("master weights after resuming", got, want, n);
    gt_assert_identical("working weights after resuming", got_working, want_working, n);
    free(want);
    free(want_working);
    free(got);
    free(got_working);
    gpu_trainer_free(&second);
}

#endif
