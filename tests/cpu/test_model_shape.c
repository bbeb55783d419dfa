// test_model_shape.c: chapters 06's and 07's exercises (common/model/model_shape.h):
// a model moved between paddings of its vocabulary, and a tied model as an
// untied one, each checked by what matters: the CPU reference computes the
// same logits and loss from the moved weights, bit for bit; and the tied
// model's gradient is the sum of the untied one's two.
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "model/gpt2_cpu.h"
#include "model/model_shape.h"
#include "util/util.h"

enum { B = 2, T = 16 };

static GPT2Config tiny(int padded_rows, int tied) {
    GPT2Config c = {.max_seq_len = 16, .vocab_size = 250, .padded_vocab_size = padded_rows,
                    .num_layers = 2, .num_heads = 4, .channels = 32, .tied = tied};
    return c;
}

// A CPU model of shape cfg with the given weights, run forward (and
// backward) on one batch of seed 7.
static void run(GPT2Cpu *m, const GPT2Config *cfg, const float *params, int backward) {
    gpt2_cpu_init(m, cfg);
    memcpy(m->params, params, m->num_params * sizeof(float));
    Rng rng;
    rng_seed(&rng, 7);
    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++)
        x[i] = (int32_t)rng_below(&rng, cfg->vocab_size), y[i] = (int32_t)rng_below(&rng, 250);
    gpt2_cpu_forward(m, x, y, B, T);
    if (backward) {
        gpt2_cpu_zero_grad(m);
        gpt2_cpu_backward(m);
    }
}

// The first V logits of every row, the same bits in both models.
static void assert_same_logits(const GPT2Cpu *a, const GPT2Cpu *b) {
    const int V = a->config.vocab_size;
    for (int r = 0; r < B * T; r++)
        for (int j = 0; j < V; j++) {
            float x = a->acts.logits[(size_t)r * a->config.padded_vocab_size + j];
            float y = b->acts.logits[(size_t)r * b->config.padded_vocab_size + j];
            cr_assert(memcmp(&x, &y, sizeof x) == 0, "logit [%d][%d]: %.9g vs %.9g", r, j,
                      (double)x, (double)y);
        }
    cr_assert(memcmp(&a->mean_loss, &b->mean_loss, sizeof a->mean_loss) == 0,
              "loss %.9g vs %.9g", (double)a->mean_loss, (double)b->mean_loss);
}

static float *random_params(const GPT2Config *cfg, uint64_t seed) {
    float *p = xmalloc(gpt2_num_params(cfg) * sizeof(float));
    gpt2_init_params(cfg, p, seed);
    return p;
}

// ---- chapter 06: padding -----------------------------------------------------------

static void check_padding(int tied) {
    GPT2Config c250 = tiny(250, tied), c256 = tiny(256, tied);
    float *p250 = random_params(&c250, 1);
    float *p256 = xmalloc(gpt2_num_params(&c256) * sizeof(float));
    float *back = xmalloc(gpt2_num_params(&c250) * sizeof(float));
    char err[ERR_LEN];
    cr_assert(gpt2_params_repad(&c250, p250, &c256, p256, err) == 0, "%s", err);
    // The padding rows are zeros, the rest the same values.
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(&c256, sizes);
    const float *wte = p256;
    for (int r = 250; r < 256; r++)
        for (int c = 0; c < 32; c++) cr_assert(wte[r * 32 + c] == 0.0f, "wte[%d][%d]", r, c);
    GPT2Cpu a, b;
    run(&a, &c250, p250, 0);
    run(&b, &c256, p256, 0);
    assert_same_logits(&a, &b);
    // And back: the same parameters, bit for bit.
    cr_assert(gpt2_params_repad(&c256, p256, &c250, back, err) == 0, "%s", err);
    cr_assert(memcmp(back, p250, gpt2_num_params(&c250) * sizeof(float)) == 0,
              "250 -> 256 -> 250 rows is not the identity");
    gpt2_cpu_free(&a);
    gpt2_cpu_free(&b);
    free(p250), free(p256), free(back);
}

Test(repad, pads_with_zero_rows_and_keeps_the_logits) { check_padding(0); }

Test(repad, pads_a_tied_model) { check_padding(1); }

// A row past the vocabulary that is not zero is part of the model (its
// logits would be read if the vocabulary grew): dropping it is refused.
Test(repad, refuses_to_drop_a_row_that_is_not_zero) {
    GPT2Config c256 = tiny(256, 0), c250 = tiny(250, 0);
    float *p256 = random_params(&c256, 2);
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(&c256, sizes);
    float *lm_head = p256 + gpt2_num_params(&c256) - sizes[PARAM_LM_HEAD];
    lm_head[253 * 32 + 5] = 0.5f;
    float *dst = xmalloc(gpt2_num_params(&c250) * sizeof(float));
    char err[ERR_LEN] = "";
    cr_assert(gpt2_params_repad(&c256, p256, &c250, dst, err) == -1);
    cr_assert(strstr(err, "lm_head row 253"), "the message names the tensor and row: %s", err);
    free(p256), free(dst);
}

// ---- chapter 07: tying -------------------------------------------------------------

// The untied copy computes the tied model's logits; the tied gradient is the
// sum of the untied one's wte and lm_head gradients. The tied model adds its
// two uses into one buffer in another order than the sum below (the
// lm_head's share first, then the embedding's one position at a time), so
// the gradients agree to float rounding, 1e-6 of their scale.
Test(untie, same_logits_and_the_tied_gradient_is_the_sum) {
    GPT2Config tied = tiny(256, 1), untied = tiny(256, 0);
    float *pt = random_params(&tied, 3);
    float *pu = xmalloc(gpt2_num_params(&untied) * sizeof(float));
    gpt2_params_untie(&tied, pt, pu);
    size_t n = gpt2_num_params(&tied), wte = (size_t)256 * 32;
    cr_assert(memcmp(pu, pt, n * sizeof(float)) == 0, "the 16 shared tensors are copied");
    cr_assert(memcmp(pu + n, pt, wte * sizeof(float)) == 0, "lm_head is a copy of wte");
    GPT2Cpu a, b;
    run(&a, &tied, pt, 1);
    run(&b, &untied, pu, 1);
    assert_same_logits(&a, &b);
    float *summed = xmalloc(n * sizeof(float));
    gpt2_grads_tie(&tied, b.grads, summed);
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(a.grads[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)summed[i] - a.grads[i]));
    cr_assert(worst <= 1e-6 * scale, "tied gradient vs the untied sum: %.3g of scale %.3g",
              worst, scale);
    // Without lm_head's share, wte's gradient is far from the tied one: the
    // sum is needed, not just the embedding's part.
    double without = 0;
    for (size_t i = 0; i < wte; i++) without = fmax(without, fabs((double)b.grads[i] - a.grads[i]));
    cr_assert(without > 100 * worst, "lm_head's share is visible in the tied gradient");
    gpt2_cpu_free(&a);
    gpt2_cpu_free(&b);
    free(pt), free(pu), free(summed);
}
