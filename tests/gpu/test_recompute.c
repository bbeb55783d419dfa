// test_recompute.c: chapter 14's --recompute (recompute.h). Every level
// trains the bits of none, since what the backward pass recomputes is the
// forward pass's own arithmetic on the same inputs:
//  - the model (suite recompute): a tiny model trained 3 steps at each
//    level from the same weights on the same batches, against none, bit for
//    bit: each step's loss and every gradient, then the weights (of record
//    and working), AdamW's moments, with FP8 every scale and amax history
//    (the casts the backward pass runs again leave them as they were), and a
//    validation pass on a smaller batch; while each level keeps fewer bytes
//    of activations than the one before it;
//  - the trainer (suite recompute_training): the build's last chapter,
//    CUDA graphs and two micro-batches a step included, 6 steps at each
//    level against none (sync_parity.h).
// In the bf16 build, chapter 13 with FP8 on GPT-2's heads of 64 (Hopper's
// attention, where there is one; skipped without FP8), chapter 13 without
// FP8 (chapter 12's step), without either (--no-fast-attention --no-fp8:
// chapter 05's attention, what an A100 or an RTX card runs) at heads of 64
// and 16, chapter 04 (eager attention, whose (NH,T,T) probabilities the
// block level recomputes) and chapter 02 (every kernel eager); in the fp32
// build, chapters 00 and 01.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpt2_gpu.h"
#include "sync_parity.h"
#include "training_checks.h"

enum { B = 4, T = 32, STEPS = 3 };

// A variant of the model: its chapter, the chapter's switches turned off,
// and its heads.
typedef struct {
    int chapter;
    int no_fast_attention, no_fp8;
    int heads_of_64;  // C = 128, 2 heads: GPT-2's head size; else C = 64, 4 heads of 16
    int needs_fp8;    // skipped on a GPU without FP8 GEMMs
} Variant;

static GPT2Config tiny(const Variant *v, const Optimizations *o) {
    // Three layers: the last layer's buffers are still the forward pass's
    // when the backward pass starts (gpt2_gpu.c), the first reads the
    // embeddings, and the one between reads a layer's residual stream.
    GPT2Config c = {.max_seq_len = T, .vocab_size = 250, .padded_vocab_size = 250,
                    .num_layers = 3, .num_heads = 4, .channels = 64, .tied = 0};
    if (v->heads_of_64) c.channels = 128, c.num_heads = 2;
    apply_model_switches(o, &c);
    return c;
}

// The first chapter of this build: 00 (fp32) or 02 (bf16).
static int first_chapter_of_build(void) { return chapter_first_of_precision(PRECISION_NAME); }

static Optimizations switches_of(const Variant *v) {
    Optimizations o = chapter_optimizations(v->chapter);
    if (v->no_fast_attention) o.fast_attention = 0;
    if (v->no_fp8) o.fp8 = 0;
    return o;
}

static void random_batch(int32_t *x, int32_t *y, int n, int V, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < n; i++)
        x[i] = (int32_t)rng_below(&rng, V), y[i] = (int32_t)rng_below(&rng, V);
}

// One AdamW step at lr 1e-3, clipping at 1.0: its values from the host, or
// from a constant schedule's table on the device (chapter 11 on).
static void set_constant_schedule(GPT2Gpu *gpu, const AdamWConfig *adamw) {
    if (!gpu->plan.device_schedule) return;
    const LrSchedule lr = {.max_lr = 1e-3f, .min_lr_fraction = 1.0f, .warmup_steps = 0,
                           .total_steps = STEPS};
    gpt2_gpu_set_schedule(gpu, &lr, adamw, STEPS, 0);
}

static void update_at(GPT2Gpu *gpu, const AdamWConfig *adamw, int step) {
    if (gpu->plan.device_schedule) gpt2_gpu_update_scheduled(gpu, adamw, 1.0f, gpu->norm);
    else gpt2_gpu_update(gpu, 1e-3f, adamw, 1.0f, step, gpu->norm);
}

// What a level's run computed.
typedef struct {
    size_t n;                                   // parameters
    float loss[STEPS], *grads[STEPS];           // each step's, before its update
    float *params, *weights, *m, *v;            // after the last step
    float val_loss;                             // a GPT2_LOSS pass after it, at B / 2
    unsigned char *metas;                       // FP8's scales and histories (NULL: none)
    size_t meta_bytes;
    size_t activation_bytes;                    // what the level allocated
} LevelRun;

static void download_metas(const GPT2Gpu *m, LevelRun *r) {
    if (!m->fp8_on) return;
    r->meta_bytes = (size_t)m->config.num_layers * LINEARS * FP8_ROLES * sizeof(Fp8Meta);
    r->metas = xmalloc(r->meta_bytes);
    CUDA_CHECK(cudaStreamSynchronize(gt_ctx.stream));
    CUDA_CHECK(cudaMemcpy(r->metas, m->fp8.metas, r->meta_bytes, cudaMemcpyDeviceToHost));
}

// STEPS training steps of the model cfg from `init` at `level`, on the
// batches of seeds 100 + step.
static void run_level(LevelRun *r, const GPT2Config *cfg, const Optimizations *o, Recompute level,
                      const float *init) {
    memset(r, 0, sizeof *r);
    RunPlan plan;
    char err[ERR_LEN];
    cr_assert(run_plan_build(&plan, o, cfg->padded_vocab_size, 1, level, 1, 0, 0, err) == 0, "%s",
              err);
    GPT2Gpu m;
    gpt2_gpu_init(&m, &gt_ctx, cfg, init, B, T, &plan);
    cr_assert_eq(m.plan.recompute, level);
    AdamWConfig adamw = adamw_default_config();
    set_constant_schedule(&m, &adamw);
    const size_t n = r->n = m.num_params;
    int32_t x[B * T], y[B * T];
    for (int step = 1; step <= STEPS; step++) {
        random_batch(x, y, B * T, cfg->vocab_size, 100 + step);
        cr_assert(gpt2_gpu_forward_tokens(&m, x, y, B, T, GPT2_TRAIN, err) == 0, "%s", err);
        r->loss[step - 1] = gpt2_gpu_read_loss(&m);
        gpt2_gpu_backward(&m);
        r->grads[step - 1] = xmalloc(n * sizeof(float));
        gpt2_gpu_download_floatx(&m, m.grads, r->grads[step - 1], n);
        update_at(&m, &adamw, step);
    }
    r->params = xmalloc(n * sizeof(float));
    r->weights = xmalloc(n * sizeof(float));
    r->m = xmalloc(n * sizeof(float));
    r->v = xmalloc(n * sizeof(float));
    gpt2_gpu_get_params(&m, r->params);
    gpt2_gpu_download_floatx(&m, m.params, r->weights, n);
    gpt2_gpu_get_moments(&m, r->m, r->v);
    download_metas(&m, r);
    // Validation on a smaller batch: the front of the same buffers.
    random_batch(x, y, B / 2 * T, cfg->vocab_size, 999);
    cr_assert(gpt2_gpu_forward_tokens(&m, x, y, B / 2, T, GPT2_LOSS, err) == 0, "%s", err);
    r->val_loss = gpt2_gpu_read_loss(&m);
    r->activation_bytes = m.acts.bytes;
    gpt2_gpu_free(&m);
}

static void free_level_run(LevelRun *r) {
    for (int s = 0; s < STEPS; s++) free(r->grads[s]);
    free(r->params), free(r->weights), free(r->m), free(r->v), free(r->metas);
}

static void assert_same_run(const LevelRun *got, const LevelRun *want, const char *what) {
    char name[160];
    for (int s = 0; s < STEPS; s++) {
        snprintf(name, sizeof name, "%s: loss at step %d", what, s + 1);
        gt_assert_identical(name, &got->loss[s], &want->loss[s], 1);
        snprintf(name, sizeof name, "%s: gradients at step %d", what, s + 1);
        gt_assert_identical(name, got->grads[s], want->grads[s], want->n);
    }
    snprintf(name, sizeof name, "%s: weights of record after %d steps", what, STEPS);
    gt_assert_identical(name, got->params, want->params, want->n);
    snprintf(name, sizeof name, "%s: working weights after %d steps", what, STEPS);
    gt_assert_identical(name, got->weights, want->weights, want->n);
    snprintf(name, sizeof name, "%s: AdamW m", what);
    gt_assert_identical(name, got->m, want->m, want->n);
    snprintf(name, sizeof name, "%s: AdamW v", what);
    gt_assert_identical(name, got->v, want->v, want->n);
    snprintf(name, sizeof name, "%s: validation loss", what);
    gt_assert_identical(name, &got->val_loss, &want->val_loss, 1);
    cr_assert_eq(got->meta_bytes, want->meta_bytes);
    if (want->metas)
        cr_assert(memcmp(got->metas, want->metas, want->meta_bytes) == 0,
                  "%s: FP8 scales or amax histories differ after %d steps", what, STEPS);
}

static void check_every_level_trains_the_bits_of_none(const Variant *v) {
    if (v->needs_fp8 && !gt_ctx.fp8)
        cr_skip_test("FP8 GEMMs need a GPU of compute capability 8.9 or later");
    const Optimizations o = switches_of(v);
    const GPT2Config cfg = tiny(v, &o);
    // GPT-2's init at 3x scale, so that the non-linear paths matter (as in
    // test_model_parity.c).
    float *init = xmalloc(gpt2_num_params(&cfg) * sizeof(float));
    gpt2_init_params(&cfg, init, 7);
    for (size_t i = 0; i < gpt2_num_params(&cfg); i++) init[i] *= 3;
    LevelRun none, level;
    run_level(&none, &cfg, &o, RECOMPUTE_NONE, init);
    cr_assert(v->needs_fp8 ? none.metas != NULL : 1, "chapter %02d made no FP8 buffers",
              v->chapter);
    size_t kept = none.activation_bytes;
    for (int r = RECOMPUTE_GELU; r < RECOMPUTE_LEVELS; r++) {
        run_level(&level, &cfg, &o, (Recompute)r, init);
        char what[96];
        snprintf(what, sizeof what, "chapter %02d%s%s, heads of %d, --recompute %s vs none",
                 v->chapter, v->no_fast_attention ? " --no-fast-attention" : "",
                 v->no_fp8 ? " --no-fp8" : "", cfg.channels / cfg.num_heads,
                 recompute_name((Recompute)r));
        assert_same_run(&level, &none, what);
        cr_assert_lt(level.activation_bytes, kept, "%s: %zu bytes of activations, not fewer "
                     "than the level before's %zu", what, level.activation_bytes, kept);
        kept = level.activation_bytes;
        free_level_run(&level);
    }
    free_level_run(&none);
    free(init);
}

TestSuite(recompute, .init = gpu_test_init, .fini = gpu_test_fini);

ParameterizedTestParameters(recompute, every_level_trains_the_bits_of_none) {
    static Variant v[] = {
#ifdef PRECISION_BF16
        {13, 0, 0, 1, 1},  // the bf16 build's fastest: FP8, Hopper's attention at heads of 64
        {13, 0, 1, 1, 0},  // chapter 12's step: no FP8
        {13, 1, 1, 1, 0},  // --no-fast-attention --no-fp8: chapter 05's attention
        {13, 1, 1, 0, 0},  // the same at heads of 16 (what an A100 runs at any head size)
        {4, 0, 0, 0, 0},   // fused GEMMs, eager attention
        {2, 0, 0, 0, 0},   // every kernel eager
#else
        {0, 0, 0, 0, 0},
        {1, 0, 0, 0, 0},
#endif
    };
    return cr_make_param_array(Variant, v, sizeof v / sizeof v[0]);
}

ParameterizedTest(Variant *v, recompute, every_level_trains_the_bits_of_none,
                  .init = gpu_test_init, .fini = gpu_test_fini) {
    check_every_level_trains_the_bits_of_none(v);
}

// A second backward pass of the same forward pass (none of the trainer's
// steps takes one) finds the shared buffers holding the first layer, which
// the first backward pass recomputed last: it recomputes the last layer too,
// and gets the same gradients.
Test(recompute, a_second_backward_pass_gets_the_same_gradients) {
    const Variant v = {first_chapter_of_build(), 0, 0, 0, 0};
    const Optimizations o = switches_of(&v);
    const GPT2Config cfg = tiny(&v, &o);
    float *init = xmalloc(gpt2_num_params(&cfg) * sizeof(float));
    gpt2_init_params(&cfg, init, 7);
    RunPlan plan;
    char err[ERR_LEN];
    cr_assert(run_plan_build(&plan, &o, cfg.padded_vocab_size, 1, RECOMPUTE_BLOCK, 1, 0, 0,
                             err) == 0,
              "%s", err);
    GPT2Gpu m;
    gpt2_gpu_init(&m, &gt_ctx, &cfg, init, B, T, &plan);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, B * T, cfg.vocab_size, 5);
    cr_assert(gpt2_gpu_forward_tokens(&m, x, y, B, T, GPT2_TRAIN, err) == 0, "%s", err);
    const size_t n = m.num_params;
    float *first = xmalloc(n * sizeof(float)), *second = xmalloc(n * sizeof(float));
    gpt2_gpu_backward(&m);
    gpt2_gpu_download_floatx(&m, m.grads, first, n);
    gpt2_gpu_backward(&m);
    gpt2_gpu_download_floatx(&m, m.grads, second, n);
    gt_assert_identical("gradients of a second backward pass, --recompute block", second, first,
                        n);
    free(first), free(second), free(init);
    gpt2_gpu_free(&m);
}

// ---- the trainer --------------------------------------------------------------------
// The build's last chapter on the trainer's tiny model: 6 steps at each
// level against none, every step's loss and norm, the weights and the
// moments after them, bit for bit. In the bf16 build chapter 13, with its
// graphs (steps 2 on replayed) and two micro-batches a step, with FP8 where
// the GPU has it, and again without FP8; in the fp32 build chapter 01.
TestSuite(recompute_training, .init = training_setup, .fini = training_teardown);

static void check_trainer_levels(Optimizations optim, int grad_accum, const char *what) {
    enum { N = 6 };
    const int read_once[] = {N};
    TrainOptions o = tiny_train_options(N);
    o.model.num_layers = 3;  // a layer between the first and the last (as above)
    o.grad_accum = grad_accum;
    SpRun none;
    sp_run(&none, &o, optim, N, read_once, 0);
    for (int r = RECOMPUTE_GELU; r < RECOMPUTE_LEVELS; r++) {
        o.recompute = (Recompute)r;
        SpRun level;
        sp_run(&level, &o, optim, N, read_once, 0);
        char name[128];
        snprintf(name, sizeof name, "%s, --recompute %s vs none", what,
                 recompute_name((Recompute)r));
        sp_assert_identical(&level, &none, name);
        sp_free(&level);
    }
    cr_assert(none.loss[N - 1] < none.loss[0], "%s: the loss did not fall", what);
    sp_free(&none);
}

#ifdef PRECISION_BF16
Test(recompute_training, every_level_trains_the_bits_of_none_in_chapter_13) {
    check_trainer_levels(chapter_optimizations(13), 2, "chapter 13, --grad-accum 2");
    Optimizations no_fp8 = chapter_optimizations(13);
    no_fp8.fast_attention = 0, no_fp8.fp8 = 0;
    check_trainer_levels(no_fp8, 2, "chapter 13 --no-fast-attention --no-fp8, --grad-accum 2");
}
#else
Test(recompute_training, every_level_trains_the_bits_of_none_in_chapter_01) {
    check_trainer_levels(chapter_optimizations(1), 1, "chapter 01");
}
#endif
