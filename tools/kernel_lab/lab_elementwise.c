// lab_elementwise.c: the one-pass kernels over the MLP's and the residual
// stream's tensors: GELU and the residual add, forward and backward. Each
// is pure bandwidth: its time against the bytes it must move.
//
// Every kernel is seen here as out = f(out, a, b) over n values, with its
// CPU reference in the same form; the wrappers below say what out, a and b
// are for each.
#include <stdlib.h>
#include <string.h>

#include "gelu.h"
#include "model/gpt2_cpu.h"
#include "lab.h"
#include "residual.h"

typedef void (*Run)(const GpuContext *ctx, floatX *out, const floatX *a, const floatX *b,
                    size_t n);
typedef void (*Reference)(float *out, const float *a, const float *b, size_t n);

// gelu: out = gelu(a)
static void gelu_fwd(const GpuContext *ctx, floatX *out, const floatX *a, const floatX *b,
                     size_t n) {
    (void)b;
    gelu_forward_v1(ctx, out, a, n);
}
static void gelu_fwd_cpu(float *out, const float *a, const float *b, size_t n) {
    (void)b;
    cpu_gelu_forward(out, a, n);
}
// gelu backward: out (dinp) += gelu'(a) * b (dout)
static void gelu_bwd(const GpuContext *ctx, floatX *out, const floatX *a, const floatX *b,
                     size_t n) {
    gelu_backward_v1(ctx, out, a, b, n);
}
static void gelu_bwd_cpu(float *out, const float *a, const float *b, size_t n) {
    cpu_gelu_backward(out, a, b, n);
}
// in place: out (dout on the way in) = gelu'(a) * out
static void gelu_bwd_inplace(const GpuContext *ctx, floatX *out, const floatX *a,
                             const floatX *b, size_t n) {
    (void)b;
    gelu_backward_inplace_v1(ctx, out, a, n);
}
static void gelu_bwd_inplace_cpu(float *out, const float *a, const float *b, size_t n) {
    (void)b;
    float *dout = xmalloc(n * sizeof(float));
    memcpy(dout, out, n * sizeof(float));
    memset(out, 0, n * sizeof(float));
    cpu_gelu_backward(out, a, dout, n);
    free(dout);
}
// residual: out = a + b
static void residual_fwd(const GpuContext *ctx, floatX *out, const floatX *a, const floatX *b,
                         size_t n) {
    residual_forward_v1(ctx, out, a, b, n);
}
static void residual_fwd_cpu(float *out, const float *a, const float *b, size_t n) {
    cpu_residual_forward(out, a, b, n);
}
// residual backward: out (da) += b (dout), and a (db) += b too
static void residual_bwd(const GpuContext *ctx, floatX *out, const floatX *a, const floatX *b,
                         size_t n) {
    residual_backward_v1(ctx, out, (floatX *)a, b, n);
}
static void residual_bwd_cpu(float *out, const float *a, const float *b, size_t n) {
    float *db = xmalloc(n * sizeof(float));
    memcpy(db, a, n * sizeof(float));
    cpu_residual_backward(out, db, b, n);
    free(db);
}

static const struct {
    const char *family, *version;
    int chapter;
    Run run;
    Reference reference;
    int width;    // 1: (B,T,C) values, 4: (B,T,4C)
    int tensors;  // tensors of that size read plus written per call
} KERNELS[] = {
    {"gelu_forward", "v1", 0, gelu_fwd, gelu_fwd_cpu, 4, 2},
    {"gelu_backward", "v1", 0, gelu_bwd, gelu_bwd_cpu, 4, 4},
    {"gelu_backward", "v1 in place", 0, gelu_bwd_inplace, gelu_bwd_inplace_cpu, 4, 3},
    {"residual_forward", "v1", 0, residual_fwd, residual_fwd_cpu, 1, 3},
    {"residual_backward", "v1", 0, residual_bwd, residual_bwd_cpu, 1, 5},
};

typedef struct {
    Run run;
    floatX *out, *a, *b;
    size_t n;
} Args;

static void run_kernel(Lab *lab, void *p) {
    Args *a = p;
    a->run(&lab->ctx, a->out, a->a, a->b, a->n);
}

void lab_elementwise(Lab *lab) {
    for (size_t i = 0; i < sizeof KERNELS / sizeof KERNELS[0]; i++) {
        if (!lab_wants(lab, KERNELS[i].family)) continue;
        const int width = KERNELS[i].width;
        // The check on 2 x 64 x 768 (x4) values.
        const size_t n = (size_t)2 * 64 * LAB_C * width;
        float *a = lab_random_x(lab, n, -3, 3), *b = lab_random_x(lab, n, -1, 1);
        float *out = lab_random_x(lab, n, -1, 1), *want = xmalloc(n * sizeof(float));
        memcpy(want, out, n * sizeof(float));
        KERNELS[i].reference(want, a, b, n);
        Args check = {KERNELS[i].run, lab_upload_x(lab, out, n), lab_upload_x(lab, a, n),
                      lab_upload_x(lab, b, n), n};
        run_kernel(lab, &check);
        float *got = lab_download_x(lab, check.out, n);
        // Timed at 124M's shape.
        const size_t tn = (size_t)LAB_B * LAB_T * LAB_C * width;
        float *ta = lab_random_x(lab, tn, -3, 3), *tb = lab_random_x(lab, tn, -1, 1);
        Args timed = {KERNELS[i].run, lab_upload_x(lab, tb, tn), lab_upload_x(lab, ta, tn),
                      lab_upload_x(lab, tb, tn), tn};
        LabRow r = {KERNELS[i].family, KERNELS[i].version,
                    width == 4 ? "(B,T,4C) 16x1024x3072" : "(B,T,C) 16x1024x768",
                    KERNELS[i].chapter, lab_error(got, want, n), lab_tolerance(),
                    lab_time_ms(lab, run_kernel, &timed),
                    (double)KERNELS[i].tensors * tn * sizeof(floatX), 0};
        lab_report(lab, &r);
        free(a), free(b), free(out), free(want), free(got), free(ta), free(tb);
        lab_free_buffers(lab);
    }
}
