// test_gpu_training.c: the GPU training loop end to end, on synthetic shards:
// it follows the CPU trainer's losses, a resumed run continues
// bit-identically, and chapter 03's and chapter 09's switches change no bit
// in fp32 either.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sync_parity.h"
#include "util/tolerances.h"
#include "training_checks.h"

TestSuite(gpu_training, .init = training_setup, .fini = training_teardown);

Test(gpu_training, follows_the_cpu_trainer) {
    check_follows_cpu_trainer(chapter_optimizations(0), TOL_GPU_MODEL_FP32);
}

Test(gpu_training, resumed_run_continues_bit_identically) {
    check_resume_bit_identical(chapter_optimizations(0));
}

// Sync avoidance does not depend on the precision: in the fp32 build, with
// chapter 01's TF32 tensor cores, turning it on changes no bit of the losses,
// the norms, the weights or AdamW's moments (sync_parity.h).
Test(gpu_training, sync_avoidance_is_bit_identical_in_fp32) {
    sp_check_sync_avoidance(chapter_optimizations(1));
}

// Nor does chapter 09's fused optimizer: in the fp32 build, chapter 01 with
// and without it, the host reading the norm back every step (no sync
// avoidance) and the model untied (lm_head, a 17th tensor, updated too).
Test(gpu_training, fused_optimizer_is_bit_identical_in_fp32) {
    Optimizations off = chapter_optimizations(1), on = off;
    on.fused_optimizer = 1;
    sp_check_switch(off, on, "fused optimizer", NULL);
}
