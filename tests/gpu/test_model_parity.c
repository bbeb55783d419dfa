// test_model_parity.c: the whole GPU model against the CPU reference, on a
// tiny model: every logit, the loss, every gradient tensor, and the
// parameters after 5 AdamW steps (tolerances.h says why each tolerance).
//
// Built twice (Makefile): into build/tests/gpu_tests for the fp32 build
// (chapters 00-01) and, with -DPRECISION_BF16, into build/tests/gpu_tests_bf16
// for the bf16 build (chapter 02 on), where the tests under PRECISION_BF16
// below compare the bf16 model with the same fp32 CPU reference. Each model
// runs the kernels of one chapter (gpu_ops_select).
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "util/compare.h"
#include "model/gpt2_cpu.h"
#include "gpu/gpt2_gpu.h"
#include "gpu_test.h"
#include "model/model_shape.h"
#include "optim/optimizer.h"
#include "util/tolerances.h"

TestSuite(model, .init = gpu_test_init, .fini = gpu_test_fini);

enum { B = 4, T = 32, STEPS = 5 };

static GPT2Config tiny(int tied, int padded) {
    GPT2Config c = {.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = padded ? 256 : 250,
                    .num_layers = 2, .num_heads = 4, .channels = 64, .tied = tied};
    return c;
}

// The first chapter of this build: 00 (fp32) or 02 (bf16).
static int first_chapter(void) { return chapter_first_of_precision(PRECISION_NAME); }

// A CPU model and a GPU model of chapter `chapter` with the same weights:
// GPT-2's init at 3x scale, so that the non-linear paths matter (as in
// test_cpu_model.c).
static void make_models_of(const GPT2Config *cfg, GPT2Cpu *cpu, GPT2Gpu *gpu, int chapter) {
    gpt2_cpu_init(cpu, cfg);
    gpt2_cpu_init_random(cpu, 7);
    for (size_t i = 0; i < cpu->num_params; i++) cpu->params[i] *= 3;
    Optimizations o = chapter_optimizations(chapter);
    const RunPlan plan = run_plan_for_model(&o, cfg->padded_vocab_size);
    gpt2_gpu_init(gpu, &gt_ctx, cfg, cpu->params, B, T, &plan);
}

static void make_models(const GPT2Config *cfg, GPT2Cpu *cpu, GPT2Gpu *gpu) {
    make_models_of(cfg, cpu, gpu, first_chapter());
}

// The GPU's forward (GPT2_TRAIN) and backward passes on a batch; its loss.
static float gpu_forward_backward(GPT2Gpu *gpu, const int32_t *x, const int32_t *y) {
    char err[ERR_LEN];
    cr_assert(gpt2_gpu_forward_tokens(gpu, x, y, B, T, GPT2_TRAIN, err) == 0, "%s", err);
    float loss = gpt2_gpu_read_loss(gpu);
    gpt2_gpu_backward(gpu);
    return loss;
}

static void random_batch(int32_t *x, int32_t *y, int V, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < B * T; i++) x[i] = (int32_t)rng_below(&rng, V), y[i] = (int32_t)rng_below(&rng, V);
}

// The CPU side of one optimizer step, as the CPU trainer takes it.
static void cpu_update(GPT2Cpu *m, float *mom1, float *mom2, float lr, const AdamWConfig *c,
                       float max_norm, int t) {
    float clip = grad_clip_factor(grad_global_norm(m->grads, m->num_params), max_norm);
    if (clip < 1.0f) scale_values(m->grads, m->num_params, clip);
    size_t offset = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = m->param_sizes[i];
        adamw_update(m->params + offset, m->grads + offset, mom1 + offset, mom2 + offset, n, lr, c,
                     gpt2_param_is_decayed(i), t);
        offset += n;
    }
}

// One training step of both models on the same batch (seeded by `step`),
// with the same AdamW settings and clipping at 1.0 (active with 3x-scale
// weights). Returns the GPU's loss; the CPU's is cpu->mean_loss.
static float step_both(GPT2Cpu *cpu, GPT2Gpu *gpu, float *mom1, float *mom2,
                       const AdamWConfig *adamw, int step) {
    const float lr = 1e-3f;
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cpu->config.vocab_size, 100 + step);
    gpt2_cpu_forward(cpu, x, y, B, T);
    gpt2_cpu_zero_grad(cpu);
    gpt2_cpu_backward(cpu);
    cpu_update(cpu, mom1, mom2, lr, adamw, 1.0f, step);
    float loss = gpu_forward_backward(gpu, x, y);
    gpt2_gpu_update(gpu, lr, adamw, 1.0f, step, gpu->norm);
    return loss;
}

typedef struct {
    int tied, padded;
} Variant;

#ifndef PRECISION_BF16
// ---- the fp32 build: chapters 00 and 01 ------------------------------------------

static void compare_forward_backward(const GPT2Config *cfg, int chapter, double tol) {
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models_of(cfg, &cpu, &gpu, chapter);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg->vocab_size, 3);
    gpt2_cpu_forward(&cpu, x, y, B, T);
    gpt2_cpu_zero_grad(&cpu);
    gpt2_cpu_backward(&cpu);
    float loss = gpu_forward_backward(&gpu, x, y);

    size_t nlogits = (size_t)B * T * cfg->padded_vocab_size;
    gt_compare("logits", gt_download(gpu.acts.logits, nlogits), cpu.acts.logits, nlogits, tol);
    gt_compare("loss", &loss, &cpu.mean_loss, 1, tol);
    float *grads = gt_download(gpu.grads, gpu.num_params);
    size_t offset = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        gt_compare(gpt2_param_names[t], grads + offset, cpu.grads + offset, cpu.param_sizes[t], tol);
        offset += cpu.param_sizes[t];
    }
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

ParameterizedTestParameters(model, fp32_forward_backward_match_cpu) {
    static Variant v[] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
    return cr_make_param_array(Variant, v, 4);
}

ParameterizedTest(Variant *v, model, fp32_forward_backward_match_cpu, .init = gpu_test_init,
                  .fini = gpu_test_fini) {
    GPT2Config cfg = tiny(v->tied, v->padded);
    compare_forward_backward(&cfg, 0, TOL_GPU_MODEL_FP32);
}

// Chapter 01: the same model with the GEMMs in TF32.
Test(model, tf32_forward_backward_match_cpu) {
    GPT2Config cfg = tiny(0, 0);
    compare_forward_backward(&cfg, 1, TOL_GPU_MODEL_TF32);
    cr_assert(gt_ctx.tensor_cores == 1, "chapter 01's model runs its GEMMs in TF32");
}

Test(model, fp32_five_adamw_steps_match_cpu) {
    GPT2Config cfg = tiny(0, 1);
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models(&cfg, &cpu, &gpu);
    float *mom1 = xcalloc(cpu.num_params, sizeof(float)), *mom2 = xcalloc(cpu.num_params, sizeof(float));
    // The key bias's gradient is exactly zero in exact arithmetic (adding a
    // constant to every key adds the same q.b to a row's scores, and softmax
    // ignores that), so in float it is pure rounding noise, different on the
    // two devices. With eps = 1e-8 Adam would turn that noise into updates of
    // +-lr; eps = 1e-6 keeps this comparison about the model. (The AdamW
    // kernel's own test uses the default eps.)
    AdamWConfig adamw = adamw_default_config();
    adamw.eps = 1e-6f;
    for (int step = 1; step <= STEPS; step++) {
        float loss = step_both(&cpu, &gpu, mom1, mom2, &adamw, step);
        char what[32];
        snprintf(what, sizeof what, "loss at step %d", step);
        gt_compare(what, &loss, &cpu.mean_loss, 1, TOL_GPU_MODEL_FP32);
    }
    float *params = gt_download(gpu.params, gpu.num_params);
    size_t offset = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        char what[48];
        snprintf(what, sizeof what, "%s after %d steps", gpt2_param_names[t], STEPS);
        gt_compare(what, params + offset, cpu.params + offset, cpu.param_sizes[t],
                   TOL_GPU_ADAMW_STEPS_FP32);
        offset += cpu.param_sizes[t];
    }
    free(mom1);
    free(mom2);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

Test(model, fp32_is_deterministic) {
    GPT2Config cfg = tiny(1, 1);
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models(&cfg, &cpu, &gpu);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg.vocab_size, 5);
    float *first = NULL;
    for (int run = 0; run < 2; run++) {
        gpu_forward_backward(&gpu, x, y);
        float *grads = gt_download(gpu.grads, gpu.num_params);
        if (run == 1) gt_assert_identical("gradients of two runs", grads, first, gpu.num_params);
        first = grads;
    }
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

#else
// ---- the bf16 build: chapter 02 on ----------------------------------------------
// The bf16 model against the fp32 CPU reference. Its weights are the
// reference's rounded to bf16 (8 significant bits), and every activation and
// gradient it stores is rounded again, so it computes a slightly different
// function: logits are compared against their scale (TOL_GPU_MODEL_BF16),
// the loss against itself (TOL_GPU_LOSS_BF16), and gradients by their
// direction, the cosine similarity (TOL_GPU_GRAD_COSINE_BF16); tolerances.h
// says why each. What is exact is checked exactly: the bf16 weights are the
// fp32 master weights rounded to nearest even, after the upload and after
// every AdamW step.

// With GPU_TEST_VERBOSE=1: the largest difference relative to the scale, for
// information (how the tolerances were chosen), tested by nothing.
static void print_max_diff(const char *what, const float *got, const float *ref, size_t n) {
    if (!getenv("GPU_TEST_VERBOSE")) return;
    double max_ref = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        max_ref = fmax(max_ref, fabs(ref[i]));
        worst = fmax(worst, fabs((double)got[i] - ref[i]));
    }
    fprintf(stderr, "  %-40s max|gpu-cpu| = %.3g = %.3g x max|cpu|\n", what, worst,
            max_ref > 0 ? worst / max_ref : worst);
}

// Cosine similarity of a gradient tensor with the CPU's, at least min_cos.
static void assert_cosine(const char *what, const float *got, const float *ref, size_t n,
                          double min_cos) {
    double c = cosine_similarity(got, ref, n);
    if (getenv("GPU_TEST_VERBOSE"))
        fprintf(stderr, "  %-40s cosine(gpu, cpu) = %.7f, 1 - cosine = %.3g (at least %.4g)\n",
                what, c, 1 - c, min_cos);
    cr_assert(c >= min_cos, "%s: cosine similarity with the CPU's %.7f is below %.4g", what, c,
              min_cos);
}

// And its size: the ratio of the norms within TOL_GRAD_NORM_RATIO of 1. The
// cosine cannot see a gradient twice too large.
static void assert_norm_ratio_within(const char *what, const float *got, const float *ref,
                                     size_t n, double max_off) {
    double r = norm_ratio(got, ref, n);
    if (getenv("GPU_TEST_VERBOSE"))
        fprintf(stderr, "  %-40s |gpu| / |cpu| = %.6f (1 +- %g)\n", what, r, max_off);
    cr_assert(fabs(r - 1) <= max_off, "%s: |gpu| / |cpu| = %.6f, more than %g from 1", what, r,
              max_off);
}

static void assert_norm_ratio(const char *what, const float *got, const float *ref, size_t n) {
    assert_norm_ratio_within(what, got, ref, n, TOL_GRAD_NORM_RATIO);
}

// Every parameter tensor's gradient, `got` against `ref`, by direction
// (assert_cosine, TOL_GPU_GRAD_COSINE_BF16) and by size (assert_norm_ratio).
// Each buffer is laid out by its own tensor sizes; where they differ (a
// padded vocabulary against an unpadded one) the rows both have, the first
// ones, are compared. Empty tensors (a tied lm_head) are skipped. `vs` names
// the comparison in the messages.
static void assert_gradients_agree_within(const float *got,
                                          const size_t got_sizes[NUM_PARAM_TENSORS],
                                          const float *ref,
                                          const size_t ref_sizes[NUM_PARAM_TENSORS],
                                          const char *vs, double min_cosine, double max_norm_off) {
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        const size_t n = got_sizes[t] < ref_sizes[t] ? got_sizes[t] : ref_sizes[t];
        if (n > 0) {
            char what[96];
            snprintf(what, sizeof what, "gradient of %s, %s", gpt2_param_names[t], vs);
            print_max_diff(what, got, ref, n);
            assert_cosine(what, got, ref, n, min_cosine);
            assert_norm_ratio_within(what, got, ref, n, max_norm_off);
        }
        got += got_sizes[t];
        ref += ref_sizes[t];
    }
}

static void assert_gradients_agree(const float *got, const size_t got_sizes[NUM_PARAM_TENSORS],
                                   const float *ref, const size_t ref_sizes[NUM_PARAM_TENSORS],
                                   const char *vs) {
    assert_gradients_agree_within(got, got_sizes, ref, ref_sizes, vs, TOL_GPU_GRAD_COSINE_BF16,
                                  TOL_GRAD_NORM_RATIO);
}

// bf16 weights that are not the master weights rounded to nearest even
// would mean the upload or AdamW's rounding went wrong: bit for bit.
static void assert_params_are_rounded_master(const GPT2Gpu *gpu, const char *when) {
    size_t n = gpu->num_params;
    float *params = xmalloc(n * sizeof(float)), *master = xmalloc(n * sizeof(float));
    gpt2_gpu_download_floatx(gpu, gpu->params, params, n);
    gpt2_gpu_download(gpu, gpu->master, master);
    for (size_t i = 0; i < n; i++) master[i] = round_to_floatx(master[i]);
    char what[96];
    snprintf(what, sizeof what, "bf16 weights vs the master weights rounded, %s", when);
    gt_assert_identical(what, params, master, n);
    free(params);
    free(master);
}

Test(model, bf16_weights_are_the_master_weights_rounded) {
    GPT2Config cfg = tiny(0, 1);
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models(&cfg, &cpu, &gpu);
    cr_assert(gpu.master != NULL, "the bf16 build keeps fp32 master weights");
    // The master weights are the host's fp32 weights, unchanged...
    float *master = xmalloc(gpu.num_params * sizeof(float));
    gpt2_gpu_download(&gpu, gpu.master, master);
    gt_assert_identical("master weights vs the host's", master, cpu.params, gpu.num_params);
    // ...and the weights of record (what a checkpoint saves) are those.
    float *saved = xmalloc(gpu.num_params * sizeof(float));
    gpt2_gpu_get_params(&gpu, saved);
    gt_assert_identical("gpt2_gpu_get_params vs the host's", saved, cpu.params, gpu.num_params);
    assert_params_are_rounded_master(&gpu, "after the upload");
    free(master);
    free(saved);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

// The logits (B,T,Vp) of a GPT2_LOSS pass: from chapter 04 on, a GPT2_TRAIN
// pass writes their gradient over them.
static float *gpu_logits(GPT2Gpu *gpu, const int32_t *x, const int32_t *y) {
    char err[ERR_LEN];
    cr_assert(gpt2_gpu_forward_tokens(gpu, x, y, B, T, GPT2_LOSS, err) == 0, "%s", err);
    const int Vp = gpu->config.padded_vocab_size;
    float *logits = xmalloc((size_t)B * T * Vp * sizeof(float));
    gpt2_gpu_download_logits(gpu, 0, (size_t)B * T, Vp, logits);
    return logits;
}

static void compare_forward_backward_bf16(const GPT2Config *cfg, int chapter) {
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models_of(cfg, &cpu, &gpu, chapter);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg->vocab_size, 3);
    gpt2_cpu_forward(&cpu, x, y, B, T);
    gpt2_cpu_zero_grad(&cpu);
    gpt2_cpu_backward(&cpu);
    float *logits = gpu_logits(&gpu, x, y);
    float loss = gpu_forward_backward(&gpu, x, y);

    size_t nlogits = (size_t)B * T * cfg->padded_vocab_size;
    gt_compare("logits (bf16)", logits, cpu.acts.logits, nlogits, TOL_GPU_MODEL_BF16);
    gt_compare("loss (bf16)", &loss, &cpu.mean_loss, 1, TOL_GPU_LOSS_BF16);
    float *grads = xmalloc(gpu.num_params * sizeof(float));
    gpt2_gpu_download_floatx(&gpu, gpu.grads, grads, gpu.num_params);
    assert_gradients_agree(grads, gpu.param_sizes, cpu.grads, cpu.param_sizes, "bf16 vs CPU");
    free(logits);
    free(grads);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

ParameterizedTestParameters(model, bf16_forward_backward_match_cpu) {
    static Variant v[] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
    return cr_make_param_array(Variant, v, 4);
}

ParameterizedTest(Variant *v, model, bf16_forward_backward_match_cpu, .init = gpu_test_init,
                  .fini = gpu_test_fini) {
    GPT2Config cfg = tiny(v->tied, v->padded);
    compare_forward_backward_bf16(&cfg, first_chapter());
}

// ---- chapter 04: the fused kernels ------------------------------------------------
// Against the CPU, as chapter 02's model above; then against chapter 03's
// model, below. The vocabulary of 250 makes the logits' rows 256 long
// (gpu_ops_logits_stride): the stride path is exercised unpadded and padded.
ParameterizedTestParameters(model, fused_forward_backward_match_cpu) {
    static Variant v[] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
    return cr_make_param_array(Variant, v, 4);
}

ParameterizedTest(Variant *v, model, fused_forward_backward_match_cpu, .init = gpu_test_init,
                  .fini = gpu_test_fini) {
    GPT2Config cfg = tiny(v->tied, v->padded);
    compare_forward_backward_bf16(&cfg, 4);
}

// One AdamW step at lr 1e-3, clipping at 1.0: its values from the host, or,
// for a model whose plan takes them from the device (chapter 11 on), from
// the table of a constant schedule that set_constant_schedule uploaded.
static void update_at(GPT2Gpu *gpu, const AdamWConfig *adamw, int step) {
    if (gpu->plan.device_schedule) gpt2_gpu_update_scheduled(gpu, adamw, 1.0f, gpu->norm);
    else gpt2_gpu_update(gpu, 1e-3f, adamw, 1.0f, step, gpu->norm);
}

static void set_constant_schedule(GPT2Gpu *gpu, const AdamWConfig *adamw, int steps) {
    if (!gpu->plan.device_schedule) return;
    const LrSchedule lr = {.max_lr = 1e-3f, .min_lr_fraction = 1.0f, .warmup_steps = 0,
                           .total_steps = steps};
    gpt2_gpu_set_schedule(gpu, &lr, adamw, steps, 0);
}

// Chapter N computes what chapter N-1 computes, in another order and with
// other roundings to bf16: the logits within the bf16 model tolerance of the
// previous chapter's, the loss within the bf16 loss tolerance, every
// gradient with a cosine of at least TOL_GPU_GRAD_COSINE_BF16 and the same
// norm within TOL_GRAD_NORM_RATIO; then five AdamW steps from the same
// weights on the same batches: losses step by step, and the change of the
// weights. The model may be tied or not.
// How far a chapter may move the model from the one before: bf16's roundings
// (tolerances.h), or chapter 13's FP8 operands.
typedef struct {
    double loss, grad_cosine, grad_norm, steps_cosine;
} ChapterTolerances;

static const ChapterTolerances BF16_TOLERANCES = {TOL_GPU_LOSS_BF16, TOL_GPU_GRAD_COSINE_BF16,
                                                  TOL_GRAD_NORM_RATIO,
                                                  TOL_GPU_ADAMW_STEPS_COSINE_BF16};

static void check_chapter_matches_previous_within(int chapter, const GPT2Config *cfg,
                                                  const ChapterTolerances *tol) {
    GPT2Cpu cpu;
    GPT2Gpu before, after;
    make_models_of(cfg, &cpu, &before, chapter - 1);
    Optimizations o = chapter_optimizations(chapter);
    const RunPlan plan_after = run_plan_for_model(&o, cfg->padded_vocab_size);
    gpt2_gpu_init(&after, &gt_ctx, cfg, cpu.params, B, T, &plan_after);
    AdamWConfig adamw = adamw_default_config();
    adamw.eps = 1e-6f;
    set_constant_schedule(&before, &adamw, STEPS);
    set_constant_schedule(&after, &adamw, STEPS);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg->vocab_size, 11);
    const size_t nlogits = (size_t)B * T * cfg->padded_vocab_size, n = before.num_params;
    char what[80];
    snprintf(what, sizeof what, "logits: chapter %02d vs %02d", chapter, chapter - 1);
    gt_compare(what, gpu_logits(&after, x, y), gpu_logits(&before, x, y), nlogits,
               TOL_GPU_MODEL_BF16);
    float loss_before = gpu_forward_backward(&before, x, y);
    float loss_after = gpu_forward_backward(&after, x, y);
    snprintf(what, sizeof what, "loss: chapter %02d vs %02d", chapter, chapter - 1);
    gt_compare(what, &loss_after, &loss_before, 1, tol->loss);
    float *g0 = xmalloc(n * sizeof(float)), *g1 = xmalloc(n * sizeof(float));
    gpt2_gpu_download_floatx(&before, before.grads, g0, n);
    gpt2_gpu_download_floatx(&after, after.grads, g1, n);
    snprintf(what, sizeof what, "chapter %02d vs %02d", chapter, chapter - 1);
    assert_gradients_agree_within(g1, after.param_sizes, g0, before.param_sizes, what,
                                  tol->grad_cosine, tol->grad_norm);
    // Five steps each, from the same weights (the first step's gradients above
    // are recomputed: step_both-style, on the batches of seed 100 + step).
    for (int step = 1; step <= STEPS; step++) {
        random_batch(x, y, cfg->vocab_size, 100 + step);
        float l0 = gpu_forward_backward(&before, x, y), l1 = gpu_forward_backward(&after, x, y);
        update_at(&before, &adamw, step);
        update_at(&after, &adamw, step);
        snprintf(what, sizeof what, "loss at step %d, chapter %02d vs %02d", step, chapter,
                 chapter - 1);
        gt_compare(what, &l1, &l0, 1, tol->loss);
    }
    float *w0 = xmalloc(n * sizeof(float)), *w1 = xmalloc(n * sizeof(float));
    gpt2_gpu_get_params(&before, w0);
    gpt2_gpu_get_params(&after, w1);
    for (size_t i = 0; i < n; i++) w0[i] -= cpu.params[i], w1[i] -= cpu.params[i];
    snprintf(what, sizeof what, "change of all weights over 5 steps, chapter %02d vs %02d",
             chapter, chapter - 1);
    assert_cosine(what, w1, w0, n, tol->steps_cosine);
    assert_norm_ratio_within(what, w1, w0, n, tol->grad_norm);
    free(g0), free(g1), free(w0), free(w1);
    gpt2_gpu_free(&before);
    gpt2_gpu_free(&after);
    gpt2_cpu_free(&cpu);
}

static void check_chapter_matches_previous(int chapter, const GPT2Config *cfg) {
    check_chapter_matches_previous_within(chapter, cfg, &BF16_TOLERANCES);
}

// The vocabulary of 250 makes chapter 04's logits rows 256 long
// (gpu_ops_logits_stride): the stride path runs.
Test(model, fused_matches_chapter_03) {
    GPT2Config cfg = tiny(0, 0);
    Optimizations o = chapter_optimizations(4);
    cr_assert(gpu_ops_logits_stride(&o, cfg.padded_vocab_size) == 256, "logits rows of %d, not 256",
              gpu_ops_logits_stride(&o, cfg.padded_vocab_size));
    check_chapter_matches_previous(4, &cfg);
}

// ---- chapter 05: flash attention ---------------------------------------------------
// The tiny model's heads are 16 wide, one of the head sizes the flash kernels
// are built for; T = 32 is a part of one tile.
ParameterizedTestParameters(model, flash_forward_backward_match_cpu) {
    static Variant v[] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
    return cr_make_param_array(Variant, v, 4);
}

ParameterizedTest(Variant *v, model, flash_forward_backward_match_cpu, .init = gpu_test_init,
                  .fini = gpu_test_fini) {
    GPT2Config cfg = tiny(v->tied, v->padded);
    compare_forward_backward_bf16(&cfg, 5);
}

Test(model, flash_matches_chapter_04) {
    GPT2Config cfg = tiny(0, 0);
    check_chapter_matches_previous(5, &cfg);
}

// Wider heads: 2 of 64, GPT-2's head size, in the same tiny model.
Test(model, flash_matches_chapter_04_gpt2_heads) {
    GPT2Config cfg = tiny(1, 1);
    cfg.channels = 128;
    cfg.num_heads = 2;
    check_chapter_matches_previous(5, &cfg);
}

// ---- chapter 06: the vocabulary padded ---------------------------------------------
// The logits of the real vocabulary, rows of V values, whatever the padding.
static float *gpu_real_logits(GPT2Gpu *gpu, const int32_t *x, const int32_t *y) {
    char err[ERR_LEN];
    cr_assert(gpt2_gpu_forward_tokens(gpu, x, y, B, T, GPT2_LOSS, err) == 0, "%s", err);
    const int V = gpu->config.vocab_size;
    float *logits = xmalloc((size_t)B * T * V * sizeof(float));
    gpt2_gpu_download_logits(gpu, 0, (size_t)B * T, V, logits);
    return logits;
}

// A parameter-sized host buffer's tensor i, of model `gpu`.
static const float *tensor_of(const GPT2Gpu *gpu, const float *all, int i) {
    size_t offset = 0;
    for (int t = 0; t < i; t++) offset += gpu->param_sizes[t];
    return all + offset;
}

// Chapter 06 computes chapter 05's function: the same weights, with zero
// rows appended to wte and lm_head (gpt2_params_repad). The logits of the
// real vocabulary and the loss within bf16's tolerances, every gradient of
// the real rows by direction and size, then five AdamW steps.
Test(model, padded_matches_chapter_05) {
    GPT2Config c5 = tiny(0, 0), c6 = c5;
    Optimizations o5 = chapter_optimizations(5), o6 = chapter_optimizations(6);
    apply_model_switches(&o6, &c6);
    cr_assert(c6.padded_vocab_size == 256 && c5.padded_vocab_size == 250);
    float *p5 = xmalloc(gpt2_num_params(&c5) * sizeof(float));
    float *p6 = xmalloc(gpt2_num_params(&c6) * sizeof(float));
    gpt2_init_params(&c5, p5, 7);
    for (size_t i = 0; i < gpt2_num_params(&c5); i++) p5[i] *= 3;
    char err[ERR_LEN];
    cr_assert(gpt2_params_repad(&c5, p5, &c6, p6, err) == 0, "%s", err);
    GPT2Gpu g5, g6;
    const RunPlan plan_g5 = run_plan_for_model(&o5, c5.padded_vocab_size);
    gpt2_gpu_init(&g5, &gt_ctx, &c5, p5, B, T, &plan_g5);
    const RunPlan plan_g6 = run_plan_for_model(&o6, c6.padded_vocab_size);
    gpt2_gpu_init(&g6, &gt_ctx, &c6, p6, B, T, &plan_g6);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, c5.vocab_size, 11);
    gt_compare("real logits: chapter 06 vs 05", gpu_real_logits(&g6, x, y),
               gpu_real_logits(&g5, x, y), (size_t)B * T * c5.vocab_size, TOL_GPU_MODEL_BF16);
    float l5 = gpu_forward_backward(&g5, x, y), l6 = gpu_forward_backward(&g6, x, y);
    gt_compare("loss: chapter 06 vs 05", &l6, &l5, 1, TOL_GPU_LOSS_BF16);
    float *gr5 = xmalloc(g5.num_params * sizeof(float)), *gr6 = xmalloc(g6.num_params * sizeof(float));
    gpt2_gpu_download_floatx(&g5, g5.grads, gr5, g5.num_params);
    gpt2_gpu_download_floatx(&g6, g6.grads, gr6, g6.num_params);
    assert_gradients_agree(gr6, g6.param_sizes, gr5, g5.param_sizes, "chapter 06 vs 05");
    AdamWConfig adamw = adamw_default_config();
    adamw.eps = 1e-6f;
    for (int step = 1; step <= STEPS; step++) {
        random_batch(x, y, c5.vocab_size, 100 + step);
        float a = gpu_forward_backward(&g5, x, y), b = gpu_forward_backward(&g6, x, y);
        gpt2_gpu_update(&g5, 1e-3f, &adamw, 1.0f, step, g5.norm);
        gpt2_gpu_update(&g6, 1e-3f, &adamw, 1.0f, step, g6.norm);
        char what[48];
        snprintf(what, sizeof what, "loss at step %d, chapter 06 vs 05", step);
        gt_compare(what, &b, &a, 1, TOL_GPU_LOSS_BF16);
    }
    free(p5), free(p6), free(gr5), free(gr6);
    gpt2_gpu_free(&g5);
    gpt2_gpu_free(&g6);
}

// The padding rows of wte and lm_head: no token embeds with them and the
// classifier gives their logits a zero gradient, so their gradients are
// zeros, AdamW's moments stay zeros, and so do they (weight decay of zero
// is zero): exactly, after every step, in the bf16 weights and the fp32
// master copy.
Test(model, padded_rows_stay_zero) {
    GPT2Config cfg = tiny(0, 0);
    Optimizations o = chapter_optimizations(6);
    apply_model_switches(&o, &cfg);
    float *p = xmalloc(gpt2_num_params(&cfg) * sizeof(float));
    gpt2_init_params(&cfg, p, 7);
    GPT2Gpu g;
    const RunPlan plan_g = run_plan_for_model(&o, cfg.padded_vocab_size);
    gpt2_gpu_init(&g, &gt_ctx, &cfg, p, B, T, &plan_g);
    AdamWConfig adamw = adamw_default_config();
    const size_t n = g.num_params, C = cfg.channels, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    float *host = xmalloc(n * sizeof(float));
    for (int step = 1; step <= STEPS; step++) {
        int32_t x[B * T], y[B * T];
        random_batch(x, y, cfg.vocab_size, 200 + step);
        gpu_forward_backward(&g, x, y);
        gpt2_gpu_update(&g, 1e-3f, &adamw, 1.0f, step, g.norm);
        const struct {
            const char *name;
            int is_floatx;
            const void *device;
        } buffers[] = {{"weights (bf16)", 1, g.params}, {"gradients", 1, g.grads},
                       {"master weights", 0, g.master}, {"AdamW m", 0, g.m}, {"AdamW v", 0, g.v}};
        for (size_t k = 0; k < sizeof buffers / sizeof buffers[0]; k++) {
            if (buffers[k].is_floatx) gpt2_gpu_download_floatx(&g, buffers[k].device, host, n);
            else gpt2_gpu_download(&g, buffers[k].device, host);
            for (int t = PARAM_WTE; t <= PARAM_LM_HEAD; t += PARAM_LM_HEAD - PARAM_WTE) {
                const float *rows = tensor_of(&g, host, t);
                for (size_t i = V * C; i < Vp * C; i++)
                    cr_assert(rows[i] == 0.0f, "%s of %s, padding row %zu, after step %d: %g",
                              buffers[k].name, gpt2_param_names[t], i / C, step,
                              (double)rows[i]);
            }
        }
    }
    free(p), free(host);
    gpt2_gpu_free(&g);
}

// ---- chapter 07: lm_head tied to wte -----------------------------------------------
// The tied model against the CPU reference, in the chapter's shape (padded
// and tied), as every chapter's model is.
Test(model, tied_forward_backward_match_cpu) {
    GPT2Config cfg = tiny(0, 0);
    Optimizations o = chapter_optimizations(7);
    apply_model_switches(&o, &cfg);
    cr_assert(cfg.tied && cfg.padded_vocab_size == 256);
    compare_forward_backward_bf16(&cfg, 7);
}

// Tying changes the model, but not where it starts: an untied model whose
// lm_head is a copy of wte (gpt2_params_untie) computes the same logits, and
// its two gradients add up to the tied one (gpt2_grads_tie). Chapter 07 on
// the tied weights against chapter 06 on the untied copy.
Test(model, tied_gradient_is_the_sum_of_both_uses) {
    GPT2Config c7 = tiny(0, 0);
    Optimizations o6 = chapter_optimizations(6), o7 = chapter_optimizations(7);
    apply_model_switches(&o7, &c7);
    GPT2Config c6 = c7;
    c6.tied = 0;
    float *p7 = xmalloc(gpt2_num_params(&c7) * sizeof(float));
    float *p6 = xmalloc(gpt2_num_params(&c6) * sizeof(float));
    gpt2_init_params(&c7, p7, 7);
    for (size_t i = 0; i < gpt2_num_params(&c7); i++) p7[i] *= 3;
    gpt2_params_untie(&c7, p7, p6);
    GPT2Gpu g6, g7;
    const RunPlan plan_g6 = run_plan_for_model(&o6, c6.padded_vocab_size);
    gpt2_gpu_init(&g6, &gt_ctx, &c6, p6, B, T, &plan_g6);
    const RunPlan plan_g7 = run_plan_for_model(&o7, c7.padded_vocab_size);
    gpt2_gpu_init(&g7, &gt_ctx, &c7, p7, B, T, &plan_g7);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, c7.vocab_size, 13);
    gt_compare("logits: tied vs its untied copy", gpu_real_logits(&g7, x, y),
               gpu_real_logits(&g6, x, y), (size_t)B * T * c7.vocab_size, TOL_GPU_MODEL_BF16);
    float l6 = gpu_forward_backward(&g6, x, y), l7 = gpu_forward_backward(&g7, x, y);
    gt_compare("loss: tied vs its untied copy", &l7, &l6, 1, TOL_GPU_LOSS_BF16);
    float *gr6 = xmalloc(g6.num_params * sizeof(float)), *gr7 = xmalloc(g7.num_params * sizeof(float));
    float *summed = xmalloc(g7.num_params * sizeof(float));
    gpt2_gpu_download_floatx(&g6, g6.grads, gr6, g6.num_params);
    gpt2_gpu_download_floatx(&g7, g7.grads, gr7, g7.num_params);
    gpt2_grads_tie(&c7, gr6, summed);
    assert_gradients_agree(gr7, g7.param_sizes, summed, g7.param_sizes, "tied vs the untied sum");
    // 38.6 million parameters at 124M; here (Vp x C) fewer, and their AdamW state.
    cr_assert_eq(g6.num_params - g7.num_params, (size_t)c7.padded_vocab_size * c7.channels);
    free(p6), free(p7), free(gr6), free(gr7), free(summed);
    gpt2_gpu_free(&g6);
    gpt2_gpu_free(&g7);
}

// Five AdamW steps of the bf16 model (fp32 master weights and moments) and of
// the CPU reference from the same weights, on the same batches: the losses
// agree step by step, the bf16 weights stay the master weights rounded, and
// the total change of the master weights points where the CPU's points.
Test(model, bf16_five_adamw_steps_match_cpu) {
    GPT2Config cfg = tiny(0, 1);
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models(&cfg, &cpu, &gpu);
    size_t n = cpu.num_params;
    float *initial = gt_copy(cpu.params, n);
    float *mom1 = xcalloc(n, sizeof(float)), *mom2 = xcalloc(n, sizeof(float));
    AdamWConfig adamw = adamw_default_config();
    adamw.eps = 1e-6f;  // as in fp32_five_adamw_steps_match_cpu, for the same reason
    for (int step = 1; step <= STEPS; step++) {
        float loss = step_both(&cpu, &gpu, mom1, mom2, &adamw, step);
        char what[48];
        snprintf(what, sizeof what, "loss at step %d (bf16)", step);
        gt_compare(what, &loss, &cpu.mean_loss, 1, TOL_GPU_LOSS_BF16);
        snprintf(what, sizeof what, "after step %d", step);
        assert_params_are_rounded_master(&gpu, what);
    }
    float *master = xmalloc(n * sizeof(float));
    gpt2_gpu_get_params(&gpu, master);
    float *d_gpu = xmalloc(n * sizeof(float)), *d_cpu = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) d_gpu[i] = master[i] - initial[i], d_cpu[i] = cpu.params[i] - initial[i];
    if (getenv("GPU_TEST_VERBOSE")) {  // tensor by tensor, for information
        size_t offset = 0;
        for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
            size_t nt = cpu.param_sizes[t];
            if (nt == 0) continue;
            char what[64];
            snprintf(what, sizeof what, "%s: change over %d steps", gpt2_param_names[t], STEPS);
            fprintf(stderr, "  %-40s cosine(gpu, cpu) = %.6f\n", what,
                    cosine_similarity(d_gpu + offset, d_cpu + offset, nt));
            snprintf(what, sizeof what, "%s after %d steps", gpt2_param_names[t], STEPS);
            print_max_diff(what, master + offset, cpu.params + offset, nt);
            offset += nt;
        }
    }
    char what[64];
    snprintf(what, sizeof what, "change of all weights over %d steps", STEPS);
    assert_cosine(what, d_gpu, d_cpu, n, TOL_GPU_ADAMW_STEPS_COSINE_BF16);
    free(initial);
    free(mom1);
    free(mom2);
    free(master);
    free(d_gpu);
    free(d_cpu);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

// The same batch twice: the same gradients, bit for bit, in every chapter of
// the bf16 build (no kernel adds with atomics, and every sum has a fixed order).
static void check_deterministic_of(int chapter, const GPT2Config *cfg) {
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models_of(cfg, &cpu, &gpu, chapter);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg->vocab_size, 5);
    size_t n = gpu.num_params;
    float *first = xmalloc(n * sizeof(float)), *second = xmalloc(n * sizeof(float));
    for (int run = 0; run < 2; run++) {
        gpu_forward_backward(&gpu, x, y);
        gpt2_gpu_download_floatx(&gpu, gpu.grads, run == 0 ? first : second, n);
    }
    char what[64];
    snprintf(what, sizeof what, "bf16 gradients of two runs, chapter %02d", chapter);
    gt_assert_identical(what, second, first, n);
    free(first);
    free(second);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

static void check_deterministic(int chapter) {
    GPT2Config cfg = tiny(1, 1);
    check_deterministic_of(chapter, &cfg);
}

Test(model, bf16_is_deterministic) {
    for (int chapter = first_chapter(); chapter < chapter_count(); chapter++)
        check_deterministic(chapter);
}

// ---- chapter 11: gradient accumulation -----------------------------------------------
// One step over a batch of B sequences in two micro-batches of B/2, their
// gradients summed (gpt2_gpu_backward_add) and the update told so
// (the plan's micro_batches = 2), against one step over the
// whole batch, from the same weights. The mean of the two micro-batches'
// mean losses is the batch's mean loss; their summed gradient, halved, is the
// batch's gradient but for bf16 roundings (each micro-batch's gradient is
// rounded to bf16, then their sum once more), so the checks are the bf16
// chapter-to-chapter ones: each gradient tensor by direction and size, then
// three steps' losses and the change of the weights.
static float accumulated_step(GPT2Gpu *gpu, const int32_t *x, const int32_t *y) {
    char err[ERR_LEN];
    const int half = B / 2;
    float loss = 0;
    for (int k = 0; k < 2; k++) {
        const size_t at = (size_t)k * half * T;
        cr_assert(gpt2_gpu_forward_tokens(gpu, x + at, y + at, half, T, GPT2_TRAIN, err) == 0,
                  "%s", err);
        loss += gpt2_gpu_read_loss(gpu) / 2;
        if (k == 0) gpt2_gpu_backward(gpu);
        else gpt2_gpu_backward_add(gpu);
    }
    return loss;
}

Test(model, gradient_accumulation_matches_one_batch) {
    enum { STEPS_HERE = 3 };
    GPT2Config cfg = tiny(1, 1);
    GPT2Cpu cpu;
    GPT2Gpu one, two;
    make_models_of(&cfg, &cpu, &one, 9);  // chapter 09: the fused update the schedule needs
    Optimizations o = chapter_optimizations(9);
    RunPlan plan_two;  // two micro-batches a step: the step's values from the device
    char err[ERR_LEN];
    cr_assert(run_plan_build(&plan_two, &o, cfg.padded_vocab_size, 2, RECOMPUTE_NONE, 1, 0,
                             0, err) == 0,
              "%s", err);
    gpt2_gpu_init(&two, &gt_ctx, &cfg, cpu.params, B, T, &plan_two);
    AdamWConfig adamw = adamw_default_config();
    adamw.eps = 1e-6f;
    const LrSchedule lr = {.max_lr = 1e-3f, .min_lr_fraction = 1.0f, .warmup_steps = 0,
                           .total_steps = STEPS_HERE};
    gpt2_gpu_set_schedule(&two, &lr, &adamw, STEPS_HERE, 0);
    const size_t n = one.num_params;
    float *g1 = xmalloc(n * sizeof(float)), *g2 = xmalloc(n * sizeof(float));
    int32_t x[B * T], y[B * T];
    char what[96];
    for (int step = 1; step <= STEPS_HERE; step++) {
        random_batch(x, y, cfg.vocab_size, 300 + step);
        float l1 = gpu_forward_backward(&one, x, y), l2 = accumulated_step(&two, x, y);
        snprintf(what, sizeof what, "loss at step %d, two micro-batches vs one batch", step);
        gt_compare(what, &l2, &l1, 1, TOL_GPU_LOSS_BF16);
        if (step == 1) {  // the same weights still: the gradients themselves
            gpt2_gpu_download_floatx(&one, one.grads, g1, n);
            gpt2_gpu_download_floatx(&two, two.grads, g2, n);
            for (size_t i = 0; i < n; i++) g2[i] /= 2;
            assert_gradients_agree(g2, two.param_sizes, g1, one.param_sizes,
                                   "two micro-batches (sum / 2) vs one batch");
        }
        gpt2_gpu_update(&one, 1e-3f, &adamw, 1.0f, step, one.norm);  // lr's value every step
        gpt2_gpu_update_scheduled(&two, &adamw, 1.0f, two.norm);
        float norm1, norm2;  // the norm of the mean gradient, in both
        gpu_memcpy_sync(&gt_ctx, &norm1, one.norm, sizeof(float), cudaMemcpyDeviceToHost);
        gpu_memcpy_sync(&gt_ctx, &norm2, two.norm, sizeof(float), cudaMemcpyDeviceToHost);
        snprintf(what, sizeof what, "gradient norm at step %d", step);
        gt_compare(what, &norm2, &norm1, 1, TOL_GRAD_NORM_RATIO);
    }
    gpt2_gpu_get_params(&one, g1);
    gpt2_gpu_get_params(&two, g2);
    for (size_t i = 0; i < n; i++) g1[i] -= cpu.params[i], g2[i] -= cpu.params[i];
    assert_cosine("change of all weights, two micro-batches vs one batch", g2, g1, n,
                  TOL_GPU_ADAMW_STEPS_COSINE_BF16);
    assert_norm_ratio("change of all weights, two micro-batches vs one batch", g2, g1, n);
    free(g1), free(g2);
    gpt2_gpu_free(&one);
    gpt2_gpu_free(&two);
    gpt2_cpu_free(&cpu);
}

// How the error of a gradient summed over N micro-batches grows with N. Each
// micro-batch's gradient is rounded to bf16 as it is added to the running
// sum (gpt2_gpu_backward_add: floatX gradients, no fp32 accumulator), so the
// sum of N carries up to N roundings of 2^-9 where one batch has one. The
// same 8 sequences, as one batch and as N = 2, 4, 8 micro-batches, against
// the fp32 CPU gradient of the 8: the error of all gradients (norm of the
// difference over norm of the reference), and each tensor within the
// chapter tolerances (cosine, norm ratio) at every N. GPU_TEST_CSV=path
// appends the measured errors there, rows of label, micro_batches,
// sequences_each, relative_error.
Test(model, gradient_accumulation_error_by_micro_batches) {
    enum { SEQS = 8 };
    GPT2Config cfg = tiny(1, 1);
    GPT2Cpu cpu;
    gpt2_cpu_init(&cpu, &cfg);
    gpt2_cpu_init_random(&cpu, 7);
    for (size_t i = 0; i < cpu.num_params; i++) cpu.params[i] *= 3;
    Rng rng;
    rng_seed(&rng, 77);
    int32_t x[SEQS * T], y[SEQS * T];
    for (int i = 0; i < SEQS * T; i++)
        x[i] = (int32_t)rng_below(&rng, cfg.vocab_size), y[i] = (int32_t)rng_below(&rng, cfg.vocab_size);
    gpt2_cpu_forward(&cpu, x, y, SEQS, T);
    gpt2_cpu_zero_grad(&cpu);
    gpt2_cpu_backward(&cpu);
    const char *csv_path = getenv("GPU_TEST_CSV");
    FILE *csv = csv_path ? fopen(csv_path, "a") : NULL;
    const Optimizations o = chapter_optimizations(11);
    char err[ERR_LEN];
    for (int n = 1; n <= SEQS; n *= 2) {
        GPT2Gpu gpu;
        const RunPlan plan_gpu = run_plan_for_model(&o, cfg.padded_vocab_size);
        gpt2_gpu_init(&gpu, &gt_ctx, &cfg, cpu.params, SEQS, T, &plan_gpu);
        const int each = SEQS / n;
        for (int k = 0; k < n; k++) {
            const size_t at = (size_t)k * each * T;
            cr_assert(gpt2_gpu_forward_tokens(&gpu, x + at, y + at, each, T, GPT2_TRAIN, err) == 0,
                      "%s", err);
            if (k == 0) gpt2_gpu_backward(&gpu);
            else gpt2_gpu_backward_add(&gpu);
        }
        const size_t np = gpu.num_params;
        float *g = xmalloc(np * sizeof(float));
        gpt2_gpu_download_floatx(&gpu, gpu.grads, g, np);
        double diff = 0, ref = 0;
        for (size_t i = 0; i < np; i++) {
            g[i] /= (float)n;  // the mean of the micro-batches' mean gradients
            diff += ((double)g[i] - cpu.grads[i]) * ((double)g[i] - cpu.grads[i]);
            ref += (double)cpu.grads[i] * cpu.grads[i];
        }
        const double rel = sqrt(diff / ref);
        fprintf(stderr, "gradient accumulation: %d micro-batch(es) of %d: relative error %.3e\n",
                n, each, rel);
        if (csv) fprintf(csv, "micro-%d,%d,%d,%.6e\n", n, n, each, rel);
        char vs[64];
        snprintf(vs, sizeof vs, "%d micro-batches (sum / %d) vs the CPU", n, n);
        assert_gradients_agree(g, gpu.param_sizes, cpu.grads, cpu.param_sizes, vs);
        free(g);
        gpt2_gpu_free(&gpu);
    }
    if (csv) fclose(csv);
    gpt2_cpu_free(&cpu);
}

// Chapter 05's flash slot runs wgmma (v3) on a Hopper GPU at heads of 64,
// and mma.sync (v2) on every other GPU, or under GPT2_PORTABLE_KERNELS=1
// (gpu_context.h); chapter 12's runs v4 where chapter 05's runs v3. On a
// Hopper both run, and a model with heads of 64 gets the same gradients
// from either, within the bf16 chapter tolerances.
static void check_portable_matches_hopper(int chapter) {
    GPT2Config cfg = tiny(1, 1);
    cfg.channels = 128, cfg.num_heads = 2;  // heads of 64
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models_of(&cfg, &cpu, &gpu, chapter);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg.vocab_size, 12);
    const size_t n = gpu.num_params;
    float *hopper = xmalloc(n * sizeof(float)), *portable = xmalloc(n * sizeof(float));
    const float loss_hopper = gpu_forward_backward(&gpu, x, y);
    gpt2_gpu_download_floatx(&gpu, gpu.grads, hopper, n);
    gt_ctx.hopper = 0;
    const float loss_portable = gpu_forward_backward(&gpu, x, y);
    gpt2_gpu_download_floatx(&gpu, gpu.grads, portable, n);
    char what[80];
    snprintf(what, sizeof what, "loss, portable vs Hopper kernels, chapter %02d", chapter);
    gt_compare(what, &loss_portable, &loss_hopper, 1, TOL_GPU_LOSS_BF16);
    snprintf(what, sizeof what, "portable vs Hopper kernels, chapter %02d", chapter);
    assert_gradients_agree(portable, gpu.param_sizes, hopper, gpu.param_sizes, what);
    free(hopper), free(portable);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

Test(model, portable_kernels_match_hopper_kernels) {
    if (!gt_ctx.hopper) cr_skip_test("the Hopper kernels need a GPU of compute capability 9.0");
    check_portable_matches_hopper(11);
    gt_ctx.hopper = 1;  // the check above turned it off for its second pass
    check_portable_matches_hopper(12);
}

// ---- chapter 12: attention at Hopper's pace ---------------------------------------
// The tiny model with heads of 64 (2 of them), where chapter 12 runs v4 on
// a Hopper: against chapter 11's model (v3), by chapter 05's checks: logits,
// loss, every gradient by direction and size, five AdamW steps.
Test(model, fast_attention_matches_chapter_11_gpt2_heads) {
    if (!gt_ctx.hopper)
        cr_skip_test("v4 runs on a Hopper only; elsewhere chapter 12 runs chapter 11's kernels "
                     "(fast_attention_is_chapter_11_where_v4_does_not_run)");
    GPT2Config cfg = tiny(1, 1);
    cfg.channels = 128, cfg.num_heads = 2;
    check_chapter_matches_previous(12, &cfg);
}

// v4's backward adds dQ's parts in a fixed order: the same batch twice, the
// same gradients, at heads of 64 (bf16_is_deterministic runs every chapter
// at the tiny model's heads of 16, where v4 does not run).
Test(model, fast_attention_is_deterministic_gpt2_heads) {
    GPT2Config cfg = tiny(1, 1);
    cfg.channels = 128, cfg.num_heads = 2;
    check_deterministic_of(12, &cfg);
}

// Where v4 does not run (heads of 16; heads of 64 on a GPU other than a
// Hopper, or under GPT2_PORTABLE_KERNELS=1), chapter 12's slots call chapter
// 05's: chapter 12 computes chapter 11's bits.
static void check_same_bits_as_chapter_11(const GPT2Config *cfg, const char *where) {
    GPT2Cpu cpu;
    GPT2Gpu eleven, twelve;
    make_models_of(cfg, &cpu, &eleven, 11);
    Optimizations o = chapter_optimizations(12);
    const RunPlan plan = run_plan_for_model(&o, cfg->padded_vocab_size);
    gpt2_gpu_init(&twelve, &gt_ctx, cfg, cpu.params, B, T, &plan);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg->vocab_size, 14);
    const size_t n = eleven.num_params;
    float *g11 = xmalloc(n * sizeof(float)), *g12 = xmalloc(n * sizeof(float));
    float l11 = gpu_forward_backward(&eleven, x, y), l12 = gpu_forward_backward(&twelve, x, y);
    gpt2_gpu_download_floatx(&eleven, eleven.grads, g11, n);
    gpt2_gpu_download_floatx(&twelve, twelve.grads, g12, n);
    char what[96];
    snprintf(what, sizeof what, "loss, chapter 12 vs 11 (%s)", where);
    gt_assert_identical(what, &l12, &l11, 1);
    snprintf(what, sizeof what, "gradients, chapter 12 vs 11 (%s)", where);
    gt_assert_identical(what, g12, g11, n);
    free(g11), free(g12);
    gpt2_gpu_free(&eleven);
    gpt2_gpu_free(&twelve);
    gpt2_cpu_free(&cpu);
}

Test(model, fast_attention_is_chapter_11_where_v4_does_not_run) {
    GPT2Config cfg = tiny(1, 1);
    check_same_bits_as_chapter_11(&cfg, "heads of 16");
    cfg.channels = 128, cfg.num_heads = 2;
    gt_ctx.hopper = 0;  // as GPT2_PORTABLE_KERNELS=1 does, and every other GPU
    check_same_bits_as_chapter_11(&cfg, "heads of 64, the portable kernels");
}

// ---- chapter 13: FP8 GEMMs ----------------------------------------------------------
// The tiny model with heads of 64, against chapter 12's, within FP8's
// tolerances (tolerances.h: why they are what they are). Its first step runs
// current scaling, the four after it delayed scales from the first's amaxes.
static const ChapterTolerances FP8_TOLERANCES = {TOL_GPU_LOSS_FP8, TOL_GPU_GRAD_COSINE_FP8,
                                                 TOL_GRAD_NORM_RATIO_FP8,
                                                 TOL_GPU_ADAMW_STEPS_COSINE_FP8};

Test(model, fp8_matches_chapter_12) {
    if (!gt_ctx.fp8) cr_skip_test("FP8 GEMMs need a GPU of compute capability 8.9 or later");
    GPT2Config cfg = tiny(1, 1);
    cfg.channels = 128, cfg.num_heads = 2;
    check_chapter_matches_previous_within(13, &cfg, &FP8_TOLERANCES);
}

// The casts' amaxes are integer maxima and the bias gradients' sums have a
// fixed order: the same batch twice, the same bits (current scaling, the
// first step's); then two models, three steps each from the same weights,
// the same weights (the later steps' delayed scales).
Test(model, fp8_is_deterministic) {
    GPT2Config cfg = tiny(1, 1);
    cfg.channels = 128, cfg.num_heads = 2;
    check_deterministic_of(13, &cfg);
    GPT2Cpu cpu;
    GPT2Gpu m[2];
    make_models_of(&cfg, &cpu, &m[0], 13);
    make_models_of(&cfg, &cpu, &m[1], 13);
    AdamWConfig adamw = adamw_default_config();
    const size_t n = m[0].num_params;
    float *w[2] = {xmalloc(n * sizeof(float)), xmalloc(n * sizeof(float))};
    for (int i = 0; i < 2; i++) {
        set_constant_schedule(&m[i], &adamw, 3);
        for (int step = 1; step <= 3; step++) {
            int32_t x[B * T], y[B * T];
            random_batch(x, y, cfg.vocab_size, 200 + step);
            gpu_forward_backward(&m[i], x, y);
            update_at(&m[i], &adamw, step);
        }
        gpt2_gpu_get_params(&m[i], w[i]);
        gpt2_gpu_free(&m[i]);
    }
    gt_assert_identical("weights after 3 FP8 steps, two runs", w[1], w[0], n);
    free(w[0]), free(w[1]);
    gpt2_cpu_free(&cpu);
}

// Where FP8 GEMMs do not run (GPT2_PORTABLE_KERNELS=1, or a GPU before
// compute capability 8.9), chapter 13 is chapter 12, bit for bit.
Test(model, fp8_is_chapter_12_where_fp8_does_not_run) {
    GPT2Config cfg = tiny(1, 1);
    cfg.channels = 128, cfg.num_heads = 2;
    gt_ctx.fp8 = 0;
    GPT2Cpu cpu;
    GPT2Gpu twelve, thirteen;
    make_models_of(&cfg, &cpu, &twelve, 12);
    make_models_of(&cfg, &cpu, &thirteen, 13);
    cr_assert(!thirteen.fp8_on, "chapter 13 made FP8 buffers on a context without FP8");
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg.vocab_size, 15);
    const size_t n = twelve.num_params;
    float *g12 = xmalloc(n * sizeof(float)), *g13 = xmalloc(n * sizeof(float));
    float l12 = gpu_forward_backward(&twelve, x, y), l13 = gpu_forward_backward(&thirteen, x, y);
    gpt2_gpu_download_floatx(&twelve, twelve.grads, g12, n);
    gpt2_gpu_download_floatx(&thirteen, thirteen.grads, g13, n);
    gt_assert_identical("loss, chapter 13 vs 12 without FP8", &l13, &l12, 1);
    gt_assert_identical("gradients, chapter 13 vs 12 without FP8", g13, g12, n);
    free(g12), free(g13);
    gpt2_gpu_free(&twelve);
    gpt2_gpu_free(&thirteen);
    gpt2_cpu_free(&cpu);
}
#endif

Test(model, rejects_out_of_range_tokens) {
    GPT2Config cfg = tiny(0, 0);
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models(&cfg, &cpu, &gpu);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg.vocab_size, 5);
    y[17] = cfg.vocab_size;
    char err[ERR_LEN];
    cr_assert(gpt2_gpu_forward_tokens(&gpu, x, y, B, T, GPT2_TRAIN, err) == -1);
    cr_assert(strstr(err, "token 17"), "%s", err);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

// The forward modes compute the same thing as far as each goes: the logits
// of GPT2_LOGITS and the loss of GPT2_LOSS are GPT2_TRAIN's, bit for bit.
static void check_forward_modes(int chapter) {
    GPT2Config cfg = tiny(0, 1);
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models_of(&cfg, &cpu, &gpu, chapter);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg.vocab_size, 9);
    const size_t BT = (size_t)B * T, nlogits = BT * cfg.padded_vocab_size;
    float *logits_only = xmalloc(nlogits * sizeof(float)), *logits = xmalloc(nlogits * sizeof(float));
    char err[ERR_LEN];
    cr_assert(gpt2_gpu_forward_tokens(&gpu, x, NULL, B, T, GPT2_LOGITS, err) == 0, "%s", err);
    gpt2_gpu_download_logits(&gpu, 0, BT, cfg.padded_vocab_size, logits_only);
    cr_assert(gpt2_gpu_forward_tokens(&gpu, x, y, B, T, GPT2_LOSS, err) == 0, "%s", err);
    float loss_only = gpt2_gpu_read_loss(&gpu);
    gpt2_gpu_download_logits(&gpu, 0, BT, cfg.padded_vocab_size, logits);
    gt_assert_identical("logits: GPT2_LOGITS vs GPT2_LOSS", logits_only, logits, nlogits);
    cr_assert(gpt2_gpu_forward_tokens(&gpu, x, y, B, T, GPT2_TRAIN, err) == 0, "%s", err);
    float loss = gpt2_gpu_read_loss(&gpu);
    gt_assert_identical("loss: GPT2_LOSS vs GPT2_TRAIN", &loss_only, &loss, 1);
    free(logits_only);
    free(logits);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

Test(model, forward_modes_agree) {
    check_forward_modes(first_chapter());
#ifdef PRECISION_BF16
    check_forward_modes(4);  // the fused classifier: no probs, dlogits in place
    check_forward_modes(5);  // flash attention
#endif
}
