// test_layer_updates.c: chapter 14's update a layer at a time
// (layer_tables.h). --update-in-backward: each layer's gradients applied as
// soon as the backward pass completes them, in a buffer of one layer.
// Without clipping, which the plan refuses with it, AdamW's arithmetic on
// every value is the same as after the backward pass, from the same
// gradients: the same bits. --offload-optimizer: the layers' moments on the
// host, each layer's copied in for its update and out after it: the bytes
// of the moments travel unchanged, and every value is updated by the same
// arithmetic, clipping included: the same bits.
//  - the trainer (suite update_in_backward): 6 steps of the tiny model
//    with the update in the backward pass against the update after it, at
//    --grad-clip 0: every loss, the weights of record and working, AdamW's
//    m and v, bit for bit; the gradient norm, summed from each layer's part
//    in another order, within 1e-5 of the whole's. In the bf16 build:
//    chapter 13 (CUDA graphs and the device's schedule, 8-bit moments, FP8
//    where the GPU has it), with --no-master-weights and with --recompute
//    block; chapter 13 without chapter 12's attention and FP8 (what an A100
//    runs); chapter 09 (the host's step values, fp32 moments). In the fp32
//    build, the fused update on chapter 01.
//  - the trainer (suite offload_optimizer): 6 steps with the moments on
//    the host against on the GPU, at the default clip and at one that clips
//    every step: every loss and norm, the weights and the moments, bit for
//    bit; in chapter 13 (graphs, 8-bit moments, FP8 where the GPU has it),
//    with two micro-batches a step, with --no-master-weights, and with
//    --update-in-backward as well (at --grad-clip 0); chapter 09 (fp32
//    moments, the host's step values), in fp32 the fused update on chapter 01.
//  - the moments (suite offload_optimizer): set and read back through the
//    blocks unchanged.
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

// The fused update (chapter 09) in this build: chapter 09 itself in bf16;
// in fp32, whose trainer has no kernels of chapters 04-05, chapter 01 with
// sync avoidance and the fused update on.
static Optimizations fused_update(void) {
#ifdef PRECISION_BF16
    return chapter_optimizations(9);
#else
    Optimizations o = chapter_optimizations(1);
    o.sync_avoidance = 1, o.fused_optimizer = 1;
    return o;
#endif
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

Test(update_in_backward, trains_the_bits_of_the_update_after_it_with_the_fused_update) {
    check_against_update_after(fused_update(), three_layers(), "the fused update");
}

// ---- --offload-optimizer --------------------------------------------------------------

static void check_offload_against_gpu(Optimizations optim, TrainOptions o, const char *what) {
    const int read_once[] = {N};
    const float clips[] = {o.grad_clip, 1e-4f};  // as given; one that clips every step
    for (int c = 0; c < (o.grad_clip > 0 ? 2 : 1); c++) {
        o.grad_clip = clips[c];
        o.offload_optimizer = 0;
        SpRun gpu, host;
        sp_run(&gpu, &o, optim, N, read_once, 0);
        o.offload_optimizer = 1;
        sp_run(&host, &o, optim, N, read_once, 0);
        char name[120];
        snprintf(name, sizeof name, "%.60s, --grad-clip %g, --offload-optimizer", what,
                 clips[c]);
        sp_assert_identical(&host, &gpu, name);
        sp_free(&gpu), sp_free(&host);
    }
}

TestSuite(offload_optimizer, .init = training_setup, .fini = training_teardown);

#ifdef PRECISION_BF16
Test(offload_optimizer, trains_the_bits_of_the_moments_on_the_gpu_in_chapter_13) {
    TrainOptions o = three_layers();
    check_offload_against_gpu(chapter_optimizations(13), o, "chapter 13");
    o.grad_accum = 2;
    check_offload_against_gpu(chapter_optimizations(13), o, "chapter 13 --grad-accum 2");
    o.grad_accum = 1, o.no_master_weights = 1;
    check_offload_against_gpu(chapter_optimizations(13), o, "chapter 13 --no-master-weights");
    o.no_master_weights = 0, o.update_in_backward = 1, o.grad_clip = 0;
    check_offload_against_gpu(chapter_optimizations(13), o, "chapter 13 --update-in-backward");
}
#endif

Test(offload_optimizer, trains_the_bits_of_the_moments_on_the_gpu_with_the_fused_update) {
    check_offload_against_gpu(fused_update(), three_layers(), "the fused update");
}

// A state set through the blocks reads back as it was, 8-bit moments and
// their scales included, in the layout of the model's state.
Test(offload_optimizer, moments_set_through_the_blocks_read_back_unchanged) {
    const Optimizations o = chapter_optimizations(chapter_count() - 1);
    GPT2Config cfg = three_layers().model;
    apply_model_switches(&o, &cfg);
    RunPlan plan;
    char err[ERR_LEN];
    cr_assert(run_plan_build(&plan, &o, cfg.padded_vocab_size, 1, RECOMPUTE_NONE, 1, 0, 1,
                             err) == 0, "%s", err);
    float *params = xcalloc(gpt2_num_params(&cfg), sizeof(float));
    GPT2Gpu m;
    gpt2_gpu_init(&m, &gt_ctx, &cfg, params, 4, 16, &plan);
    cr_assert_null(m.m, "the moments are the offload's");
    AdamState set, got;
    adam_state_alloc(&set, &m.adam);
    adam_state_alloc(&got, &m.adam);
    const AdamLayout *l = &m.adam;
    for (size_t i = 0; i < l->fp32_values; i++) set.m[i] = (float)i, set.v[i] = 0.5f * (float)i;
    for (size_t i = 0; i < l->q8_values; i++) set.m_q[i] = (uint8_t)(i * 7), set.v_q[i] = (uint8_t)i;
    for (size_t i = 0; i < l->q8_blocks; i++) set.m_absmax[i] = 1.0f + i, set.v_absmax[i] = 2.0f + i;
    gpt2_gpu_set_state(&m, &set);
    gpt2_gpu_get_state(&m, &got);
    cr_assert(memcmp(set.m, got.m, l->fp32_values * sizeof(float)) == 0, "fp32 m");
    cr_assert(memcmp(set.v, got.v, l->fp32_values * sizeof(float)) == 0, "fp32 v");
    cr_assert(memcmp(set.m_q, got.m_q, l->q8_values) == 0, "8-bit m");
    cr_assert(memcmp(set.v_q, got.v_q, l->q8_values) == 0, "8-bit v");
    cr_assert(memcmp(set.m_absmax, got.m_absmax, l->q8_blocks * sizeof(float)) == 0);
    cr_assert(memcmp(set.v_absmax, got.v_absmax, l->q8_blocks * sizeof(float)) == 0);
    adam_state_free(&set), adam_state_free(&got);
    gpt2_gpu_free(&m);
    free(params);
}

// ---- the plan -----------------------------------------------------------------------

TestSuite(update_in_backward_plan);

Test(update_in_backward_plan, offload_needs_the_fused_update) {
    Optimizations unfused = chapter_optimizations(8);
    RunPlan plan;
    char err[ERR_LEN] = "";
    cr_assert_eq(run_plan_build(&plan, &unfused, 256, 1, RECOMPUTE_NONE, 1, 0, 1, err), -1);
    cr_assert(strstr(err, "--offload-optimizer needs --fused-optimizer") != NULL, "%s", err);
}

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
    cr_assert_eq(run_plan_build(&plan, &o, 256, 2, RECOMPUTE_NONE, 1, 1, 0, err), -1,
                 "the plan refuses micro-batches too");
    cr_assert_eq(run_plan_build(&plan, &o, 256, 1, RECOMPUTE_NONE, 1, 1, 0, err), 0, "%s", err);
    cr_assert_eq(plan.update_in_backward, 1);
}
