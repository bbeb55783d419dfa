// test_update_in_backward.c: chapter 14's --update-in-backward
// (layer_tables.h): each layer's gradients applied as soon as the backward
// pass completes them, in a buffer of one layer. Without clipping, which
// the plan refuses with it, AdamW's arithmetic on every value is the same as
// after the backward pass, from the same gradients: the same bits.
//  - the trainer (suite update_in_backward): 6 steps of the tiny model
//    with the update in the backward pass against the update after it, at
//    --grad-clip 0: every loss, the weights of record and working, AdamW's
//    m and v, bit for bit; the gradient norm, summed from each layer's part
//    in another order, within 1e-5 of the whole's. In the bf16 build:
//    chapter 13 (CUDA graphs and the device's schedule, 8-bit moments, FP8
//    where the GPU has it), with --no-master-weights and with --recompute
//    block; chapter 13 without chapter 12's attention and FP8 (what an A100
//    runs); chapter 09 (the host's step values, fp32 moments). In the fp32
//    build, chapter 09.
//  - the plan (suite update_in_backward_plan, no GPU): the refusals.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "gpu/run_plan.h"
#include "sync_parity.h"
#include "training_checks.h"

enum { N = 6 };

static void check_against_update_after(Optimizations optim, TrainOptions o, const char *what) {
    const int read_once[] = {N};
    o.grad_clip = 0.0f;
    SpRun after, in;
    sp_run(&after, &o, optim, N, read_once, 0);
    o.update_in_backward = 1;
    sp_run(&in, &o, optim, N, read_once, 0);
    char name[160];
    snprintf(name, sizeof name, "%s: losses", what);
    gt_assert_identical(name, in.loss, after.loss, N);
    snprintf(name, sizeof name, "%s: weights of record", what);
    gt_assert_identical(name, in.params, after.params, after.n);
    snprintf(name, sizeof name, "%s: weights", what);
    gt_assert_identical(name, in.weights, after.weights, after.n);
    snprintf(name, sizeof name, "%s: AdamW m", what);
    gt_assert_identical(name, in.m, after.m, after.n);
    snprintf(name, sizeof name, "%s: AdamW v", what);
    gt_assert_identical(name, in.v, after.v, after.n);
    for (int s = 0; s < N; s++)
        cr_assert(fabsf(in.norm[s] - after.norm[s]) <= 1e-5f * after.norm[s],
                  "%s: step %d's gradient norm %.9g, the whole's %.9g", what, s + 1, in.norm[s],
                  after.norm[s]);
    cr_assert(after.loss[N - 1] < after.loss[0], "%s: the loss did not fall", what);
    sp_free(&after), sp_free(&in);
}

static TrainOptions three_layers(void) {
    TrainOptions o = tiny_train_options(N);
    o.model.num_layers = 3;  // a layer between the first and the last
    return o;
}

TestSuite(update_in_backward, .init = training_setup, .fini = training_teardown);

#ifdef PRECISION_BF16
Test(update_in_backward, trains_the_bits_of_the_update_after_it_in_chapter_13) {
    TrainOptions o = three_layers();
    check_against_update_after(chapter_optimizations(13), o, "chapter 13");
    o.no_master_weights = 1;
    check_against_update_after(chapter_optimizations(13), o, "chapter 13 --no-master-weights");
    o.no_master_weights = 0, o.recompute = RECOMPUTE_BLOCK;
    check_against_update_after(chapter_optimizations(13), o, "chapter 13 --recompute block");
}

Test(update_in_backward, trains_the_bits_of_the_update_after_it_without_hopper) {
    Optimizations no_hopper = chapter_optimizations(13);
    no_hopper.fast_attention = 0, no_hopper.fp8 = 0;
    check_against_update_after(no_hopper, three_layers(),
                               "chapter 13 --no-fast-attention --no-fp8");
}
#endif

Test(update_in_backward, trains_the_bits_of_the_update_after_it_in_chapter_09) {
    check_against_update_after(chapter_optimizations(9), three_layers(), "chapter 09");
}

// ---- the plan -----------------------------------------------------------------------

TestSuite(update_in_backward_plan);

static void refused(const Optimizations *o, int micro_batches, float clip, const char *says) {
    char err[ERR_LEN] = "";
    cr_assert_eq(run_plan_check_update_in_backward(o, 1, micro_batches, clip, err), -1);
    cr_assert(strstr(err, says) != NULL, "the refusal should say '%s': %s", says, err);
}

Test(update_in_backward_plan, refuses_clipping_micro_batches_and_the_unfused_update) {
    const Optimizations o = chapter_optimizations(chapter_count() - 1);
    char err[ERR_LEN] = "";
    cr_assert_eq(run_plan_check_update_in_backward(&o, 1, 1, 0.0f, err), 0, "%s", err);
    cr_assert_eq(run_plan_check_update_in_backward(&o, 0, 4, 1.0f, err), 0, "off: no check");
    refused(&o, 1, 1.0f, "--grad-clip 0");
    refused(&o, 2, 0.0f, "--grad-accum 2");
    Optimizations unfused = o;
    unfused.fused_optimizer = 0, unfused.cuda_graphs = 0;
    refused(&unfused, 1, 0.0f, "--fused-optimizer");
    RunPlan plan;
    cr_assert_eq(run_plan_build(&plan, &o, 256, 2, RECOMPUTE_NONE, 1, 1, err), -1,
                 "the plan refuses micro-batches too");
    cr_assert_eq(run_plan_build(&plan, &o, 256, 1, RECOMPUTE_NONE, 1, 1, err), 0, "%s", err);
    cr_assert_eq(plan.update_in_backward, 1);
}
