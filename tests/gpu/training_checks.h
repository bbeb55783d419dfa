// training_checks.h: the GPU training tests that both builds run, each with
// its chapter and its tolerance: test_gpu_training.c (fp32) and
// test_training_bf16.c (bf16) are thin wrappers around these.
//  - the trainer follows the fp32 CPU trainer's losses;
//  - a run resumed from a checkpoint continues bit-identically: the same
//    losses, the same weights (and, in bf16, the same bf16 copy of them),
//    the same FP8 state once resumed (chapter 13), and at the end the same
//    checkpoint files, byte for byte; with chapter 08's workers, taken while
//    they are ahead of the model.
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

// The FP8 state a trainer holds (chapter 13; empty without FP8 GEMMs)
// must be `want`: the same tensors, history_ready and floats.
static inline void assert_fp8_state_is(const GpuTrainer *tr, const Fp8State *want,
                                       const char *what) {
    Fp8State got;
    gpt2_gpu_get_fp8_state(&tr->model, &got);
    cr_assert(got.tensors == want->tensors && got.history == want->history &&
                  got.history_ready == want->history_ready,
              "%s: %d FP8 tensors of %d amaxes, history_ready %d; expected %d of %d, %d", what,
              got.tensors, got.history, got.history_ready, want->tensors, want->history,
              want->history_ready);
    const size_t floats = (size_t)got.history + 2, n = (size_t)got.tensors * floats;
    size_t i = 0;
    while (i < n && memcmp(&got.values[i], &want->values[i], sizeof(float)) == 0) i++;
    if (i < n)
        cr_assert_fail("%s: FP8 tensor %zu's float %zu (0 the scale, 1 the amax, then the "
                       "history) is %.9g, expected %.9g", what, i / floats, i % floats,
                       (double)got.values[i], (double)want->values[i]);
    fp8_state_free(&got);
}

// Two files byte for byte the same.
static inline void assert_same_file(const char *a, const char *b) {
    size_t na, nb;
    char err[ERR_LEN];
    char *x = read_file(a, &na, err);
    cr_assert_not_null(x, "%s", err);
    char *y = read_file(b, &nb, err);
    cr_assert_not_null(y, "%s", err);
    cr_assert_eq(na, nb, "%s is %zu bytes, %s %zu", a, na, b, nb);
    size_t i = 0;
    while (i < na && x[i] == y[i]) i++;
    cr_assert(i == na, "%s and %s differ first at byte %zu of %zu", a, b, i, na);
    free(x), free(y);
}

// Saves the trainer's checkpoint into dir (as the run's --checkpoint-dir);
// the model's path into model, the state's into state.
static inline void save_into(GpuTrainer *tr, const char *dir, char *model, char *state) {
    char err[ERR_LEN];
    snprintf(tr->opt.checkpoint_dir, sizeof tr->opt.checkpoint_dir, "%s", dir);
    cr_assert(gpu_trainer_save(tr, model, 512, err) == 0, "%s", err);
    cr_assert(state_path_for_model(model, state, 1024, err) == 0, "%s", err);
}

// o.steps steps straight, against 60 steps, a checkpoint, and the rest in a
// fresh trainer (o.steps > 60). At 70, with 62 windows per epoch, the resumed
// part crosses an epoch. The checkpoint holds the fp32 master weights; in
// bf16 the working copy is rebuilt from them by rounding to nearest even,
// which is what AdamW stored (without master weights, chapter 14: the bf16
// weights themselves, exact as floats). The resumed trainer holds the saved
// FP8 state as soon as it is made (chapter 13's scales and amax histories:
// without them its casts would take other scales). At the end both save:
// the same losses, weights, and model and state files byte for byte
// (moments, FP8 state, data position and all).
static inline void check_resume_bit_identical_with(Optimizations optim, TrainOptions o) {
    enum { FIRST = 60 };
    const int total = o.steps, rest = total - FIRST;
    cr_assert(rest > 0 && total <= 100);
    GpuTrainer straight, first, second;
    char err[ERR_LEN], path[512], state[1024];
    char want_model[512], want_state[1024], got_model[512], got_state[1024];
    float ls[100], lr[100];
    cr_assert(gpu_trainer_init(&straight, &o, &optim, err) == 0, "%s", err);
    gpu_steps(&straight, total, ls);
    size_t n = straight.model.num_params;
    float *want = xmalloc(n * sizeof(float)), *want_working = xmalloc(n * sizeof(float));
    download_weights(&straight, want, want_working);
    save_into(&straight, tmp_path("straight"), want_model, want_state);
    gpu_trainer_free(&straight);

    cr_assert(gpu_trainer_init(&first, &o, &optim, err) == 0, "%s", err);
    gpu_steps(&first, FIRST, NULL);
    if (optim.data_workers) wait_for_workers_ahead(&first);
    save_into(&first, tmp_path("first"), path, state);
    Fp8State saved;
    gpt2_gpu_get_fp8_state(&first.model, &saved);
    gpu_trainer_free(&first);
    TrainOptions resumed = o;
    snprintf(resumed.resume_from, sizeof resumed.resume_from, "%s", path);
    cr_assert(gpu_trainer_init(&second, &resumed, &optim, err) == 0, "%s", err);
    cr_assert(second.step == FIRST);
    assert_fp8_state_is(&second, &saved, "the FP8 state after resuming");
    fp8_state_free(&saved);
    gpu_steps(&second, rest, lr);
    cr_assert(memcmp(ls + FIRST, lr, rest * sizeof(float)) == 0, "losses differ after resuming");
    float *got = xmalloc(n * sizeof(float)), *got_working = xmalloc(n * sizeof(float));
    download_weights(&second, got, got_working);
    gt_assert_identical("master weights after resuming", got, want, n);
    gt_assert_identical("working weights after resuming", got_working, want_working, n);
    save_into(&second, tmp_path("resumed"), got_model, got_state);
    assert_same_file(got_model, want_model);
    assert_same_file(got_state, want_state);
    free(want);
    free(want_working);
    free(got);
    free(got_working);
    gpu_trainer_free(&second);
}

// 70 steps against 60, a checkpoint and 10, on the tiny model.
static inline void check_resume_bit_identical(Optimizations optim) {
    check_resume_bit_identical_with(optim, tiny_train_options(70));
}

#endif
