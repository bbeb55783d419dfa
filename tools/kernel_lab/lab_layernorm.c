// lab_layernorm.c: the layernorm's versions, forward and backward.
#include <math.h>
#include <stdlib.h>

#include "model/gpt2_cpu.h"
#include "lab.h"
#include "layernorm.h"

typedef void (*LayernormForward)(const GpuContext *ctx, floatX *out, float *mean, float *rstd,
                                 const floatX *inp, const floatX *weight, const floatX *bias,
                                 int B, int T, int C);
typedef void (*LayernormBackward)(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                                  floatX *dbias, float *scratch, const floatX *dout,
                                  const floatX *inp, const floatX *weight, const float *mean,
                                  const float *rstd, int B, int T, int C);

static const struct {
    const char *name;
    int chapter;
    LayernormForward fn;
} FORWARD[] = {
    {"v1", 0, layernorm_forward_v1},
    {"v2 vec16", 4, layernorm_forward_v2},
};

static const struct {
    const char *name;
    int chapter;
    LayernormBackward fn;
} BACKWARD[] = {
    {"v1", 0, layernorm_backward_v1},
    {"v2 vec16", 4, layernorm_backward_v2},
    {"v3 vec16 sums", 11, layernorm_backward_v3},
};

// Everything one call reads and writes, on the device, at one shape.
typedef struct {
    int B, T, C;
    floatX *inp, *w, *b, *out, *dout, *dinp, *dw, *db;
    float *mean, *rstd, *scratch;
    LayernormForward fwd;
    LayernormBackward bwd;
} Args;

static Args upload(Lab *lab, int B, int T, int C, float *inp, float *w, float *b, float *dout) {
    const size_t N = (size_t)B * T * C, BT = (size_t)B * T;
    float *zeros = xcalloc(N, sizeof(float));
    Args a = {.B = B, .T = T, .C = C, .inp = lab_upload_x(lab, inp, N), .w = lab_upload_x(lab, w, C),
              .b = lab_upload_x(lab, b, C), .out = lab_upload_x(lab, zeros, N),
              .dout = lab_upload_x(lab, dout, N), .dinp = lab_upload_x(lab, zeros, N),
              .dw = lab_upload_x(lab, zeros, C), .db = lab_upload_x(lab, zeros, C),
              .mean = lab_alloc(lab, BT * sizeof(float)), .rstd = lab_alloc(lab, BT * sizeof(float)),
              .scratch = lab_alloc(lab, layernorm_backward_scratch_floats(B, T, C) * sizeof(float))};
    free(zeros);
    return a;
}

static void run_forward(Lab *lab, void *p) {
    Args *a = p;
    a->fwd(&lab->ctx, a->out, a->mean, a->rstd, a->inp, a->w, a->b, a->B, a->T, a->C);
}

static void run_backward(Lab *lab, void *p) {
    Args *a = p;
    a->bwd(&lab->ctx, a->dinp, a->dw, a->db, a->scratch, a->dout, a->inp, a->w, a->mean, a->rstd,
           a->B, a->T, a->C);
}

// ---- the seam between blocks: residual add, then the next layernorm ----------------
// The model's seam slot of each chapter: 00's eager pair (the sum written
// out and read back), 04's fused kernel.
static const struct {
    const char *name;
    int chapter;
} SEAM[] = {
    {"v1 eager", 0},
    {"v2 fused", 4},
};

typedef struct {
    int B, T, C;
    floatX *a, *b, *w, *bias, *residual, *out;
    float *mean, *rstd;
    GpuOps ops;
} SeamArgs;

static SeamArgs upload_seam(Lab *lab, int B, int T, int C, const float *a, const float *b,
                            const float *w, const float *bias) {
    const size_t N = (size_t)B * T * C, BT = (size_t)B * T;
    return (SeamArgs){.B = B, .T = T, .C = C, .a = lab_upload_x(lab, a, N),
                      .b = lab_upload_x(lab, b, N), .w = lab_upload_x(lab, w, C),
                      .bias = lab_upload_x(lab, bias, C),
                      .residual = lab_alloc(lab, N * sizeof(floatX)),
                      .out = lab_alloc(lab, N * sizeof(floatX)),
                      .mean = lab_alloc(lab, BT * sizeof(float)),
                      .rstd = lab_alloc(lab, BT * sizeof(float))};
}

static void run_seam(Lab *lab, void *p) {
    SeamArgs *s = p;
    s->ops.residual_layernorm_forward(&lab->ctx, s->residual, s->out, s->mean, s->rstd, s->a,
                                      s->b, s->w, s->bias, s->B, s->T, s->C);
}

static void lab_residual_layernorm(Lab *lab) {
    const int B = 2, T = 64, C = LAB_C;
    const size_t N = (size_t)B * T * C, BT = (size_t)B * T;
    float *a = lab_random_x(lab, N, -2, 2), *b = lab_random_x(lab, N, -1, 1);
    float *w = lab_random_x(lab, C, 0.5f, 1.5f), *bias = lab_random_x(lab, C, -1, 1);
    float *sum = xmalloc(N * sizeof(float)), *out = xmalloc(N * sizeof(float));
    float *mean = xmalloc(BT * sizeof(float)), *rstd = xmalloc(BT * sizeof(float));
    cpu_residual_forward(sum, a, b, N);
    cpu_layernorm_forward(out, mean, rstd, sum, w, bias, B, T, C);
    SeamArgs check = upload_seam(lab, B, T, C, a, b, w, bias);
    const size_t TN = (size_t)LAB_B * LAB_T * C;
    float *ta = lab_random_x(lab, TN, -2, 2), *tb = lab_random_x(lab, TN, -1, 1);
    SeamArgs timed = upload_seam(lab, LAB_B, LAB_T, C, ta, tb, w, bias);
    for (size_t i = 0; i < sizeof SEAM / sizeof SEAM[0]; i++) {
        check.ops = timed.ops = lab_ops_of(SEAM[i].chapter);
        run_seam(lab, &check);
        float *got = lab_download_x(lab, check.out, N);
        // the least it must move: a and b read, residual and out written
        LabRow r = {"residual_layernorm_forward", SEAM[i].name, "(B,T,C) 16x1024x768",
                    SEAM[i].chapter, lab_error(got, out, N), lab_tolerance(),
                    lab_time_ms(lab, run_seam, &timed),
                    4.0 * TN * sizeof(floatX) + 2.0 * LAB_B * LAB_T * 4, 0};
        lab_report(lab, &r);
        free(got);
    }
    free(a), free(b), free(w), free(bias), free(sum), free(out), free(mean), free(rstd);
    free(ta), free(tb);
    lab_free_buffers(lab);
}

void lab_layernorm(Lab *lab) {
    if (!lab_wants(lab, "layernorm")) return;
    lab_residual_layernorm(lab);
    // The check: 2 x 64 rows of 768 against the CPU reference.
    const int B = 2, T = 64, C = LAB_C;
    const size_t N = (size_t)B * T * C, BT = (size_t)B * T;
    float *inp = lab_random_x(lab, N, -2, 3), *w = lab_random_x(lab, C, 0.5f, 1.5f);
    float *b = lab_random_x(lab, C, -1, 1), *dout = lab_random_x(lab, N, -1, 1);
    float *out = xmalloc(N * sizeof(float)), *mean = xmalloc(BT * sizeof(float));
    float *rstd = xmalloc(BT * sizeof(float)), *dinp = xcalloc(N, sizeof(float));
    float *dw = xcalloc(C, sizeof(float)), *db = xcalloc(C, sizeof(float));
    cpu_layernorm_forward(out, mean, rstd, inp, w, b, B, T, C);
    cpu_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, B, T, C);
    Args check = upload(lab, B, T, C, inp, w, b, dout);

    // The timed shape: 124M's residual stream.
    const int TB = LAB_B, TT = LAB_T;
    const size_t TN = (size_t)TB * TT * C;
    float *tinp = lab_random_x(lab, TN, -2, 3), *tdout = lab_random_x(lab, TN, -1, 1);
    Args timed = upload(lab, TB, TT, C, tinp, w, b, tdout);
    const double x = sizeof(floatX), rows = (double)TB * TT;

    for (size_t i = 0; i < sizeof FORWARD / sizeof FORWARD[0]; i++) {
        check.fwd = timed.fwd = FORWARD[i].fn;
        run_forward(lab, &check);
        float *got = lab_download_x(lab, check.out, N);
        // inp read, out written; mean and rstd (fp32) written
        LabRow r = {"layernorm_forward", FORWARD[i].name, "(B,T,C) 16x1024x768",
                    FORWARD[i].chapter, lab_error(got, out, N), lab_tolerance(),
                    lab_time_ms(lab, run_forward, &timed), 2 * TN * x + 2 * rows * 4, 0};
        lab_report(lab, &r);
        free(got);
    }
    run_forward(lab, &timed);  // the backward pass reads its mean and rstd
    for (size_t i = 0; i < sizeof BACKWARD / sizeof BACKWARD[0]; i++) {
        check.bwd = timed.bwd = BACKWARD[i].fn;
        check.fwd = FORWARD[0].fn;
        run_forward(lab, &check);
        CUDA_CHECK(cudaMemset(check.dinp, 0, N * sizeof(floatX)));
        CUDA_CHECK(cudaMemset(check.dw, 0, C * sizeof(floatX)));
        CUDA_CHECK(cudaMemset(check.db, 0, C * sizeof(floatX)));
        run_backward(lab, &check);
        float *got = lab_download_x(lab, check.dinp, N), *gw = lab_download_x(lab, check.dw, C);
        float *gb = lab_download_x(lab, check.db, C);
        double err = fmax(lab_error(got, dinp, N), fmax(lab_error(gw, dw, C), lab_error(gb, db, C)));
        // dout and inp read, dinp read and written; mean, rstd read
        LabRow r = {"layernorm_backward", BACKWARD[i].name, "(B,T,C) 16x1024x768",
                    BACKWARD[i].chapter, err, lab_tolerance(),
                    lab_time_ms(lab, run_backward, &timed), 4 * TN * x + 2 * rows * 4, 0};
        lab_report(lab, &r);
        free(got), free(gw), free(gb);
    }
    free(inp), free(w), free(b), free(dout), free(out), free(mean), free(rstd), free(dinp);
    free(dw), free(db), free(tinp), free(tdout);
    lab_free_buffers(lab);
}
