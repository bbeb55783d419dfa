// lab_matmul.c: the linear layer's versions at GPT-2's five GEMM shapes,
// forward and backward.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpt2_cpu.h"
#include "lab.h"
#include "matmul.h"

typedef void (*MatmulForward)(const GpuContext *ctx, floatX *out, const floatX *inp,
                              const floatX *weight, const floatX *bias, int B, int T, int C,
                              int OC);
typedef void (*MatmulBackward)(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                               floatX *dbias, float *scratch, const floatX *dout,
                               const floatX *inp, const floatX *weight, int B, int T, int C,
                               int OC);

typedef struct {
    const char *name;
    int chapter;
    MatmulForward fwd;
    MatmulBackward bwd;
    int tensor_cores;  // the context's switch (fp32 build: chapter 01's TF32)
} Version;

static const Version VERSIONS[] = {
#ifndef PRECISION_BF16
    {"v1 fp32", 0, matmul_forward_v1, matmul_backward_v1, 0},
    {"v1 tf32", 1, matmul_forward_v1, matmul_backward_v1, 1},
#else
    {"v1", 2, matmul_forward_v1, matmul_backward_v1, 1},
#endif
};

// The five GEMMs of a GPT-2 step, as (C in, OC out, bias or not).
static const struct {
    const char *name;
    int C, OC, bias;
} SHAPES[] = {
    {"qkv", LAB_C, 3 * LAB_C, 1},   {"attproj", LAB_C, LAB_C, 1}, {"fc", LAB_C, 4 * LAB_C, 1},
    {"fcproj", 4 * LAB_C, LAB_C, 1}, {"lm_head", LAB_C, LAB_V, 0},
};

typedef struct {
    int B, T, C, OC;
    floatX *inp, *w, *bias, *out, *dout, *dinp, *dw, *db;
    float *scratch;
    const Version *v;
} Args;

static Args upload(Lab *lab, int B, int T, int C, int OC, int with_bias, const float *inp,
                   const float *w, const float *bias, const float *dout) {
    const size_t BT = (size_t)B * T;
    float *zeros = xcalloc(BT * (C > OC ? C : OC) + (size_t)C * OC, sizeof(float));
    Args a = {.B = B, .T = T, .C = C, .OC = OC, .inp = lab_upload_x(lab, inp, BT * C),
              .w = lab_upload_x(lab, w, (size_t)OC * C),
              .bias = with_bias ? lab_upload_x(lab, bias, OC) : NULL,
              .out = lab_upload_x(lab, zeros, BT * OC), .dout = lab_upload_x(lab, dout, BT * OC),
              .dinp = lab_upload_x(lab, zeros, BT * C), .dw = lab_upload_x(lab, zeros, (size_t)OC * C),
              .db = with_bias ? lab_upload_x(lab, zeros, OC) : NULL,
              .scratch = lab_alloc(lab, matmul_backward_scratch_floats(B, T, OC) * sizeof(float))};
    free(zeros);
    return a;
}

static void run_forward(Lab *lab, void *p) {
    Args *a = p;
    lab->ctx.tensor_cores = a->v->tensor_cores;
    a->v->fwd(&lab->ctx, a->out, a->inp, a->w, a->bias, a->B, a->T, a->C, a->OC);
}

static void run_backward(Lab *lab, void *p) {
    Args *a = p;
    lab->ctx.tensor_cores = a->v->tensor_cores;
    a->v->bwd(&lab->ctx, a->dinp, a->dw, a->db, a->scratch, a->dout, a->inp, a->w, a->B, a->T,
              a->C, a->OC);
}

// Every version against the CPU on the qkv GEMM of 2 x 64 tokens: forward
// (out) and backward (dinp, dweight, dbias, from zero). The largest error.
static void check_versions(Lab *lab, double errors[][2]) {
    const int B = 2, T = 64, C = LAB_C, OC = 3 * LAB_C;
    const size_t BT = (size_t)B * T;
    float *inp = lab_random_x(lab, BT * C, -1, 1), *w = lab_random_x(lab, (size_t)OC * C, -1, 1);
    float *bias = lab_random_x(lab, OC, -1, 1), *dout = lab_random_x(lab, BT * OC, -1, 1);
    float *out = xmalloc(BT * OC * sizeof(float)), *dinp = xcalloc(BT * C, sizeof(float));
    float *dw = xcalloc((size_t)OC * C, sizeof(float)), *db = xcalloc(OC, sizeof(float));
    cpu_matmul_forward(out, inp, w, bias, B, T, C, OC);
    cpu_matmul_backward(dinp, dw, db, dout, inp, w, B, T, C, OC);
    for (size_t i = 0; i < sizeof VERSIONS / sizeof VERSIONS[0]; i++) {
        Args a = upload(lab, B, T, C, OC, 1, inp, w, bias, dout);
        a.v = &VERSIONS[i];
        run_forward(lab, &a);
        run_backward(lab, &a);
        float *g_out = lab_download_x(lab, a.out, BT * OC), *g_dinp = lab_download_x(lab, a.dinp, BT * C);
        float *g_dw = lab_download_x(lab, a.dw, (size_t)OC * C), *g_db = lab_download_x(lab, a.db, OC);
        errors[i][0] = lab_error(g_out, out, BT * OC);
        errors[i][1] = fmax(lab_error(g_dinp, dinp, BT * C),
                            fmax(lab_error(g_dw, dw, (size_t)OC * C), lab_error(g_db, db, OC)));
        free(g_out), free(g_dinp), free(g_dw), free(g_db);
        lab_free_buffers(lab);
    }
    free(inp), free(w), free(bias), free(dout), free(out), free(dinp), free(dw), free(db);
}

// TF32 keeps 11 significant bits of each operand: its check bound is TF32's.
static double tolerance_of(const Version *v) {
#ifndef PRECISION_BF16
    if (v->tensor_cores) return 5e-3;
#endif
    (void)v;
    return lab_tolerance();
}

void lab_matmul(Lab *lab) {
    if (!lab_wants(lab, "matmul")) return;
    double errors[sizeof VERSIONS / sizeof VERSIONS[0]][2];
    check_versions(lab, errors);
    const int B = LAB_B, T = LAB_T;
    const double BT = (double)B * T, x = sizeof(floatX);
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const int C = SHAPES[s].C, OC = SHAPES[s].OC;
        float *inp = lab_random_x(lab, (size_t)B * T * C, -1, 1);
        float *w = lab_random_x(lab, (size_t)OC * C, -0.05f, 0.05f);
        float *bias = lab_random_x(lab, OC, -1, 1), *dout = lab_random_x(lab, (size_t)B * T * OC, -1, 1);
        Args a = upload(lab, B, T, C, OC, SHAPES[s].bias, inp, w, bias, dout);
        char shape[64];
        snprintf(shape, sizeof shape, "%s %.0fx%dx%d", SHAPES[s].name, BT, OC, C);
        for (size_t i = 0; i < sizeof VERSIONS / sizeof VERSIONS[0]; i++) {
            a.v = &VERSIONS[i];
            LabRow f = {"matmul_forward", a.v->name, shape, a.v->chapter, errors[i][0],
                        tolerance_of(a.v), lab_time_ms(lab, run_forward, &a),
                        (BT * C + (double)OC * C + BT * OC) * x, 2 * BT * C * OC};
            lab_report(lab, &f);
            LabRow b = {"matmul_backward", a.v->name, shape, a.v->chapter, errors[i][1],
                        tolerance_of(a.v), lab_time_ms(lab, run_backward, &a),
                        (2 * BT * OC + 2 * BT * C + 3.0 * OC * C) * x, 4 * BT * C * OC};
            lab_report(lab, &b);
        }
        free(inp), free(w), free(bias), free(dout);
        lab_free_buffers(lab);
    }
}
