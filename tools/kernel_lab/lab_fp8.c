// lab_fp8.c: chapter 13's FP8 GEMMs beside chapter 12's bf16 ones, at every
// linear layer's shape, and the casts that feed them (fp8.h), at B=16 and at
// B=64. The bf16 build only.
//
// Each GEMM row is what its chapter's model runs: bf16 with chapter 04's
// epilogues (the bias; GELU after fc, its gradient in fc's projection's
// dinp; the bias gradients in the dweights), FP8 with the bias alone (the
// casts take GELU, its gradient and the bias gradients: the cast rows).
// Checked against the CPU's fp32 product on a small shape: bf16 within the
// lab's bound, FP8 within FP8_LAB_TOL (the format's step, 2^-4 for e4m3,
// 2^-3 for e5m2, on the largest outputs).
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "gemm_operands.h"
#include "gpu/fp8_codec.h"
#include "lab.h"
#include "matmul_lt.h"
#include "model/gpt2_cpu.h"

#ifdef PRECISION_BF16

#define FP8_LAB_TOL 0.15

typedef struct {
    const char *name;
    int ic, oc;       // in units of C
    int gelu_after;   // fc: GELU follows (bf16: its epilogue; FP8: the next cast)
    int gelu_before;  // fcproj: its input is GELU's output
} Linear;

static const Linear LINEARS[] = {
    {"qkv", 1, 3, 0, 0}, {"attproj", 1, 1, 0, 0}, {"fc", 1, 4, 1, 0}, {"fcproj", 4, 1, 0, 1}};

// One linear layer's operands on the device, in both formats.
typedef struct {
    int BT, IC, OC;
    floatX *x, *w, *bias, *out, *pre, *dout, *dinp, *dw, *db;
    float *scratch;
    GemmOperands fp8;
    int gelu_after, gelu_before;
} Operands;

static Fp8Meta *lab_meta(Lab *lab) {
    Fp8Meta m;
    memset(&m, 0, sizeof m);
    m.scale = 1.0f;
    Fp8Meta *d = lab_alloc(lab, sizeof m);
    CUDA_CHECK(cudaMemcpy(d, &m, sizeof m, cudaMemcpyHostToDevice));
    return d;
}

// A (rows, cols) floatX tensor cast to FP8, rows and transpose (current scaling).
static GemmOperand lab_cast(Lab *lab, const floatX *x, int rows, int cols, GemmPrecision format) {
    Fp8Meta *meta = lab_meta(lab);
    void *r = lab_alloc(lab, (size_t)rows * cols), *c = lab_alloc(lab, (size_t)rows * cols);
    Fp8Cast cast = {.op = FP8_COPY, .in = x, .rows = rows, .cols = cols, .format = format,
                    .meta = meta, .out = r, .out_t = c};
    fp8_cast(&lab->ctx, &cast, FP8_CURRENT);
    GemmOperand o = {format, r, c, &meta->scale};
    return o;
}

static Operands make_operands(Lab *lab, const Linear *k, int BT, int C, const float **host_x,
                              const float **host_w) {
    Operands o = {.BT = BT, .IC = k->ic * C, .OC = k->oc * C};
    const size_t nx = (size_t)BT * o.IC, nw = (size_t)o.OC * o.IC, no = (size_t)BT * o.OC;
    float *x = lab_random_x(lab, nx, -2, 2), *w = lab_random_x(lab, nw, -0.1f, 0.1f);
    o.x = lab_upload_x(lab, x, nx), o.w = lab_upload_x(lab, w, nw);
    float *bias = lab_random_x(lab, o.OC, -0.1f, 0.1f), *dout = lab_random_x(lab, no, -1e-3f, 1e-3f);
    o.bias = lab_upload_x(lab, bias, o.OC), o.dout = lab_upload_x(lab, dout, no);
    o.out = lab_alloc(lab, no * sizeof(floatX));
    o.pre = lab_alloc(lab, (k->gelu_after ? no : nx) * sizeof(floatX));
    o.dinp = lab_alloc(lab, nx * sizeof(floatX));
    o.dw = lab_alloc(lab, nw * sizeof(floatX)), o.db = lab_alloc(lab, o.OC * sizeof(floatX));
    CUDA_CHECK(cudaMemset(o.dw, 0, nw * sizeof(floatX)));
    CUDA_CHECK(cudaMemset(o.db, 0, o.OC * sizeof(floatX)));
    o.scratch = lab_alloc(lab, matmul_backward_v2_scratch_floats(o.OC) * sizeof(float));
    o.fp8.weight = lab_cast(lab, o.w, o.OC, o.IC, GEMM_E4M3);
    o.fp8.input = lab_cast(lab, o.x, BT, o.IC, GEMM_E4M3);
    o.fp8.grad = lab_cast(lab, o.dout, BT, o.OC, GEMM_E5M2);
    o.gelu_after = k->gelu_after, o.gelu_before = k->gelu_before;
    if (host_x) *host_x = x, *host_w = w;
    else free(x), free(w);
    free(bias), free(dout);
    return o;
}

typedef struct {
    Operands *o;
    int fp8;
} Args;

// Each GEMM row three times: chapter 12's bf16, chapter 13's FP8 with every
// sum promoted to fp32, and FP8 with fast accumulation (gemm_operands.h: the
// forward product, and in the backward row dinp's; dweight's always
// promotes). The model takes it in the forward only (fp8_layers.c).
typedef struct {
    const char *name;
    int fp8, fast_accum;
} Variant;

static const Variant VARIANTS[] = {
    {"bf16", 0, 0}, {"fp8", 1, 0}, {"fp8, fast accumulation", 1, 1}};

static void run_forward(Lab *lab, void *p) {
    const Args *a = p;
    const Operands *o = a->o;
    if (a->fp8)
        matmul_forward_v2(&lab->ctx, o->out, NULL, NULL, NULL, o->bias, 1, o->BT, o->IC, o->OC,
                          o->OC, &o->fp8);
    else
        matmul_forward_v2(&lab->ctx, o->out, o->gelu_after ? o->pre : NULL, o->x, o->w, o->bias,
                          1, o->BT, o->IC, o->OC, o->OC, NULL);
}

static void run_backward(Lab *lab, void *p) {
    const Args *a = p;
    const Operands *o = a->o;
    if (a->fp8)
        matmul_backward_v2(&lab->ctx, o->dinp, o->dw, NULL, NULL, NULL, NULL, NULL, NULL, 1,
                           o->BT, o->IC, o->OC, o->OC, &o->fp8);
    else
        matmul_backward_v2(&lab->ctx, o->dinp, o->dw, o->db, o->scratch, o->dout, o->x, o->w,
                           o->gelu_before ? o->pre : NULL, 1, o->BT, o->IC, o->OC, o->OC, NULL);
}

// The forward product's error on a small shape, against the CPU's fp32.
static double check_forward(Lab *lab, const Linear *k, const Variant *var) {
    const int BT = 64, C = 64;
    const float *x, *w;
    Operands o = make_operands(lab, k, BT, C, &x, &w);
    o.fp8.fast_accum = var->fast_accum;
    Args a = {&o, var->fp8};
    CUDA_CHECK(cudaMemset(o.bias, 0, o.OC * sizeof(floatX)));
    o.gelu_after = 0;  // the product itself
    run_forward(lab, &a);
    float *got = lab_download_x(lab, o.out, (size_t)BT * o.OC);
    float *want = xmalloc((size_t)BT * o.OC * sizeof(float));
    cpu_matmul_forward(want, x, w, NULL, 1, BT, o.IC, o.OC);
    const double err = lab_error(got, want, (size_t)BT * o.OC);
    free(got), free(want), free((void *)x), free((void *)w);
    lab_free_buffers(lab);
    return err;
}

static void gemm_rows(Lab *lab, int B) {
    char shape[64];
    for (size_t i = 0; i < sizeof LINEARS / sizeof LINEARS[0]; i++) {
        const Linear *k = &LINEARS[i];
        double errors[sizeof VARIANTS / sizeof VARIANTS[0]];
        for (size_t v = 0; v < sizeof VARIANTS / sizeof VARIANTS[0]; v++)
            errors[v] = check_forward(lab, k, &VARIANTS[v]);
        const int BT = B * LAB_T;
        Operands o = make_operands(lab, k, BT, LAB_C, NULL, NULL);
        const double flops = 2.0 * BT * o.IC * o.OC;
        snprintf(shape, sizeof shape, "%s B=%d %dx%dx%d", k->name, B, BT, o.IC, o.OC);
        for (size_t v = 0; v < sizeof VARIANTS / sizeof VARIANTS[0]; v++) {
            const Variant *var = &VARIANTS[v];
            const int fp8 = var->fp8;
            Args a = {&o, fp8};
            o.fp8.fast_accum = var->fast_accum;
            const double elem = fp8 ? 1 : sizeof(floatX);
            char fwd[64], bwd[64];
            snprintf(fwd, sizeof fwd, "forward %s", var->name);
            snprintf(bwd, sizeof bwd, "backward %s", var->name);
            LabRow f = {"matmul_fp8", fwd, shape, fp8 ? 13 : 4, errors[v],
                        fp8 ? FP8_LAB_TOL : lab_tolerance(), lab_time_ms(lab, run_forward, &a),
                        elem * ((double)BT * o.IC + (double)o.OC * o.IC) + 2.0 * BT * o.OC,
                        flops};
            lab_report(lab, &f);
            // dinp and dweight: both operands of each product read once more.
            LabRow b = {"matmul_fp8", bwd, shape, fp8 ? 13 : 4, errors[v],
                        fp8 ? FP8_LAB_TOL : lab_tolerance(), lab_time_ms(lab, run_backward, &a),
                        elem * (2.0 * BT * o.OC + BT * o.IC + (double)o.OC * o.IC) +
                            2.0 * ((double)BT * o.IC + 2.0 * o.OC * o.IC),
                        2 * flops};
            lab_report(lab, &b);
        }
        lab_free_buffers(lab);
    }
}

// ---- the casts ---------------------------------------------------------------------

typedef struct {
    const char *version;
    Fp8CastOp op;
    GemmPrecision format;
    int width;     // columns, in units of C
    int bias;      // the bias gradient's column sums too
    int transpose; // rows and transpose, or rows alone
    Fp8ScaleMode mode;
} CastRow;

// Delayed scaling, as the model runs every step but its first; and the first
// row again with current scaling, whose amax pass reads the tensor once more.
static const CastRow CASTS[] = {
    {"copy e4m3 (ln, attention out)", FP8_COPY, GEMM_E4M3, 1, 0, 1, FP8_DELAYED},
    {"gelu e4m3 (fc out)", FP8_GELU, GEMM_E4M3, 4, 0, 1, FP8_DELAYED},
    {"copy e5m2 + dbias (dresidual)", FP8_COPY, GEMM_E5M2, 1, 1, 1, FP8_DELAYED},
    {"copy e5m2 + dbias (dqkv)", FP8_COPY, GEMM_E5M2, 3, 1, 1, FP8_DELAYED},
    {"dgelu e5m2 + dbias (dfc)", FP8_DGELU, GEMM_E5M2, 4, 1, 1, FP8_DELAYED},
    {"copy e4m3, current scaling", FP8_COPY, GEMM_E4M3, 1, 0, 1, FP8_CURRENT},
};

typedef struct {
    Fp8Cast cast;
    Fp8ScaleMode mode;
} CastArgs;

static void run_cast(Lab *lab, void *p) {
    CastArgs *a = p;
    fp8_cast(&lab->ctx, &a->cast, a->mode);
}

// The cast's rows against its input: dequantized, within the format's step.
static double cast_error(Lab *lab, const CastRow *c) {
    const int rows = 128, cols = 3 * 64;
    const size_t n = (size_t)rows * cols;
    float *x = lab_random_x(lab, n, -2, 2);
    Fp8Cast cast = {.op = FP8_COPY, .in = lab_upload_x(lab, x, n), .rows = rows, .cols = cols,
                    .format = c->format, .meta = lab_meta(lab), .out = lab_alloc(lab, n)};
    fp8_cast(&lab->ctx, &cast, FP8_CURRENT);
    uint8_t *codes = xmalloc(n);
    Fp8Meta m;
    CUDA_CHECK(cudaMemcpy(codes, cast.out, n, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&m, cast.meta, sizeof m, cudaMemcpyDeviceToHost));
    float *back = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) back[i] = fp8_decode(codes[i], c->format) * m.scale;
    const double err = lab_error(back, x, n);
    free(x), free(codes), free(back);
    lab_free_buffers(lab);
    return err;
}

static void cast_rows(Lab *lab, int B) {
    char shape[64];
    for (size_t i = 0; i < sizeof CASTS / sizeof CASTS[0]; i++) {
        const CastRow *c = &CASTS[i];
        const double err = cast_error(lab, c);
        const int rows = B * LAB_T, cols = c->width * LAB_C;
        const size_t n = (size_t)rows * cols;
        float *x = lab_random_x(lab, n, -2, 2);
        CastArgs a = {{.op = c->op, .in = lab_upload_x(lab, x, n), .rows = rows, .cols = cols,
                       .format = c->format, .meta = lab_meta(lab), .out = lab_alloc(lab, n),
                       .out_t = c->transpose ? lab_alloc(lab, n) : NULL},
                      c->mode};
        if (c->op == FP8_DGELU) a.cast.pre = lab_upload_x(lab, x, n);
        if (c->bias) {
            a.cast.col_partials = lab_alloc(lab, fp8_cast_partials_floats(rows, cols) * sizeof(float));
            a.cast.dbias = lab_alloc(lab, cols * sizeof(floatX));
            CUDA_CHECK(cudaMemset(a.cast.dbias, 0, cols * sizeof(floatX)));
        }
        snprintf(shape, sizeof shape, "B=%d %dx%d", B, rows, cols);
        // Reads floatX (twice for dgelu: the gradient and GELU's input), writes one byte per
        // value for the rows and one for the transpose. The least it must move: current
        // scaling's second read is its cost, not part of this.
        const double bytes = (double)n * (sizeof(floatX) * (c->op == FP8_DGELU ? 2 : 1) + 1 +
                                          (c->transpose ? 1 : 0));
        LabRow r = {"fp8_cast", c->version, shape, 13, err,
                    c->format == GEMM_E4M3 ? 0.0625 : 0.125, lab_time_ms(lab, run_cast, &a),
                    bytes, 0};
        lab_report(lab, &r);
        free(x);
        lab_free_buffers(lab);
    }
}

void lab_fp8(Lab *lab) {
    if (!lab->ctx.fp8) {
        printf("fp8: this GPU has no FP8 tensor cores (compute capability 8.9 or later)\n");
        return;
    }
    const int batches[] = {LAB_B, 64};
    for (int b = 0; b < 2; b++) {
        if (lab_wants(lab, "fp8_cast")) cast_rows(lab, batches[b]);
        if (lab_wants(lab, "matmul_fp8")) gemm_rows(lab, batches[b]);
    }
}

#else

void lab_fp8(Lab *lab) { (void)lab; }  // the fp32 build has no FP8 chapter

#endif
