// fp8_layers.c: see fp8_layers.h.
#include "gpu/fp8_layers.h"

#include <stdlib.h>
#include <string.h>

#include "layernorm_fp8.h"
#include "util/util.h"

// The forward's products, whose sums run over a layer's input width (C or
// 4C), skip cuBLASLt's promotions of the tensor cores' partial sums
// (gemm_operands.h: fast_accum), as Transformer Engine's forward does. The
// backward's keep them: dweight's K is B*T, and dinp measured no faster
// without them (the kernel lab's "fast accumulation" rows). Building with
// -DFP8_FAST_ACCUM=0 turns it off, to measure what it buys in the step.
#ifndef FP8_FAST_ACCUM
#define FP8_FAST_ACCUM 1
#endif

static const int PARAM_OF[LINEARS] = {PARAM_QKVW, PARAM_ATTPROJW, PARAM_FCW, PARAM_FCPROJW};

void fp8_linear_shape(Linear k, int C, int *IC, int *OC) {
    static const int ic[LINEARS] = {1, 1, 1, 4}, oc[LINEARS] = {3, 1, 4, 1};
    *IC = ic[k] * C, *OC = oc[k] * C;
}

static size_t weight_bytes(Linear k, int C) {
    int IC, OC;
    fp8_linear_shape(k, C, &IC, &OC);
    return (size_t)IC * OC;
}

// The largest cast: (max_BT, 4C), fc's output.
static size_t partials_floats(int max_BT, int C) {
    size_t most = 0;
    for (int k = 0; k < LINEARS; k++) {
        int IC, OC;
        fp8_linear_shape((Linear)k, C, &IC, &OC);
        const size_t n = fp8_cast_partials_floats(max_BT, OC);
        if (n > most) most = n;
    }
    return most;
}

static int metas_of(const GPT2Config *cfg) { return cfg->num_layers * LINEARS * FP8_ROLES; }

// Chapter 14: the --recompute level from which the backward pass casts
// linear layer k's input again, as it recomputes the bf16 tensor the input
// is cast from (activations.c): the layernorms' outputs (qkv's and fc's)
// from norms on, attention's output (its projection's) with the block,
// GELU's output (fc's projection's) from gelu on.
static const Recompute CAST_AGAIN_FROM[LINEARS] = {RECOMPUTE_NORMS, RECOMPUTE_BLOCK,
                                                   RECOMPUTE_NORMS, RECOMPUTE_GELU};

// The layers of linear layer k's input kept: L, or one, which every layer shares.
static int input_layers(int L, Linear k, Recompute recompute) {
    return recompute >= CAST_AGAIN_FROM[k] ? 1 : L;
}

size_t fp8_layers_bytes(const GPT2Config *cfg, int max_B, int max_T, Recompute recompute) {
    const size_t L = cfg->num_layers, C = cfg->channels, BT = (size_t)max_B * max_T;
    size_t bytes = 0;
    for (int k = 0; k < LINEARS; k++) {
        int IC, OC;
        fp8_linear_shape((Linear)k, (int)C, &IC, &OC);
        const size_t inputs = (size_t)input_layers((int)L, (Linear)k, recompute);
        bytes += 2 * L * weight_bytes((Linear)k, (int)C) + inputs * IC * BT;
    }
    bytes += 3 * BT * 4 * C;
    bytes += partials_floats((int)BT, (int)C) * sizeof(float);
    bytes += (size_t)metas_of(cfg) * (sizeof(Fp8Meta) + 1);
    return bytes;
}

static void *take(Fp8Layers *f, size_t bytes, const char *what) {
    f->bytes += bytes;
    return gpu_malloc(bytes, what);
}

void fp8_layers_alloc(Fp8Layers *f, const GPT2Config *cfg, int max_B, int max_T,
                      Recompute recompute) {
    memset(f, 0, sizeof *f);
    f->L = cfg->num_layers, f->C = cfg->channels, f->max_BT = max_B * max_T;
    const size_t L = f->L, BT = f->max_BT, C = f->C;
    for (int k = 0; k < LINEARS; k++) {
        int IC, OC;
        fp8_linear_shape((Linear)k, f->C, &IC, &OC);
        f->weight_rows[k] = take(f, L * weight_bytes((Linear)k, f->C), "fp8 weights");
        f->weight_cols[k] = take(f, L * weight_bytes((Linear)k, f->C), "fp8 weights, transposed");
        f->input_layers[k] = input_layers(f->L, (Linear)k, recompute);
        f->input_cols[k] = take(f, (size_t)f->input_layers[k] * IC * BT,
                                "fp8 layer inputs, transposed");
    }
    f->input_rows = take(f, BT * 4 * C, "fp8 layer input");
    f->grad_rows = take(f, BT * 4 * C, "fp8 gradient");
    f->grad_cols = take(f, BT * 4 * C, "fp8 gradient, transposed");
    f->col_partials = take(f, partials_floats(f->max_BT, f->C) * sizeof(float),
                           "fp8 bias gradients' partial sums");
    // Every scale 1, every amax and history 0; the formats by role.
    const int n = metas_of(cfg);
    Fp8Meta *metas = xcalloc((size_t)n, sizeof *metas);
    uint8_t *formats = xmalloc((size_t)n);
    for (int i = 0; i < n; i++) {
        metas[i].scale = 1.0f;
        formats[i] = (uint8_t)(i % FP8_ROLES == FP8_GRAD ? GEMM_E5M2 : GEMM_E4M3);
    }
    f->metas = take(f, (size_t)n * sizeof *metas, "fp8 scales and amax histories");
    f->formats = take(f, (size_t)n, "fp8 formats");
    CUDA_CHECK(cudaMemcpy(f->metas, metas, (size_t)n * sizeof *metas, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(f->formats, formats, (size_t)n, cudaMemcpyHostToDevice));
    free(metas), free(formats);
}

void fp8_layers_free(Fp8Layers *f) {
    for (int k = 0; k < LINEARS; k++)
        gpu_free(f->weight_rows[k]), gpu_free(f->weight_cols[k]), gpu_free(f->input_cols[k]);
    void *rest[] = {f->input_rows, f->grad_rows, f->grad_cols, f->col_partials, f->metas,
                    f->formats};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) gpu_free(rest[i]);
    memset(f, 0, sizeof *f);
}

static Fp8Meta *meta_of(const Fp8Layers *f, int l, Linear k, Fp8Role role) {
    return f->metas + ((size_t)l * LINEARS + k) * FP8_ROLES + role;
}

// Layer l's transpose of linear layer k's input (IC, max_BT): its own, or
// the one every layer shares where the backward pass casts it again.
static uint8_t *input_cols_of(const Fp8Layers *f, int l, Linear k) {
    int IC, OC;
    fp8_linear_shape(k, f->C, &IC, &OC);
    const size_t layer = f->input_layers[k] == 1 ? 0 : (size_t)l;
    return f->input_cols[k] + layer * IC * f->max_BT;
}

static GemmOperand operand(GemmPrecision format, const void *rows, const void *cols,
                           const Fp8Meta *meta) {
    GemmOperand o = {format, rows, cols, &meta->scale};
    return o;
}

// Delayed scales once a step has ended (fp8.h); the first step's current.
static Fp8ScaleMode mode_of(const Fp8Layers *f) {
    return f->history_ready ? FP8_DELAYED : FP8_CURRENT;
}

// ANCHOR: cast_weights
void fp8_cast_weights(Fp8Layers *f, const GpuContext *ctx, floatX *const *params_of) {
    for (int k = 0; k < LINEARS; k++) {
        int IC, OC;
        fp8_linear_shape((Linear)k, f->C, &IC, &OC);
        const size_t size = weight_bytes((Linear)k, f->C);
        for (int l = 0; l < f->L; l++) {
            Fp8Cast cast = {.op = FP8_COPY,
                            .in = params_of[PARAM_OF[k]] + l * size,
                            .rows = OC,
                            .cols = IC,
                            .format = GEMM_E4M3,
                            .meta = meta_of(f, l, (Linear)k, FP8_WEIGHT),
                            .out = f->weight_rows[k] + l * size,
                            .out_t = f->weight_cols[k] + l * size};
            fp8_cast(ctx, &cast, mode_of(f));
        }
    }
}
// ANCHOR_END: cast_weights

// ANCHOR: fp8_operands
GemmOperands fp8_forward_operands(Fp8Layers *f, const GpuContext *ctx, int l, Linear k,
                                  const floatX *x, Fp8CastOp op, int BT) {
    int IC, OC;
    fp8_linear_shape(k, f->C, &IC, &OC);
    const size_t w = weight_bytes(k, f->C);
    uint8_t *x_cols = input_cols_of(f, l, k);
    Fp8Meta *x_meta = meta_of(f, l, k, FP8_INPUT);
    Fp8Cast cast = {.op = op, .in = x, .rows = BT, .cols = IC, .format = GEMM_E4M3,
                    .meta = x_meta, .out = f->input_rows, .out_t = x_cols};
    fp8_cast(ctx, &cast, mode_of(f));
    GemmOperands o = {
        .weight = operand(GEMM_E4M3, f->weight_rows[k] + l * w, f->weight_cols[k] + l * w,
                          meta_of(f, l, k, FP8_WEIGHT)),
        .input = operand(GEMM_E4M3, f->input_rows, x_cols, x_meta),
        .fast_accum = FP8_FAST_ACCUM,
    };
    return o;
}

GemmOperands fp8_layernorm_operands(Fp8Layers *f, const GpuContext *ctx, const GpuOps *ops, int l,
                                    Linear k, floatX *residual, floatX *out, float *mean,
                                    float *rstd, const floatX *a, const floatX *b,
                                    const floatX *weight, const floatX *bias, int B, int T) {
    if (!f->history_ready) {  // current scaling needs the whole output before the cast
        if (b) ops->residual_layernorm_forward(ctx, residual, out, mean, rstd, a, b, weight, bias,
                                               B, T, f->C);
        else ops->layernorm_forward(ctx, out, mean, rstd, a, weight, bias, B, T, f->C);
        return fp8_forward_operands(f, ctx, l, k, out, FP8_COPY, B * T);
    }
    uint8_t *x_cols = input_cols_of(f, l, k);
    Fp8Meta *x_meta = meta_of(f, l, k, FP8_INPUT);
    residual_layernorm_forward_fp8(ctx, residual, mean, rstd, a, b, weight, bias, B * T, f->C,
                                   x_meta, f->input_rows, x_cols);
    const size_t w = weight_bytes(k, f->C);
    GemmOperands o = {
        .weight = operand(GEMM_E4M3, f->weight_rows[k] + l * w, f->weight_cols[k] + l * w,
                          meta_of(f, l, k, FP8_WEIGHT)),
        .input = operand(GEMM_E4M3, f->input_rows, x_cols, x_meta),
        .fast_accum = FP8_FAST_ACCUM,
    };
    return o;
}

GemmOperands fp8_backward_operands(Fp8Layers *f, const GpuContext *ctx, int l, Linear k,
                                   const floatX *dout, Fp8CastOp op, const floatX *pre,
                                   floatX *dbias, int BT) {
    int IC, OC;
    fp8_linear_shape(k, f->C, &IC, &OC);
    Fp8Meta *g_meta = meta_of(f, l, k, FP8_GRAD);
    Fp8Cast cast = {.op = op, .in = dout, .pre = pre, .rows = BT, .cols = OC,
                    .format = GEMM_E5M2, .meta = g_meta, .out = f->grad_rows,
                    .out_t = f->grad_cols, .col_partials = dbias ? f->col_partials : NULL,
                    .dbias = dbias};
    fp8_cast(ctx, &cast, mode_of(f));
    const size_t w = weight_bytes(k, f->C);
    GemmOperands o = {
        .weight = operand(GEMM_E4M3, f->weight_rows[k] + l * w, f->weight_cols[k] + l * w,
                          meta_of(f, l, k, FP8_WEIGHT)),
        .input = operand(GEMM_E4M3, NULL, input_cols_of(f, l, k), meta_of(f, l, k, FP8_INPUT)),
        .grad = operand(GEMM_E5M2, f->grad_rows, f->grad_cols, g_meta),
    };
    return o;
}
// ANCHOR_END: fp8_operands

void fp8_end_step(Fp8Layers *f, const GpuContext *ctx) {
    fp8_scales_advance(ctx, f->metas, f->formats, f->L * LINEARS * FP8_ROLES);
    f->history_ready = 1;
}
