// test_memory_plan.c: the device memory a run is planned to take
// (memory_plan.h) against what the model allocates, the refusal of a run
// that does not fit its budget, with the changes that make it fit, and the
// `--memory` table.
//
// The plan is arithmetic: the memory_plan_host suite runs without a GPU
// (with the GPU tests' binary, in `make test`), the search of the changes
// that fit a budget (memory_budget.h) over the real plan among it.
#define _POSIX_C_SOURCE 200809L  // open_memstream
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu/suggested_flags.h"

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

// GPT-2 124M (or a larger size: layers, heads, channels) at B=16, T=1024,
// with the switches of `chapter`, as the trainer's command line asks for it.
static RunRequest asked_in(int chapter) {
    return (RunRequest){.switches = chapter_optimizations(chapter), .B = 16, .T = 1024,
                        .grad_accum = 1};
}

static GPT2Config gpt2_sized(int chapter, int layers, int heads, int channels) {
    GPT2Config c = gpt2_124m_padded_as(chapter);
    c.num_layers = layers, c.num_heads = heads, c.channels = channels;
    return c;
}

static size_t planned(const GPT2Config *c, const RunRequest *r) {
    MemoryPlan p;
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_plan_request(c, r, &p, err), 0, "%s", err);
    return p.total;
}

// The plan of a run as asked is the plan of its RunPlan, as the trainer
// builds it; more sequences, more memory.
Test(memory_plan_host, a_request_plans_what_its_run_plan_plans) {
    const int ch = chapter_count() - 1 >= first_chapter() ? chapter_count() - 1 : first_chapter();
    const GPT2Config c = gpt2_124m_padded_as(ch);
    const RunRequest asked = asked_in(ch);
    const RunPlan plan = run_plan_for_model(&asked.switches, c.padded_vocab_size);
    cr_assert_eq(planned(&c, &asked), memory_plan(&c, 16, 1024, &plan).total);
    RunRequest half = asked;
    half.B = 8;
    cr_assert_gt(planned(&c, &asked), planned(&c, &half));
}

// A run that does not fit is refused with what it needs, what the GPU has,
// and the flags that make it fit: in the build's first chapter (no
// micro-batches) the largest smaller batch.
Test(memory_plan_host, a_run_too_large_is_refused_naming_the_batch_that_fits) {
    const int ch = first_chapter();
    const GPT2Config c = gpt2_124m_padded_as(ch);
    RunRequest asked = asked_in(ch), four = asked;
    four.B = 4;
    const MemoryBudget budget = memory_budget(planned(&c, &four), 0);
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_plan_check(&c, &asked, &budget, err), -1);
    cr_assert(strstr(err, "the run does not fit on the GPU: B=16, T=1024 needs about"), "%s", err);
    cr_assert(strstr(err, "it fits with -b 4 (about"), "%s", err);
    cr_assert(strstr(err, "4 sequences a step instead of 16"), "%s", err);
    cr_assert_eq(memory_plan_check(&c, &four, &budget, err), 0);
    const MemoryBudget tiny = memory_budget(100 << 20, 0);
    cr_assert_eq(memory_plan_check(&c, &asked, &tiny, err), -1);
    cr_assert(strstr(err, "not even -b 1 fits"), "%s", err);
}

// Where the 8-bit moments alone make the run fit, in any chapter of the
// build with them off, the refusal names --adamw-8bit (after the cheapest
// --recompute level that fits, which comes first: it changes no value), and
// the run with that flag applied fits.
Test(memory_plan_host, a_refusal_names_a_switch_that_then_fits) {
    for (int ch = first_chapter(); ch < chapter_count(); ch++) {
        const GPT2Config c = gpt2_124m_padded_as(ch);
        RunRequest asked = asked_in(ch), with = asked;
        asked.switches.adamw_8bit = 0, with.switches.adamw_8bit = 1;
        const MemoryBudget budget = memory_budget(80ull << 30, planned(&c, &with) / 1073741824.0);
        char err[ERR_LEN] = "";
        cr_assert_eq(memory_plan_check(&c, &asked, &budget, err), -1, "chapter %02d", ch);
        cr_assert(strstr(err, "does not fit in --memory-limit"), "chapter %02d: %s", ch, err);
        cr_assert(strstr(err, "it fits with --recompute ") || strstr(err, "it fits with --adamw-8bit"),
                  "chapter %02d: %s", ch, err);
        cr_assert(strstr(err, "--adamw-8bit (about"), "chapter %02d: %s", ch, err);
        const RunRequest applied = apply_suggested_flags(&asked, "--adamw-8bit", PRECISION_NAME);
        cr_assert_eq(memory_plan_check(&c, &applied, &budget, err), 0, "chapter %02d: %s", ch, err);
    }
}

// Chapter 14's budget: where --recompute norms is the cheapest level that
// fits, the refusal names it first, and not block, and the run fits with it.
Test(memory_plan_host, a_refusal_names_the_cheapest_recompute_level_that_fits) {
    const int ch = chapter_count() - 1;
    const GPT2Config c = gpt2_124m_padded_as(ch);
    RunRequest asked = asked_in(ch), norms = asked;
    norms.recompute = RECOMPUTE_NORMS;
    const MemoryBudget budget = memory_budget(80ull << 30, planned(&c, &norms) / 1073741824.0);
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_plan_check(&c, &asked, &budget, err), -1);
    cr_assert(strstr(err, "it fits with --recompute norms (about"), "%s", err);
    cr_assert(!strstr(err, "--recompute block"), "%s", err);
    const RunRequest applied = apply_suggested_flags(&asked, "--recompute norms", PRECISION_NAME);
    cr_assert_eq(applied.recompute, RECOMPUTE_NORMS);
    cr_assert_eq(memory_plan_check(&c, &applied, &budget, err), 0, "%s", err);
}

static void assert_only_the_level_changed(const RunRequest *r, const RunRequest *asked) {
    cr_assert(!memcmp(&r->switches, &asked->switches, sizeof r->switches), "the switches changed");
    cr_assert(r->B == asked->B && r->T == asked->T && r->grad_accum == asked->grad_accum &&
              r->no_master_weights == asked->no_master_weights, "more than the level changed");
}

// Chapter 14's --fit-memory over the real plan: under a budget that
// --recompute norms fits and gelu does not, the run's level is raised to
// norms (not block, which fits too), a line says so, and the check then
// passes; a run that fits, and one that no level makes fit, are left as
// asked (the check refuses the second, naming what would fit).
Test(memory_plan_host, fit_memory_raises_the_level_to_the_cheapest_that_fits) {
    const int ch = chapter_count() - 1;
    const GPT2Config c = gpt2_124m_padded_as(ch);
    const RunRequest asked = asked_in(ch);
    RunRequest gelu = asked, norms = asked, block = asked, r = asked;
    gelu.recompute = RECOMPUTE_GELU, norms.recompute = RECOMPUTE_NORMS;
    block.recompute = RECOMPUTE_BLOCK;
    cr_assert_lt(planned(&c, &norms), planned(&c, &gelu));
    const MemoryBudget budget = memory_budget(80ull << 30, planned(&c, &norms) / 1073741824.0);
    char said[ERR_LEN] = "", err[ERR_LEN] = "";
    cr_assert_eq(memory_plan_fit(&c, &r, &budget, said, sizeof said), 1);
    cr_assert_eq(r.recompute, RECOMPUTE_NORMS, "--recompute %s", recompute_name(r.recompute));
    assert_only_the_level_changed(&r, &asked);
    cr_assert(strstr(said, "--fit-memory: --recompute norms, the cheapest level that fits: "),
              "%s", said);
    cr_assert(strstr(said, " GiB with --recompute none), within the budget of ") &&
              strstr(said, "(--memory-limit "), "%s", said);
    cr_assert_eq(memory_plan_check(&c, &r, &budget, err), 0, "%s", err);

    const MemoryBudget roomy = memory_budget(80ull << 30, 0);
    r = asked;
    cr_assert_eq(memory_plan_fit(&c, &r, &roomy, said, sizeof said), 0);
    cr_assert_eq(r.recompute, RECOMPUTE_NONE, "a run that fits keeps its level");

    const MemoryBudget tight = memory_budget((planned(&c, &block) - 1), 0);
    r = asked;
    cr_assert_eq(memory_plan_fit(&c, &r, &tight, said, sizeof said), 0);
    cr_assert_eq(r.recompute, RECOMPUTE_NONE, "no level fits: the run is left as asked");
    cr_assert_eq(memory_plan_check(&c, &r, &tight, err), -1);
    cr_assert(strstr(err, "it fits with"), "the refusal names what fits: %s", err);
}

// Chapter 14's --no-master-weights: the plan is the master copy smaller, 4
// bytes a parameter, and nothing else changes; in the bf16 build, with the
// fused optimizer (chapter 09 on). Refused elsewhere, naming the flag.
Test(memory_plan_host, no_master_weights_plans_4_bytes_a_parameter_less) {
    int planned_without = 0;
    for (int ch = first_chapter(); ch < chapter_count(); ch++) {
        const GPT2Config c = gpt2_124m_padded_as(ch);
        const RunRequest asked = asked_in(ch);
        RunRequest without = asked;
        without.no_master_weights = 1;
        MemoryPlan with_p, without_p;
        char err[ERR_LEN] = "";
        cr_assert_eq(memory_plan_request(&c, &asked, &with_p, err), 0, "%s", err);
        const int fused = asked.switches.fused_optimizer;
        const int rc = memory_plan_request(&c, &without, &without_p, err);
#ifdef PRECISION_BF16
        if (!fused) {
            cr_assert_eq(rc, -1, "chapter %02d", ch);
            cr_assert(strstr(err, "--no-master-weights needs --fused-optimizer"), "%s", err);
            continue;
        }
        cr_assert_eq(rc, 0, "chapter %02d: %s", ch, err);
        const size_t n = gpt2_num_params(&c);
        cr_assert_eq(with_p.master, n * sizeof(float), "chapter %02d", ch);
        cr_assert_eq(without_p.master, 0, "chapter %02d", ch);
        cr_assert_eq(with_p.total - without_p.total, n * sizeof(float), "chapter %02d", ch);
        cr_assert_eq(with_p.model - without_p.model, n * sizeof(float), "chapter %02d", ch);
        planned_without++;
#else
        (void)fused;
        cr_assert_eq(rc, -1, "chapter %02d", ch);
        cr_assert(strstr(err, "--no-master-weights: the bf16 build's"), "%s", err);
#endif
    }
#ifdef PRECISION_BF16
    cr_assert_gt(planned_without, 0);
#else
    (void)planned_without;
#endif
}

#ifdef PRECISION_BF16
// GPT-2 XL at B=4 in the build's last chapter, planned as asked (*before)
// and with one of chapter 14's two layer tools on (*after).
static GPT2Config xl_b4_plans(int update_in_backward, int offload, MemoryPlan *before,
                              MemoryPlan *after) {
    const int ch = chapter_count() - 1;
    const GPT2Config c = gpt2_sized(ch, 48, 25, 1600);
    RunRequest asked = asked_in(ch);
    asked.B = 4;
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_plan_request(&c, &asked, before, err), 0, "%s", err);
    asked.update_in_backward = update_in_backward, asked.offload_optimizer = offload;
    cr_assert_eq(memory_plan_request(&c, &asked, after, err), 0, "%s", err);
    return c;
}

// Chapter 14's --update-in-backward keeps the gradients of the tensors
// outside the layers and of one layer: at GPT-2 XL, 47 layers' fewer.
Test(memory_plan_host, update_in_backward_plans_one_layer_of_gradients) {
    MemoryPlan all, one;
    const GPT2Config c = xl_b4_plans(1, 0, &all, &one);
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(&c, sizes);
    size_t per_layer = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (layer_tensor(i)) per_layer += sizes[i] / 48;
    cr_assert_eq(all.grads - one.grads, 47 * per_layer * sizeof(floatX),
                 "47 layers' gradients fewer: %zu bytes, not %zu", all.grads - one.grads,
                 47 * per_layer * sizeof(floatX));
    cr_assert_eq(one.scalars - all.scalars, 48 * sizeof(float), "one norm's part a layer");
}

// Chapter 14's --offload-optimizer keeps two layers' moments on the GPU and
// the rest's: at GPT-2 XL with 8-bit moments, 46 layers' fewer.
Test(memory_plan_host, offload_plans_two_layers_of_moments_and_the_rest) {
    MemoryPlan gpu, host;
    const GPT2Config c = xl_b4_plans(0, 1, &gpu, &host);
    const AdamLayout l = adam_layout_for(&c, chapter_optimizations(chapter_count() - 1).adamw_8bit);
    const StateBlock layer = state_block_for(&c, &l, 0), rest = state_block_for(&c, &l, 1);
    cr_assert_eq(host.adam_fp32 + host.adam_8bit, 0);
    cr_assert_eq(host.adam_offload, 2 * layer.bytes + rest.bytes);
    // The blocks round each array up to 256 bytes: within that of the whole.
    const size_t all = gpu.adam_fp32 + gpu.adam_8bit;
    cr_assert_leq(48 * layer.bytes + rest.bytes - all, 49 * 6 * 256);
    cr_assert_lt(host.total, gpu.total - 45 * layer.bytes, "46 layers' moments fewer");
}

// The chapter's point: GPT-2 XL at B=4, T=1024 in a 16 GiB budget. Recompute
// and the 8-bit moments alone are not enough; without master weights too
// it fits, and a refusal with the two on names --no-master-weights.
Test(memory_plan_host, gpt2_xl_at_b4_fits_16_gib_without_master_weights) {
    const int ch = chapter_count() - 1;
    const GPT2Config c = gpt2_sized(ch, 48, 25, 1600);
    RunRequest asked = asked_in(ch);
    asked.B = 4;
    asked.switches.adamw_8bit = 1;
    asked.recompute = RECOMPUTE_BLOCK;
    const MemoryBudget budget = memory_budget(80ull << 30, 16);
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_plan_check(&c, &asked, &budget, err), -1,
                 "planned %.2f GiB", planned(&c, &asked) / 1073741824.0);
    cr_assert(strstr(err, "it fits with --no-master-weights (about"), "%s", err);
    const RunRequest applied =
        apply_suggested_flags(&asked, "--no-master-weights", PRECISION_NAME);
    cr_assert(applied.no_master_weights);
    cr_assert_eq(memory_plan_check(&c, &applied, &budget, err), 0, "%s", err);
}
#endif

// Every suggestion, for GPT-2's four sizes under budgets of 8 to 24 GiB in
// every chapter of the build: its flags applied as the command line applies
// them make a run that passes the check, and plans what the suggestion said.
Test(memory_plan_host, every_suggestion_fits_when_applied) {
    static const int sizes[][3] = {{12, 12, 768}, {24, 16, 1024}, {36, 20, 1280}, {48, 25, 1600}};
    int suggested = 0;
    for (int ch = first_chapter(); ch < chapter_count(); ch++)
        for (int m = 0; m < 4; m++)
            for (int gib = 8; gib <= 24; gib += 4) {
                const GPT2Config c = gpt2_sized(ch, sizes[m][0], sizes[m][1], sizes[m][2]);
                const RunRequest asked = asked_in(ch);
                const MemoryBudget budget = memory_budget(80ull << 30, gib);
                const MemorySearch s = memory_plan_search(&c, budget.bytes);
                MemoryFix fixes[MEMORY_MAX_FIXES];
                const int n = memory_budget_fixes(&asked, &s, fixes);
                for (int i = 0; i < n; i++, suggested++) {
                    const RunRequest r = apply_suggested_flags(&asked, fixes[i].flags,
                                                               PRECISION_NAME);
                    char err[ERR_LEN] = "";
                    cr_assert_eq(memory_plan_check(&c, &r, &budget, err), 0,
                                 "chapter %02d, C=%d, %d GiB, '%s': %s", ch, c.channels, gib,
                                 fixes[i].flags, err);
                    cr_assert_eq(planned(&c, &r), fixes[i].bytes, "'%s'", fixes[i].flags);
                    cr_assert_eq(r.B * r.grad_accum == 16, fixes[i].run.grad_accum > 1 ||
                                 r.B == 16, "'%s': micro-batches keep the step's sequences",
                                 fixes[i].flags);
                }
            }
    cr_assert_gt(suggested, 0);
}

// `--memory`: every category, the activations tensor by tensor among them,
// the total, and the budget.
Test(memory_plan_host, the_memory_table_shows_every_category_and_the_budget) {
    const int ch = chapter_count() - 1 >= first_chapter() ? chapter_count() - 1 : first_chapter();
    const GPT2Config c = gpt2_124m_padded_as(ch);
    const RunRequest asked = asked_in(ch);
    const RunPlan plan = run_plan_for_model(&asked.switches, c.padded_vocab_size);
    const MemoryBudget budget = memory_budget(80ull << 30, 16);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    memory_plan_print(out, &c, 16, 1024, &plan, &budget);
    fclose(out);
    static const char *const lines[] = {
        "planned on the device for B=16, T=1024", "\nmemory: parameters ",
        "\nmemory:   parameters (" PRECISION_NAME ")", "\nmemory: gradients ",
        "\nmemory: optimizer state ", "\nmemory:   AdamW m and v (fp32)",
        "\nmemory:   AdamW m and v (8-bit)", "\nmemory:   master weights (fp32)",
        "\nmemory: activations ", "\nmemory:   encoded      (B,T,C)",
        "\nmemory:   fch_gelu     (L,B,T,4C)", "\nmemory: FP8 operands ",
        "\nmemory: workspaces and buffers ", "\nmemory:   scratch (fp32)",
        "\nmemory: CUDA's libraries ", "\nmemory:   allowance, measured",
        "\nmemory: total ", "\nmemory: budget ", "(--memory-limit 16; the GPU has 80.0 GiB free)",
        "\nmemory: left of it ",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        cr_assert(strstr(text, lines[i]), "no '%s' in:\n%s", lines[i], text);
    free(text);
}

#ifdef PRECISION_BF16
// From chapter 11 on, micro-batches of the batch that fits make the same step.
Test(memory_plan_host, chapter_11_suggests_micro_batches) {
    for (int ch = 11; ch < chapter_count(); ch++) {
        const GPT2Config c = gpt2_124m_padded_as(ch);
        char err[ERR_LEN] = "";
        RunRequest asked = asked_in(ch), eight = asked;
        eight.B = 8;
        const MemoryBudget budget = memory_budget(planned(&c, &eight), 0);
        cr_assert_eq(memory_plan_check(&c, &asked, &budget, err), -1);
        cr_assert(strstr(err, "with -b 8 --grad-accum 2 (about"), "chapter %02d: %s", ch, err);
        cr_assert(strstr(err, "the same 16 sequences a step"), "chapter %02d: %s", ch, err);
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
    cr_assert(run_plan_build(&run, o, c->padded_vocab_size, 1, r, 1, 0, 0, err) == 0, "%s", err);
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
            cr_assert(run_plan_build(&plan, &opt, c.padded_vocab_size, 1, (Recompute)r, 1, 0,
                                     0, err) == 0,
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
#ifdef PRECISION_BF16
        // Chapter 14's --no-master-weights: no master copy allocated, none planned.
        if (opt.fused_optimizer) {
            RunPlan plan;
            char err[ERR_LEN];
            cr_assert(run_plan_build(&plan, &opt, c.padded_vocab_size, 1, RECOMPUTE_NONE, 0, 0,
                                     0, err) == 0,
                      "%s", err);
            GPT2Gpu model;
            gpt2_gpu_init(&model, &gt_ctx, &c, params, 4, 32, &plan);
            cr_assert_null(model.master);
            const MemoryPlan p = memory_plan(&c, 4, 32, &model.plan);
            cr_assert_eq(model.device_bytes, p.model, "chapter %02d, --no-master-weights: the "
                         "model allocated %zu bytes, the plan says %zu", ch, model.device_bytes,
                         p.model);
            gpt2_gpu_free(&model);
        }
#endif
        // Chapter 14's --update-in-backward (one layer's gradients and the
        // norm's parts) and --offload-optimizer (two layers' moments and the
        // rest's), alone and together, as planned.
        for (int k = 1; k < 4 && opt.fused_optimizer; k++) {
            const int in_backward = k & 1, offload = k >> 1;
            RunPlan plan;
            char err[ERR_LEN];
            cr_assert(run_plan_build(&plan, &opt, c.padded_vocab_size, 1, RECOMPUTE_NONE, 1,
                                     in_backward, offload, err) == 0,
                      "%s", err);
            GPT2Gpu model;
            gpt2_gpu_init(&model, &gt_ctx, &c, params, 4, 32, &plan);
            const MemoryPlan p = memory_plan(&c, 4, 32, &model.plan);
            cr_assert_eq(model.device_bytes, p.model, "chapter %02d,%s%s: the model allocated "
                         "%zu bytes, the plan says %zu", ch,
                         in_backward ? " --update-in-backward" : "",
                         offload ? " --offload-optimizer" : "", model.device_bytes, p.model);
            gpt2_gpu_free(&model);
        }
    }
    free(params);
}

// Where no one switch fits, the refusal names the fewest that fit together:
// GPT-2 XL at B=4 in 16 GiB, chapter 13 as is (31.7 GiB planned), fits with
// --recompute block and --no-master-weights (14.1 GiB), two switches, where
// no single one does.
Test(memory_plan_host, the_fewest_switches_that_fit_together) {
    const int ch = 13;
    if (ch > chapter_count() - 1 || strcmp(chapter_get(ch)->precision, PRECISION_NAME))
        cr_skip_test("chapter 13 is the bf16 build's");
    const GPT2Config c = gpt2_sized(ch, 48, 25, 1600);
    RunRequest asked = asked_in(ch);
    asked.B = 4;
    const MemorySearch s = memory_plan_search(&c, 16ull << 30);
    MemoryFix fixes[MEMORY_MAX_FIXES];
    const int n = memory_budget_fixes(&asked, &s, fixes);
    cr_assert_geq(n, 1);
    cr_assert_str_eq(fixes[0].flags, "--recompute block --no-master-weights");
    cr_assert_eq(fixes[0].run.B, 4, "the batch kept");
    cr_assert_leq(fixes[0].bytes, 16ull << 30);
}
