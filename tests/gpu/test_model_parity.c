// test_model_parity.c: the whole GPU model against the CPU reference, on a
// tiny model: every logit, the loss, every gradient tensor, and the
// parameters after 5 AdamW steps (tolerances.h says why each tolerance).
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "gpt2_cpu.h"
#include "gpt2_gpu.h"
#include "gpu_test.h"
#include "optimizer.h"
#include "tolerances.h"

TestSuite(model, .init = gpu_test_init, .fini = gpu_test_fini);

enum { B = 4, T = 32, STEPS = 5 };

static GPT2Config tiny(int tied, int padded) {
    GPT2Config c = {.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = padded ? 256 : 250,
                    .num_layers = 2, .num_heads = 4, .channels = 64, .tied = tied};
    return c;
}

// A CPU model and a GPU model with the same weights: GPT-2's init at 3x
// scale, so that the non-linear paths matter (as in test_cpu_model.c).
static void make_models(const GPT2Config *cfg, GPT2Cpu *cpu, GPT2Gpu *gpu) {
    gpt2_cpu_init(cpu, cfg);
    gpt2_cpu_init_random(cpu, 7);
    for (size_t i = 0; i < cpu->num_params; i++) cpu->params[i] *= 3;
    gpt2_gpu_init(gpu, &gt_ctx, cfg, cpu->params, B, T);
}

static void random_batch(int32_t *x, int32_t *y, int V, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < B * T; i++) x[i] = (int32_t)rng_below(&rng, V), y[i] = (int32_t)rng_below(&rng, V);
}

static void compare_forward_backward(const GPT2Config *cfg, double tol) {
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models(cfg, &cpu, &gpu);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg->vocab_size, 3);
    char err[ERR_LEN];
    gpt2_cpu_forward(&cpu, x, y, B, T);
    gpt2_cpu_zero_grad(&cpu);
    gpt2_cpu_backward(&cpu);
    cr_assert(gpt2_gpu_forward(&gpu, x, y, B, T, err) == 0, "%s", err);
    float loss = gpt2_gpu_read_loss(&gpu);
    gpt2_gpu_backward(&gpu);

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

typedef struct {
    int tied, padded;
} Variant;

ParameterizedTestParameters(model, fp32_forward_backward_match_cpu) {
    static Variant v[] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
    return cr_make_param_array(Variant, v, 4);
}

ParameterizedTest(Variant *v, model, fp32_forward_backward_match_cpu, .init = gpu_test_init,
                  .fini = gpu_test_fini) {
    GPT2Config cfg = tiny(v->tied, v->padded);
    compare_forward_backward(&cfg, TOL_GPU_MODEL_FP32);
}

// Chapter 01: the same model with the GEMMs in TF32.
Test(model, tf32_forward_backward_match_cpu) {
    gt_ctx.tensor_cores = 1;
    GPT2Config cfg = tiny(0, 0);
    compare_forward_backward(&cfg, TOL_GPU_MODEL_TF32);
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
    char err[ERR_LEN];
    for (int step = 1; step <= STEPS; step++) {
        int32_t x[B * T], y[B * T];
        random_batch(x, y, cfg.vocab_size, 100 + step);
        float lr = 1e-3f;
        gpt2_cpu_forward(&cpu, x, y, B, T);
        gpt2_cpu_zero_grad(&cpu);
        gpt2_cpu_backward(&cpu);
        // max_norm 1.0 with 3x-scale weights: clipping is active in this test
        cpu_update(&cpu, mom1, mom2, lr, &adamw, 1.0f, step);
        cr_assert(gpt2_gpu_forward(&gpu, x, y, B, T, err) == 0, "%s", err);
        float loss = gpt2_gpu_read_loss(&gpu);
        gpt2_gpu_backward(&gpu);
        gpt2_gpu_update(&gpu, lr, &adamw, 1.0f, step);
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
    char err[ERR_LEN];
    float *first = NULL;
    for (int run = 0; run < 2; run++) {
        cr_assert(gpt2_gpu_forward(&gpu, x, y, B, T, err) == 0, "%s", err);
        gpt2_gpu_backward(&gpu);
        float *grads = gt_download(gpu.grads, gpu.num_params);
        if (run == 1) gt_assert_identical("gradients of two runs", grads, first, gpu.num_params);
        first = grads;
    }
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}

Test(model, rejects_out_of_range_tokens) {
    GPT2Config cfg = tiny(0, 0);
    GPT2Cpu cpu;
    GPT2Gpu gpu;
    make_models(&cfg, &cpu, &gpu);
    int32_t x[B * T], y[B * T];
    random_batch(x, y, cfg.vocab_size, 5);
    y[17] = cfg.vocab_size;
    char err[ERR_LEN];
    cr_assert(gpt2_gpu_forward(&gpu, x, y, B, T, err) == -1);
    cr_assert(strstr(err, "token 17"), "%s", err);
    gpt2_gpu_free(&gpu);
    gpt2_cpu_free(&cpu);
}
