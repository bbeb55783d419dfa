// test_memory_plan.c: the device memory a run is planned to take
// (memory_plan.h) against what the model allocates, and the refusal of a
// run that does not fit, with the batch that does.
//
// The plan is arithmetic: the memory_plan_host suite runs without a GPU.
#include <criterion/criterion.h>
#include <string.h>

#include "train/chapters.h"
#include "gpu/gpt2_gpu.h"
#include "gpu_test.h"
#include "gpu/memory_plan.h"
#include "attention_flash.h"

TestSuite(memory_plan_host);

static int first_chapter(void) { return chapter_first_of_precision(PRECISION_NAME); }

static GPT2Config gpt2_124m_padded_as(int chapter) {
    GPT2Config c = gpt2_config_124m();
    Optimizations o = chapter_optimizations(chapter);
    apply_model_switches(&o, &c);
    return c;
}

// More sequences, more memory; and the plan of B - 1 fits where B's
// does not, so a refusal's suggestion is the largest batch that fits.
Test(memory_plan_host, the_largest_batch_that_fits) {
    const int ch = chapter_count() - 1 >= first_chapter() ? chapter_count() - 1 : first_chapter();
    const Optimizations opt = chapter_optimizations(ch);
    const GPT2Config c = gpt2_124m_padded_as(ch);
    const RunPlan plan = run_plan_for_model(&opt, c.padded_vocab_size), *run = &plan;
    const MemoryPlan p16 = memory_plan(&c, 16, 1024, run), p8 = memory_plan(&c, 8, 1024, run);
    cr_assert(p16.total > p8.total);
    cr_assert(p16.activations > p8.activations);
    cr_assert_eq(memory_plan_largest_batch(&c, 16, 1024, run, p16.total), 16);
    cr_assert_eq(memory_plan_largest_batch(&c, 16, 1024, run, p16.total - 1), 8);
    cr_assert_eq(memory_plan_largest_batch(&c, 16, 1024, run, p8.total - 1), 4);
    cr_assert_eq(memory_plan_largest_batch(&c, 16, 1024, run, 1 << 20), 0);
}

// A run that does not fit is refused with what it needs, what the GPU has,
// and the flag that makes it fit.
Test(memory_plan_host, a_run_too_large_is_refused_naming_the_batch_that_fits) {
    const int ch = first_chapter();
    const Optimizations opt = chapter_optimizations(ch);
    const GPT2Config c = gpt2_124m_padded_as(ch);
    const RunPlan plan = run_plan_for_model(&opt, c.padded_vocab_size), *run = &plan;
    const size_t free_bytes = memory_plan(&c, 4, 1024, run).total;
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_plan_check(&c, 16, 1024, run, free_bytes, err), -1);
    cr_assert(strstr(err, "B=16, T=1024 needs about"), "%s", err);
    cr_assert(strstr(err, "-b 4 fits"), "%s", err);
    cr_assert_eq(memory_plan_check(&c, 4, 1024, run, free_bytes, err), 0);
    cr_assert_eq(memory_plan_check(&c, 16, 1024, run, 100 << 20, err), -1);
    cr_assert(strstr(err, "not even -b 1 fits"), "%s", err);
}

#ifdef PRECISION_BF16
// From chapter 11 on, micro-batches of the batch that fits make the same step.
Test(memory_plan_host, chapter_11_suggests_micro_batches) {
    for (int ch = 11; ch < chapter_count(); ch++) {
        const Optimizations opt = chapter_optimizations(ch);
        const GPT2Config c = gpt2_124m_padded_as(ch);
        const RunPlan plan = run_plan_for_model(&opt, c.padded_vocab_size), *run = &plan;
        char err[ERR_LEN] = "";
        const size_t free_bytes = memory_plan(&c, 8, 1024, run).total;
        cr_assert_eq(memory_plan_check(&c, 16, 1024, run, free_bytes, err), -1);
        cr_assert(strstr(err, "-b 8 --grad-accum 2 trains the same 16 sequences"),
                  "chapter %02d: %s", ch, err);
    }
}

// Chapter 12's attention (v4, heads of 64) needs chapter 05's scratch, one
// float per row: chapter 12 plans exactly chapter 11's memory.
Test(memory_plan_host, chapter_12_plans_chapter_11s_memory) {
    const Optimizations o11 = chapter_optimizations(11), o12 = chapter_optimizations(12);
    const GPT2Config c = gpt2_124m_padded_as(12);
    const RunPlan r11 = run_plan_for_model(&o11, c.padded_vocab_size);
    const RunPlan r12 = run_plan_for_model(&o12, c.padded_vocab_size);
    for (int B = 1; B <= 64; B *= 4) {
        cr_assert_geq(memory_plan_scratch_floats(&c, B, 1024, &r12),
                      attention_backward_v4_scratch_floats(B, 1024, c.num_heads), "B=%d", B);
        const MemoryPlan p11 = memory_plan(&c, B, 1024, &r11), p12 = memory_plan(&c, B, 1024, &r12);
        cr_assert_eq(p12.total, p11.total, "B=%d", B);
    }
}
#endif

// Chapter 14: what each level of --recompute gives back, per layer but the
// one every layer shares (recompute.h), at 124M, B=16, T=1024, where every
// tensor is a multiple of the table's 256-byte alignment: in every chapter
// of the build, eager attention's probabilities included, and chapter 13's
// FP8 operands.
static MemoryPlan plan_at(const GPT2Config *c, const Optimizations *o, Recompute r) {
    RunPlan run;
    char err[ERR_LEN];
    cr_assert(run_plan_build(&run, o, c->padded_vocab_size, 1, r, err) == 0, "%s", err);
    return memory_plan(c, 16, 1024, &run);
}

Test(memory_plan_host, each_level_of_recompute_gives_back_what_it_says) {
    const size_t X = sizeof(floatX), BT = 16 * 1024;
    for (int ch = first_chapter(); ch < chapter_count(); ch++) {
        const Optimizations o = chapter_optimizations(ch);
        const GPT2Config c = gpt2_124m_padded_as(ch);
        const size_t L = c.num_layers, C = c.channels, NH = c.num_heads;
        MemoryPlan p[RECOMPUTE_LEVELS];
        for (int r = 0; r < RECOMPUTE_LEVELS; r++) p[r] = plan_at(&c, &o, (Recompute)r);
        // gelu: GELU's output (B,T,4C)
        cr_assert_eq(p[0].activations - p[1].activations, (L - 1) * BT * 4 * C * X, "ch%02d", ch);
        // norms: ln1, ln2 (B,T,C) and their mean and rstd (B,T) fp32
        cr_assert_eq(p[1].activations - p[2].activations, (L - 1) * BT * (2 * C * X + 4 * 4),
                     "ch%02d", ch);
        // block: qkv, atty, attproj, residual2, fch, fcproj (11C a token),
        // and attention's lse (NH floats a token) or probabilities (NH x T)
        const size_t attention = o.flash_attention ? NH * sizeof(float) : NH * 1024 * X;
        cr_assert_eq(p[2].activations - p[3].activations,
                     (L - 1) * BT * (11 * C * X + attention), "ch%02d", ch);
        // chapter 13's FP8 operands, a byte each: fc's projection's (4C),
        // then qkv's and fc's (C each), then the attention projection's (C)
        const size_t fp8 = o.fp8 ? 1 : 0;
        cr_assert_eq(p[0].fp8 - p[1].fp8, fp8 * (L - 1) * BT * 4 * C, "ch%02d", ch);
        cr_assert_eq(p[1].fp8 - p[2].fp8, fp8 * (L - 1) * BT * 2 * C, "ch%02d", ch);
        cr_assert_eq(p[2].fp8 - p[3].fp8, fp8 * (L - 1) * BT * C, "ch%02d", ch);
        for (int r = 1; r < RECOMPUTE_LEVELS; r++)
            cr_assert_eq(p[r].total, p[r].model + p[0].total - p[0].model, "ch%02d: only the "
                         "model's buffers change", ch);
    }
}

// The plan's model part is exactly what gpt2_gpu_init allocates, in every
// chapter of the build and at every level of recompute (a tiny model: the
// arithmetic is the same).
TestSuite(memory_plan, .init = gpu_test_init, .fini = gpu_test_fini);

Test(memory_plan, counts_what_the_model_allocates) {
    GPT2Config cfg = {.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 250,
                      .num_layers = 2, .num_heads = 4, .channels = 64, .tied = 0};
    float *params = xcalloc(gpt2_num_params(&cfg) * 2, sizeof(float));
    for (int ch = first_chapter(); ch < chapter_count(); ch++) {
        const Optimizations opt = chapter_optimizations(ch);
        GPT2Config c = cfg;
        apply_model_switches(&opt, &c);
        for (int r = 0; r < RECOMPUTE_LEVELS; r++) {
            RunPlan plan;
            char err[ERR_LEN];
            cr_assert(run_plan_build(&plan, &opt, c.padded_vocab_size, 1, (Recompute)r, err) == 0,
                      "%s", err);
            GPT2Gpu model;
            gpt2_gpu_init(&model, &gt_ctx, &c, params, 4, 32, &plan);
            // The model's own plan: chapter 13's FP8 only where the GPU has it.
            const MemoryPlan p = memory_plan(&c, 4, 32, &model.plan);
            cr_assert_eq(model.device_bytes, p.model, "chapter %02d, --recompute %s: the model "
                         "allocated %zu bytes, the plan says %zu", ch,
                         recompute_name((Recompute)r), model.device_bytes, p.model);
            gpt2_gpu_free(&model);
        }
    }
    free(params);
}
