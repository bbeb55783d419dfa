// test_training_bf16.c: the bf16 trainer (chapter 02) end to end, on the
// synthetic shards of test_gpu_training.c: it follows the fp32 CPU trainer's
// losses within bf16's tolerance, and a run resumed from a checkpoint (fp32
// master weights, fp32 moments) continues bit-identically.
// Built into build/tests/gpu_tests_bf16 only (Makefile: *_bf16.c).
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../cpu/training_fixture.h"
#include "gpu_test.h"
#include "tolerances.h"
#include "train_cpu.h"
#include "train_gpu.h"

static void setup(void) {
    gpu_test_init();  // skips the test where there is no GPU
    make_learnable_shards();
}

static void teardown(void) {
    remove_tmpdir();
    gpu_test_fini();
}

TestSuite(gpu_training_bf16, .init = setup, .fini = teardown);

static void gpu_steps(GpuTrainer *tr, int n, float *losses) {
    char err[ERR_LEN];
    for (int i = 0; i < n; i++) {
        GpuStepStats s;
        cr_assert(gpu_trainer_step(tr, &s, err) == 0, "%s", err);
        if (losses) losses[i] = s.loss;
    }
}

Test(gpu_training_bf16, follows_the_cpu_trainer) {
    enum { STEPS = 10 };
    TrainOptions o = tiny_train_options(STEPS);
    Optimizations ch02 = chapter_optimizations(2);
    CpuTrainer cpu;
    GpuTrainer gpu;
    char err[ERR_LEN];
    cr_assert(cpu_trainer_init(&cpu, &o, err) == 0, "%s", err);
    cr_assert(gpu_trainer_init(&gpu, &o, &ch02, err) == 0, "%s", err);
    float cpu_losses[STEPS], gpu_losses[STEPS];
    for (int i = 0; i < STEPS; i++) {
        StepStats s;
        cr_assert(cpu_trainer_step(&cpu, &s, err) == 0, "%s", err);
        cpu_losses[i] = s.loss;
    }
    gpu_steps(&gpu, STEPS, gpu_losses);
    gt_compare("losses of 10 steps (bf16)", gpu_losses, cpu_losses, STEPS,
               TOL_GPU_TRAINING_BF16);
    cr_assert(gpu_losses[STEPS - 1] < gpu_losses[0], "the loss did not fall");
    cpu_trainer_free(&cpu);
    gpu_trainer_free(&gpu);
}

Test(gpu_training_bf16, resumed_run_continues_bit_identically) {
    // As test_gpu_training.c's: resuming at 60 and running to 70 crosses an
    // epoch. The checkpoint holds the fp32 master weights; the bf16 weights
    // are rebuilt from them by rounding to nearest even, which is what AdamW
    // stored after step 60, so nothing is lost.
    enum { TOTAL = 70, FIRST = 60 };
    TrainOptions o = tiny_train_options(TOTAL);
    Optimizations ch02 = chapter_optimizations(2);
    GpuTrainer straight, first, second;
    char err[ERR_LEN], path[512];
    float ls[TOTAL], lr[TOTAL - FIRST];
    cr_assert(gpu_trainer_init(&straight, &o, &ch02, err) == 0, "%s", err);
    gpu_steps(&straight, TOTAL, ls);
    size_t n = straight.model.num_params;
    float *want = xmalloc(n * sizeof(float)), *want_bf16 = xmalloc(n * sizeof(float));
    gpt2_gpu_get_params(&straight.model, want);
    gpt2_gpu_download_floatx(straight.model.params, want_bf16, n);
    gpu_trainer_free(&straight);

    cr_assert(gpu_trainer_init(&first, &o, &ch02, err) == 0, "%s", err);
    gpu_steps(&first, FIRST, NULL);
    cr_assert(gpu_trainer_save(&first, path, sizeof path, err) == 0, "%s", err);
    gpu_trainer_free(&first);
    TrainOptions resumed = o;
    snprintf(resumed.resume_from, sizeof resumed.resume_from, "%s", path);
    cr_assert(gpu_trainer_init(&second, &resumed, &ch02, err) == 0, "%s", err);
    cr_assert(second.step == FIRST);
    gpu_steps(&second, TOTAL - FIRST, lr);
    cr_assert(memcmp(ls + FIRST, lr, sizeof lr) == 0, "losses differ after resuming");
    float *got = xmalloc(n * sizeof(float)), *got_bf16 = xmalloc(n * sizeof(float));
    gpt2_gpu_get_params(&second.model, got);
    gpt2_gpu_download_floatx(second.model.params, got_bf16, n);
    gt_assert_identical("master weights after resuming", got, want, n);
    gt_assert_identical("bf16 weights after resuming", got_bf16, want_bf16, n);
    free(want);
    free(want_bf16);
    free(got);
    free(got_bf16);
    gpu_trainer_free(&second);
}
