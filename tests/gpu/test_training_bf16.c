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

#include "sync_parity.h"
#include "tolerances.h"
#include "training_checks.h"

TestSuite(gpu_training_bf16, .init = training_setup, .fini = training_teardown);

Test(gpu_training_bf16, follows_the_cpu_trainer) {
    check_follows_cpu_trainer(chapter_optimizations(2), TOL_GPU_TRAINING_BF16);
}

Test(gpu_training_bf16, resumed_run_continues_bit_identically) {
    check_resume_bit_identical(chapter_optimizations(2));
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
