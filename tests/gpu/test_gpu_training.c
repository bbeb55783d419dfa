// test_gpu_training.c: the GPU training loop end to end, on synthetic shards:
// it follows the CPU trainer's losses, a resumed run continues
// bit-identically, and chapter 03's switch changes no bit in fp32 either.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "../cpu/training_fixture.h"
#include "gpu_test.h"
#include "sync_parity.h"
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

TestSuite(gpu_training, .init = setup, .fini = teardown);

static void gpu_steps(GpuTrainer *tr, int n, float *losses) {
    char err[ERR_LEN];
    for (int i = 0; i < n; i++) {
        GpuStepStats s;
        cr_assert(gpu_trainer_step(tr, &s, err) == 0, "%s", err);
        if (losses) losses[i] = s.loss;
    }
}

Test(gpu_training, follows_the_cpu_trainer) {
    enum { STEPS = 10 };
    TrainOptions o = tiny_train_options(STEPS);
    Optimizations baseline = chapter_optimizations(0);
    CpuTrainer cpu;
    GpuTrainer gpu;
    char err[ERR_LEN];
    cr_assert(cpu_trainer_init(&cpu, &o, err) == 0, "%s", err);
    cr_assert(gpu_trainer_init(&gpu, &o, &baseline, err) == 0, "%s", err);
    float cpu_losses[STEPS], gpu_losses[STEPS];
    for (int i = 0; i < STEPS; i++) {
        StepStats s;
        cr_assert(cpu_trainer_step(&cpu, &s, err) == 0, "%s", err);
        cpu_losses[i] = s.loss;
    }
    gpu_steps(&gpu, STEPS, gpu_losses);
    gt_compare("losses of 10 steps", gpu_losses, cpu_losses, STEPS, TOL_GPU_MODEL_FP32);
    cr_assert(gpu_losses[STEPS - 1] < gpu_losses[0], "the loss did not fall");
    cpu_trainer_free(&cpu);
    gpu_trainer_free(&gpu);
}

Test(gpu_training, resumed_run_continues_bit_identically) {
    // 62 windows per epoch: resuming at 60 and running to 70 crosses an epoch.
    enum { TOTAL = 70, FIRST = 60 };
    TrainOptions o = tiny_train_options(TOTAL);
    Optimizations baseline = chapter_optimizations(0);
    GpuTrainer straight, first, second;
    char err[ERR_LEN], path[512];
    float ls[TOTAL], lr[TOTAL - FIRST];
    cr_assert(gpu_trainer_init(&straight, &o, &baseline, err) == 0, "%s", err);
    gpu_steps(&straight, TOTAL, ls);
    float *want = gt_download(straight.model.params, straight.model.num_params);
    size_t n = straight.model.num_params;
    gpu_trainer_free(&straight);

    cr_assert(gpu_trainer_init(&first, &o, &baseline, err) == 0, "%s", err);
    gpu_steps(&first, FIRST, NULL);
    cr_assert(gpu_trainer_save(&first, path, sizeof path, err) == 0, "%s", err);
    gpu_trainer_free(&first);
    TrainOptions resumed = o;
    snprintf(resumed.resume_from, sizeof resumed.resume_from, "%s", path);
    cr_assert(gpu_trainer_init(&second, &resumed, &baseline, err) == 0, "%s", err);
    cr_assert(second.step == FIRST);
    gpu_steps(&second, TOTAL - FIRST, lr);
    cr_assert(memcmp(ls + FIRST, lr, sizeof lr) == 0, "losses differ after resuming");
    float *got = gt_download(second.model.params, n);
    gt_assert_identical("parameters after resuming", got, want, n);
    gpu_trainer_free(&second);
}

// Sync avoidance does not depend on the precision: in the fp32 build, with
// chapter 01's TF32 tensor cores, turning it on changes no bit of the losses,
// the norms, the weights or AdamW's moments (sync_parity.h).
Test(gpu_training, sync_avoidance_is_bit_identical_in_fp32) {
    sp_check_sync_avoidance(chapter_optimizations(1));
}
