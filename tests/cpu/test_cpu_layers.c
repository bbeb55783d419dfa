// test_cpu_layers.c: every layer's backward, checked against finite
// differences of its forward, in double precision.
//
// Each test turns a layer into a scalar function S = sum(out * probe) with a
// fixed random probe, so that dS/dout = probe: running the layer's backward
// with dout = probe must give dS/d(every input), which fd_check compares with
// central differences, element by element.
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fd_check.h"
#include "model/gpt2_cpu.h"

enum { B = 2, T = 5, C = 8, NH = 2, OC = 6, V = 11, VP = 16 };

static double *rand_buf(size_t n, double lo, double hi, Rng *rng) {
    double *x = xmalloc(n * sizeof(double));
    fill_uniform(x, n, lo, hi, rng);
    return x;
}

static double *zeros(size_t n) { return xcalloc(n, sizeof(double)); }

// ---- encoder ----
typedef struct {
    double *out, *wte, *wpe, *probe;
    int32_t tokens[B * T];
} EncoderCtx;

static double encoder_eval(void *p) {
    EncoderCtx *c = p;
    cpu_encoder_forward_f64(c->out, c->tokens, c->wte, c->wpe, B, T, C);
    return dot(c->out, c->probe, B * T * C);
}

Test(cpu_layers, encoder_backward_matches_finite_differences) {
    Rng rng;
    rng_seed(&rng, 1);
    EncoderCtx c = {.out = zeros(B * T * C), .wte = rand_buf(V * C, -1, 1, &rng),
                    .wpe = rand_buf(T * C, -1, 1, &rng), .probe = rand_buf(B * T * C, -1, 1, &rng)};
    for (int i = 0; i < B * T; i++) c.tokens[i] = (int32_t)rng_below(&rng, V);
    c.tokens[1] = c.tokens[0];  // a repeated token must accumulate its gradient
    double *dwte = zeros(V * C), *dwpe = zeros(T * C);
    cpu_encoder_backward_f64(dwte, dwpe, c.probe, c.tokens, B, T, C);
    fd_check("dwte", encoder_eval, &c, c.wte, dwte, V * C);
    fd_check("dwpe", encoder_eval, &c, c.wpe, dwpe, T * C);
}

// ---- layernorm ----
typedef struct {
    double *out, *mean, *rstd, *inp, *w, *b, *probe;
} LayernormCtx;

static double layernorm_eval(void *p) {
    LayernormCtx *c = p;
    cpu_layernorm_forward_f64(c->out, c->mean, c->rstd, c->inp, c->w, c->b, B, T, C);
    return dot(c->out, c->probe, B * T * C);
}

Test(cpu_layers, layernorm_backward_matches_finite_differences) {
    Rng rng;
    rng_seed(&rng, 2);
    LayernormCtx c = {.out = zeros(B * T * C), .mean = zeros(B * T), .rstd = zeros(B * T),
                      .inp = rand_buf(B * T * C, -2, 3, &rng), .w = rand_buf(C, 0.5, 1.5, &rng),
                      .b = rand_buf(C, -1, 1, &rng), .probe = rand_buf(B * T * C, -1, 1, &rng)};
    layernorm_eval(&c);
    double *dinp = zeros(B * T * C), *dw = zeros(C), *db = zeros(C);
    cpu_layernorm_backward_f64(dinp, dw, db, c.probe, c.inp, c.w, c.mean, c.rstd, B, T, C);
    fd_check("dinp", layernorm_eval, &c, c.inp, dinp, B * T * C);
    fd_check("dweight", layernorm_eval, &c, c.w, dw, C);
    fd_check("dbias", layernorm_eval, &c, c.b, db, C);
}

Test(cpu_layers, layernorm_forward_normalizes) {
    Rng rng;
    rng_seed(&rng, 3);
    double *inp = rand_buf(B * T * C, 100, 101, &rng);  // large mean, small spread
    double w[C], b[C], out[B * T * C], mean[B * T], rstd[B * T];
    for (int i = 0; i < C; i++) w[i] = 1, b[i] = 0;
    cpu_layernorm_forward_f64(out, mean, rstd, inp, w, b, B, T, C);
    for (int bt = 0; bt < B * T; bt++) {
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += out[bt * C + i] / C;
        for (int i = 0; i < C; i++) v += (out[bt * C + i] - m) * (out[bt * C + i] - m) / C;
        cr_assert(fabs(m) < 1e-9, "row %d mean %g", bt, m);
        // var/(var+eps) with eps = 1e-5: slightly below 1
        cr_assert(v > 0.99 && v < 1.0, "row %d variance %g", bt, v);
    }
    free(inp);
}

// ---- matmul ----
typedef struct {
    double *out, *inp, *w, *b, *probe;
} MatmulCtx;

static double matmul_eval(void *p) {
    MatmulCtx *c = p;
    cpu_matmul_forward_f64(c->out, c->inp, c->w, c->b, B, T, C, OC);
    return dot(c->out, c->probe, B * T * OC);
}

Test(cpu_layers, matmul_backward_matches_finite_differences) {
    Rng rng;
    rng_seed(&rng, 4);
    MatmulCtx c = {.out = zeros(B * T * OC), .inp = rand_buf(B * T * C, -1, 1, &rng),
                   .w = rand_buf(OC * C, -1, 1, &rng), .b = rand_buf(OC, -1, 1, &rng),
                   .probe = rand_buf(B * T * OC, -1, 1, &rng)};
    double *dinp = zeros(B * T * C), *dw = zeros(OC * C), *db = zeros(OC);
    cpu_matmul_backward_f64(dinp, dw, db, c.probe, c.inp, c.w, B, T, C, OC);
    fd_check("dinp", matmul_eval, &c, c.inp, dinp, B * T * C);
    fd_check("dweight", matmul_eval, &c, c.w, dw, OC * C);
    fd_check("dbias", matmul_eval, &c, c.b, db, OC);
}

Test(cpu_layers, matmul_forward_matches_a_hand_computed_product) {
    // (1x2) @ (3x2)^T + bias, B = T = 1
    double inp[2] = {1, 2}, w[6] = {1, 0, 0, 1, 1, 1}, b[3] = {0.5, 0, -1}, out[3];
    cpu_matmul_forward_f64(out, inp, w, b, 1, 1, 2, 3);
    cr_assert(out[0] == 1.5 && out[1] == 2 && out[2] == 2, "got %g %g %g", out[0], out[1], out[2]);
}

// ---- attention ----
typedef struct {
    double *out, *preatt, *att, *qkv, *probe;
} AttentionCtx;

static double attention_eval(void *p) {
    AttentionCtx *c = p;
    cpu_attention_forward_f64(c->out, c->preatt, c->att, c->qkv, B, T, C, NH);
    return dot(c->out, c->probe, B * T * C);
}

Test(cpu_layers, attention_backward_matches_finite_differences) {
    Rng rng;
    rng_seed(&rng, 5);
    AttentionCtx c = {.out = zeros(B * T * C), .preatt = zeros(B * NH * T * T),
                      .att = zeros(B * NH * T * T), .qkv = rand_buf(B * T * 3 * C, -1, 1, &rng),
                      .probe = rand_buf(B * T * C, -1, 1, &rng)};
    attention_eval(&c);
    double *dqkv = zeros(B * T * 3 * C), *dpre = zeros(B * NH * T * T), *datt = zeros(B * NH * T * T);
    cpu_attention_backward_f64(dqkv, dpre, datt, c.probe, c.qkv, c.att, B, T, C, NH);
    fd_check("dqkv", attention_eval, &c, c.qkv, dqkv, B * T * 3 * C);
}

Test(cpu_layers, attention_is_causal) {
    // Changing a later position must not change any earlier output.
    Rng rng;
    rng_seed(&rng, 6);
    double *qkv = rand_buf(B * T * 3 * C, -1, 1, &rng);
    double out1[B * T * C], out2[B * T * C], pre[B * NH * T * T], att[B * NH * T * T];
    cpu_attention_forward_f64(out1, pre, att, qkv, B, T, C, NH);
    for (int i = 0; i < 3 * C; i++) qkv[(T - 1) * 3 * C + i] += 1;  // batch 0, last position
    cpu_attention_forward_f64(out2, pre, att, qkv, B, T, C, NH);
    cr_assert(memcmp(out1, out2, (T - 1) * C * sizeof(double)) == 0);
    free(qkv);
}

// ---- GELU ----
typedef struct {
    double *out, *inp, *probe;
} PointwiseCtx;

static double gelu_eval(void *p) {
    PointwiseCtx *c = p;
    cpu_gelu_forward_f64(c->out, c->inp, B * T * C);
    return dot(c->out, c->probe, B * T * C);
}

Test(cpu_layers, gelu_backward_matches_finite_differences) {
    Rng rng;
    rng_seed(&rng, 7);
    PointwiseCtx c = {.out = zeros(B * T * C), .inp = rand_buf(B * T * C, -4, 4, &rng),
                      .probe = rand_buf(B * T * C, -1, 1, &rng)};
    double *dinp = zeros(B * T * C);
    cpu_gelu_backward_f64(dinp, c.inp, c.probe, B * T * C);
    fd_check("dinp", gelu_eval, &c, c.inp, dinp, B * T * C);
}

Test(cpu_layers, gelu_forward_known_values) {
    double x[3] = {0, 1, -1}, y[3];
    cpu_gelu_forward_f64(y, x, 3);
    // 0.5 (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.841191990...
    cr_assert(y[0] == 0);
    cr_assert(fabs(y[1] - 0.8411919906) < 1e-9, "gelu(1) = %.12f", y[1]);
    cr_assert(fabs(y[2] + 0.1588080094) < 1e-9, "gelu(-1) = %.12f", y[2]);
}

// ---- residual ----
typedef struct {
    double *out, *a, *b, *probe;
} ResidualCtx;

static double residual_eval(void *p) {
    ResidualCtx *c = p;
    cpu_residual_forward_f64(c->out, c->a, c->b, B * T * C);
    return dot(c->out, c->probe, B * T * C);
}

Test(cpu_layers, residual_backward_matches_finite_differences) {
    Rng rng;
    rng_seed(&rng, 8);
    ResidualCtx c = {.out = zeros(B * T * C), .a = rand_buf(B * T * C, -1, 1, &rng),
                     .b = rand_buf(B * T * C, -1, 1, &rng), .probe = rand_buf(B * T * C, -1, 1, &rng)};
    double *da = zeros(B * T * C), *db = zeros(B * T * C);
    cpu_residual_backward_f64(da, db, c.probe, B * T * C);
    fd_check("da", residual_eval, &c, c.a, da, B * T * C);
    fd_check("db", residual_eval, &c, c.b, db, B * T * C);
}

// ---- softmax + cross-entropy (with a padded vocabulary) ----
typedef struct {
    double *logits, *probs, *losses, *probe;
    int32_t targets[B * T];
} LossCtx;

static double loss_eval(void *p) {
    LossCtx *c = p;
    cpu_softmax_forward_f64(c->probs, c->logits, B, T, V, VP);
    cpu_crossentropy_forward_f64(c->losses, c->probs, c->targets, B, T, VP);
    return dot(c->losses, c->probe, B * T);
}

Test(cpu_layers, crossentropy_softmax_backward_matches_finite_differences) {
    Rng rng;
    rng_seed(&rng, 9);
    LossCtx c = {.logits = rand_buf(B * T * VP, -3, 3, &rng), .probs = zeros(B * T * VP),
                 .losses = zeros(B * T), .probe = rand_buf(B * T, 0, 1, &rng)};
    for (int i = 0; i < B * T; i++) c.targets[i] = (int32_t)rng_below(&rng, V);
    loss_eval(&c);
    double *dlogits = zeros(B * T * VP);
    cpu_crossentropy_softmax_backward_f64(dlogits, c.probe, c.probs, c.targets, B, T, V, VP);
    // The padded logits [V, VP) do not enter the loss: finite differences give
    // exactly 0 there, and so must the backward.
    fd_check("dlogits", loss_eval, &c, c.logits, dlogits, B * T * VP);
    for (int bt = 0; bt < B * T; bt++) {
        double sum = 0;
        for (int i = 0; i < V; i++) sum += c.probs[bt * VP + i];
        cr_assert(fabs(sum - 1) < 1e-12, "probabilities of row %d sum to %.15f", bt, sum);
        for (int i = V; i < VP; i++) cr_assert(c.probs[bt * VP + i] == 0);
    }
}
