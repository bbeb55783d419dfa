// test_training_bf16.c: the bf16 trainer (chapter 02) end to end, on the
// synthetic shards of test_gpu_training.c: it follows the fp32 CPU trainer's
// losses within bf16's tolerance, and a run resumed from a checkpoint (fp32
// master weights, fp32 moments) continues bit-identically. Chapter 03 (sync
// avoidance) is bit-identical to chapter 02, and waits for the device only
// where it says it does.
// Built into build/tests/gpu_tests_bf16 only (Makefile: *_bf16.c).
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

// Chapter 03 against chapter 02: the same losses, norms, master weights,
// bf16 weights and moments after N = 6 steps, bit for bit (sync_parity.h).
Test(gpu_training_bf16, chapter_03_is_bit_identical_to_chapter_02) {
    Optimizations ch02 = chapter_optimizations(2), ch03 = chapter_optimizations(3);
    Optimizations ch03_off = ch03;
    ch03_off.sync_avoidance = 0;
    cr_assert(memcmp(&ch02, &ch03_off, sizeof ch02) == 0, "chapter 03 is chapter 02 + one switch");
    sp_check_sync_avoidance(ch02);
}

// The waits, counted (gpu_context.h). Chapter 02, per step: one after every
// launch, four copies (the inputs and the targets up, from pageable memory;
// the loss and the gradient norm down), one event at the end of the step.
// Chapter 03: none inside the steps but the waits for a free upload buffer
// (when the host is two steps ahead), and one when their numbers are read.
Test(gpu_training_bf16, waits_only_where_it_says) {
    enum { N = 5 };
    TrainOptions o = tiny_train_options(N);
    const int read_each[] = {1, 2, 3, 4, 5}, read_once[] = {5};
    SpRun two, three;
    sp_run(&two, &o, chapter_optimizations(2), N, read_each, 0);
    sp_run(&three, &o, chapter_optimizations(3), N, read_once, 0);
    const unsigned long long *c2 = two.syncs.count, *c3 = three.syncs.count;
    cr_assert_eq(c2[GPU_SYNC_COPY], 4 * N, "chapter 02: %llu copies", c2[GPU_SYNC_COPY]);
    cr_assert_eq(c2[GPU_SYNC_EVENT], N, "chapter 02: %llu event waits", c2[GPU_SYNC_EVENT]);
    cr_assert_gt(c2[GPU_SYNC_LAUNCH_CHECK], 50 * N, "chapter 02: a wait after each launch");
    cr_assert_eq(c2[GPU_SYNC_STREAM] + c2[GPU_SYNC_DEVICE], 0);
    cr_assert_eq(c3[GPU_SYNC_LAUNCH_CHECK], 0, "chapter 03 waited after a launch");
    cr_assert_eq(c3[GPU_SYNC_COPY], 0, "chapter 03 made a synchronous copy");
    cr_assert_eq(c3[GPU_SYNC_STREAM] + c3[GPU_SYNC_DEVICE], 0);
    cr_assert(c3[GPU_SYNC_EVENT] >= 1 && c3[GPU_SYNC_EVENT] <= 1 + (N - 2),
              "chapter 03: %llu event waits: one for the readback, at most one per step from "
              "the third for an upload buffer", c3[GPU_SYNC_EVENT]);
    sp_assert_identical(&three, &two, "chapter 03 vs 02, read once");
    sp_free(&two);
    sp_free(&three);
}
