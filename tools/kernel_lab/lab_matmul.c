// lab_matmul.c: the linear layer's versions at GPT-2's five GEMM shapes,
// forward and backward.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/gpt2_cpu.h"
#include "lab.h"
#include "train/chapters.h"
#include "gpu/gpu_ops.h"
#include "matmul.h"
#include "matmul_lt.h"

// The versions are the model's slots (gpu_ops.h) of the chapter that brought
// them: chapter 00's eager composition (cuBLAS, then a bias kernel, then a
// GELU kernel; a memset before a backward GEMM that accumulates) and chapter
// 04's cuBLASLt GEMMs with their epilogues; then chapter 11's, the same
// GEMMs with each shape's kernel picked by timing cuBLASLt's candidates.
typedef struct {
    const char *name;
    int chapter;       // whose gpu_ops_select fills the slots
    int tensor_cores;  // the context's switch (fp32 build: chapter 01's TF32)
    int autotune;      // the context's gemm_autotune (chapter 11)
} Version;

static const Version VERSIONS[] = {
#ifndef PRECISION_BF16
    {"v1 fp32", 0, 0, 0},
    {"v1 tf32", 1, 1, 0},
    {"v2 lt tf32", 4, 1, 0},  // chapter 04's kernels, compiled in the fp32 build too
#else
    {"v1", 2, 1, 0},
    {"v2 lt", 4, 1, 0},
    {"v2 lt autotuned", 11, 1, 1},
#endif
};

// The GEMMs of a GPT-2 step, as (C in, OC out, bias, GELU around it, row
// stride of the output). fc+gelu: forward with GELU after it, backward
// through GELU before it (the fcproj GEMM's dinp), as the model runs them.
// lm_head three times: rows of 50257 (every row but one in eight
// misaligned), of 50264 (gpu_ops_logits_stride: chapter 04 runs the GEMM
// padded to that width, on a copy of the weight), and 50304 wide (chapter
// 06's padded vocabulary: no copies, whole tiles of 128). The eager v1 only
// has the first.
static const struct {
    const char *name;
    int C, OC, bias, gelu, ld;
} SHAPES[] = {
    {"qkv", LAB_C, 3 * LAB_C, 1, 0, 3 * LAB_C},
    {"attproj", LAB_C, LAB_C, 1, 0, LAB_C},
    {"fc", LAB_C, 4 * LAB_C, 1, 0, 4 * LAB_C},
    {"fc+gelu", LAB_C, 4 * LAB_C, 1, 1, 4 * LAB_C},
    {"fcproj", 4 * LAB_C, LAB_C, 1, 0, LAB_C},
    {"lm_head", LAB_C, LAB_V, 0, 0, LAB_V},
    {"lm_head ld 50264", LAB_C, LAB_V, 0, 0, (LAB_V + 7) / 8 * 8},
    {"lm_head 50304", LAB_C, 50304, 0, 0, 50304},
};

typedef struct {
    int B, T, C, OC, ld;
    floatX *inp, *w, *bias, *out, *pre, *dout, *dinp, *dw, *db, *pre_in;
    float *scratch;
    const Version *v;
    GpuOps ops;
} Args;

// pre: the forward's GELU input (BT, OC) when gelu; pre_in (or NULL): the
// (BT, C) GELU input the backward multiplies dinp by.
static Args upload(Lab *lab, int B, int T, int C, int OC, int ld, int with_bias, int gelu,
                   const float *inp, const float *w, const float *bias, const float *dout,
                   const float *pre_in) {
    const size_t BT = (size_t)B * T;
    float *zeros = xcalloc(BT * (C > ld ? C : ld) + (size_t)C * OC, sizeof(float));
    size_t scratch = matmul_backward_scratch_floats(B, T, OC);
    if (matmul_backward_v2_scratch_floats(OC) > scratch) scratch = matmul_backward_v2_scratch_floats(OC);
    Args a = {.B = B, .T = T, .C = C, .OC = OC, .ld = ld, .inp = lab_upload_x(lab, inp, BT * C),
              .w = lab_upload_x(lab, w, (size_t)OC * C),
              .bias = with_bias ? lab_upload_x(lab, bias, OC) : NULL,
              .out = lab_upload_x(lab, zeros, BT * ld),
              .pre = gelu ? lab_upload_x(lab, zeros, BT * OC) : NULL,
              .dout = lab_upload_x(lab, dout, BT * ld),
              .dinp = lab_upload_x(lab, zeros, BT * C), .dw = lab_upload_x(lab, zeros, (size_t)OC * C),
              .db = with_bias ? lab_upload_x(lab, zeros, OC) : NULL,
              .pre_in = pre_in ? lab_upload_x(lab, pre_in, BT * C) : NULL,
              .scratch = lab_alloc(lab, scratch * sizeof(float))};
    free(zeros);
    return a;
}

static void run_forward(Lab *lab, void *p) {
    Args *a = p;
    lab->ctx.tensor_cores = a->v->tensor_cores;
    lab->ctx.gemm_autotune = a->v->autotune;
    a->ops.matmul_forward(&lab->ctx, a->out, a->pre, a->inp, a->w, a->bias, a->B, a->T, a->C,
                          a->OC, a->ld, NULL);
}

static void run_backward(Lab *lab, void *p) {
    Args *a = p;
    lab->ctx.tensor_cores = a->v->tensor_cores;
    lab->ctx.gemm_autotune = a->v->autotune;
    a->ops.matmul_backward(&lab->ctx, a->dinp, a->dw, a->db, a->scratch, a->dout, a->inp, a->w,
                           a->pre_in, a->B, a->T, a->C, a->OC, a->ld, NULL);
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
        Args a = upload(lab, B, T, C, OC, OC, 1, 0, inp, w, bias, dout, NULL);
        a.v = &VERSIONS[i];
        a.ops = lab_ops_of(a.v->chapter);
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
        const int C = SHAPES[s].C, OC = SHAPES[s].OC, ld = SHAPES[s].ld, gelu = SHAPES[s].gelu;
        float *inp = lab_random_x(lab, (size_t)B * T * C, -1, 1);
        float *w = lab_random_x(lab, (size_t)OC * C, -0.05f, 0.05f);
        float *bias = lab_random_x(lab, OC, -1, 1), *dout = lab_random_x(lab, (size_t)B * T * ld, -1, 1);
        // fc+gelu's backward is fcproj's, through GELU: its dinp is (BT, 4C)
        const int bC = gelu ? OC : C, bOC = gelu ? C : OC;
        float *pre_in = gelu ? lab_random_x(lab, (size_t)B * T * bC, -3, 3) : NULL;
        float *bw = gelu ? lab_random_x(lab, (size_t)bOC * bC, -0.05f, 0.05f) : NULL;
        Args a = upload(lab, B, T, C, OC, ld, SHAPES[s].bias, gelu, inp, w, bias, dout, NULL);
        Args back = gelu ? upload(lab, B, T, bC, bOC, bOC, 1, 0, pre_in, bw, bias, dout, pre_in) : a;
        char shape[64];
        snprintf(shape, sizeof shape, "%s %.0fx%dx%d", SHAPES[s].name, BT, OC, C);
        for (size_t i = 0; i < sizeof VERSIONS / sizeof VERSIONS[0]; i++) {
            a.v = back.v = &VERSIONS[i];
            a.ops = back.ops = lab_ops_of(a.v->chapter);
            if (ld != OC && a.v->chapter < 4) continue;  // the eager GEMMs write rows of OC
            // v2 pads a width that is not a multiple of 8, into rows long enough
            if (OC % 8 != 0 && ld < (OC + 7) / 8 * 8 && a.v->chapter >= 4) continue;
            LabRow f = {"matmul_forward", a.v->name, shape, a.v->chapter, errors[i][0],
                        tolerance_of(a.v), lab_time_ms(lab, run_forward, &a),
                        (BT * C + (double)OC * C + BT * OC) * x, 2 * BT * C * OC};
            lab_report(lab, &f);
            LabRow b = {"matmul_backward", a.v->name, shape, a.v->chapter, errors[i][1],
                        tolerance_of(a.v), lab_time_ms(lab, run_backward, &back),
                        (2 * BT * OC + 2 * BT * C + 3.0 * OC * C) * x, 4 * BT * C * OC};
            lab_report(lab, &b);
        }
        free(inp), free(w), free(bias), free(dout), free(pre_in), free(bw);
        lab_free_buffers(lab);
    }
}
