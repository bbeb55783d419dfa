// lab_optimizer8bit.c: chapter 10's 8-bit AdamW (kernels/adamw8bit.h),
// checked against its CPU reference (common/optim/quantize8.h) and timed over
// the values chapter 10 quantizes: the four weight matrices of GPT-2 124M's
// 12 layers (qkv, attention projection, MLP up and down: 3 + 1 + 4 + 4 = 12
// times 768 x 768 each), 84,934,656 values, as one tensor.
#include <stdlib.h>
#include <string.h>

#include "adamw8bit.h"
#include "gpu/floatx_host.h"
#include "lab.h"
#include "optim/optimizer.h"
#include "optim/quantize8.h"

#define LAB8_STEP 3
#define LAB8_LR 6e-4f

typedef struct {
    size_t n;
    floatX *params, *grads;
    float *master, *m_absmax, *v_absmax, *clip_factor;
    uint8_t *m_q, *v_q;
} Args;

static uint8_t *upload_bytes(Lab *lab, const uint8_t *host, size_t n) {
    uint8_t *d = lab_alloc(lab, n);
    gpu_memcpy_sync(&lab->ctx, d, host, n, cudaMemcpyHostToDevice);
    return d;
}

// The device's copy of a state: weights (and, in the bf16 build, fp32
// master weights, as the trainer keeps them), gradients, the quantized
// moments and their scales, and a clip factor.
static Args upload(Lab *lab, size_t n, const float *params, const float *grads,
                   const uint8_t *m_q, const uint8_t *v_q, const float *m_absmax,
                   const float *v_absmax, float clip_factor) {
    const size_t blocks = q8_blocks(n);
    Args a = {.n = n,
              .params = lab_upload_x(lab, params, n),
              .grads = lab_upload_x(lab, grads, n),
              .master = NULL,
              .m_absmax = lab_upload_f32(lab, m_absmax, blocks),
              .v_absmax = lab_upload_f32(lab, v_absmax, blocks),
              .clip_factor = lab_upload_f32(lab, &clip_factor, 1),
              .m_q = upload_bytes(lab, m_q, n),
              .v_q = upload_bytes(lab, v_q, n)};
#ifdef PRECISION_BF16
    a.master = lab_upload_f32(lab, params, n);
#endif
    return a;
}

static void adamw8bit(Lab *lab, void *p) {
    Args *a = p;
    const AdamWConfig cfg = adamw_default_config();
    adamw8bit_update_v1(&lab->ctx, a->params, a->master, a->grads, a->m_q, a->v_q, a->m_absmax,
                        a->v_absmax, a->n, LAB8_LR, &cfg, 1, LAB8_STEP, a->clip_factor);
}

// Chapter 10's fused launch over the same values as one table entry, the
// step's values from device memory.
typedef struct {
    Args a;
    AdamWTensors table;
    AdamWStep *step;
} FusedArgs;

static void adamw8bit_fused(Lab *lab, void *p) {
    FusedArgs *f = p;
    const AdamWConfig cfg = adamw_default_config();
    adamw8bit_fused_v2(&lab->ctx, &f->table, f->a.params, f->a.master, f->a.grads, f->a.m_q,
                       f->a.v_q, f->a.m_absmax, f->a.v_absmax, f->step, &cfg, 0);
}

static uint8_t *random_bytes(Lab *lab, size_t n) {
    uint8_t *x = xmalloc(n);
    for (size_t i = 0; i < n; i++) x[i] = (uint8_t)rng_u32(&lab->rng);
    return x;
}

// Indices that differ, over n bytes.
static size_t mismatches(const uint8_t *a, const uint8_t *b, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += a[i] != b[i];
    return count;
}

void lab_optimizer8bit(Lab *lab) {
    if (!lab_wants(lab, "optimizer8bit")) return;
    // The check: 100003 values (a short last block), one step from a random
    // quantized state, the gradients clipped by a factor of 0.5, against
    // adamw8bit_update. The kernel computes the reference's bits
    // (adamw8bit.h), so the error is the weights' (relative to their scale)
    // plus the fraction of the moments' bytes that differ: 0 when it works.
    const size_t n = 100003, blocks = q8_blocks(n);
    float *params = lab_random_x(lab, n, -1, 1), *grads = lab_random_x(lab, n, -0.1f, 0.1f);
    float *m = lab_random_x(lab, n, -0.01f, 0.01f), *v = lab_random_x(lab, n, 0, 1e-4f);
    uint8_t *m_q = xmalloc(n), *v_q = xmalloc(n);
    float *m_absmax = xmalloc(blocks * sizeof(float)), *v_absmax = xmalloc(blocks * sizeof(float));
    q8_quantize(Q8_SIGNED, m, n, m_q, m_absmax);
    q8_quantize(Q8_UNSIGNED, v, n, v_q, v_absmax);
    const float clip = 0.5f;
    Args check = upload(lab, n, params, grads, m_q, v_q, m_absmax, v_absmax, clip);
    float *clipped = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) clipped[i] = round_to_floatx(grads[i] * clip);
    const AdamWConfig cfg = adamw_default_config();
    adamw8bit_update(params, clipped, m_q, v_q, m_absmax, v_absmax, n, LAB8_LR, &cfg, 1,
                     LAB8_STEP);
    if (!check.master)
        for (size_t i = 0; i < n; i++) params[i] = round_to_floatx(params[i]);
    adamw8bit(lab, &check);
    float *g_params = check.master ? lab_download_f32(lab, check.master, n)
                                   : lab_download_x(lab, check.params, n);
    uint8_t *g_m_q = xmalloc(n), *g_v_q = xmalloc(n);
    gpu_memcpy_sync(&lab->ctx, g_m_q, check.m_q, n, cudaMemcpyDeviceToHost);
    gpu_memcpy_sync(&lab->ctx, g_v_q, check.v_q, n, cudaMemcpyDeviceToHost);
    const size_t differ = mismatches(g_m_q, m_q, n) + mismatches(g_v_q, v_q, n);
    const double error = lab_error(g_params, params, n) + (double)differ / (2.0 * n);
    lab_free_buffers(lab);
    // Timed: the 48 matrices' values as one tensor, from random bytes and
    // scales (the time does not depend on the values: the search over the
    // map takes 8 steps whatever it looks for), no clipping (a factor of 1,
    // read from the device as the trainer passes it).
    const size_t tn = (size_t)12 * 12 * LAB_C * LAB_C, tblocks = q8_blocks(tn);
    float *t = lab_random_x(lab, tn, -0.1f, 0.1f);
    float *scales = lab_random_x(lab, tblocks, 1e-3f, 1e-2f);
    uint8_t *tm = random_bytes(lab, tn), *tv = random_bytes(lab, tn);
    Args timed = upload(lab, tn, t, t, tm, tv, scales, scales, 1.0f);
    // Per value: the gradient, m and v (one byte each) and the weights of
    // record read; m, v and the weights written (with master weights: the
    // fp32 master read and written, the floatX copy written); and the two
    // scales of each block read and written. 16 bytes per value in either
    // build, where fp32 moments take 28.
    const double x = sizeof(floatX);
    const double bytes = (double)tn * (x + 2 + 2 + (timed.master ? 4 + 4 + x : x + x)) +
                         (double)tblocks * 4 * sizeof(float);
    LabRow row = {"adamw8bit_update", "v1", "84.9M, 48 matrices", 10, error, 1e-6,
                  lab_time_ms(lab, adamw8bit, &timed), bytes, 0};
    lab_report(lab, &row);
    // v2: the fused launch (one table entry of all 48 matrices' values).
    FusedArgs fused = {.a = timed, .step = lab_alloc(lab, sizeof(AdamWStep))};
    const size_t sizes[1] = {tn};
    const int decay[1] = {1};
    adamw_table_build(&fused.table, sizes, decay, 1, Q8_BLOCK);
    const AdamWConfig cfg2 = adamw_default_config();
    const float half = 0.5f;  // the norm: below the clip of 1, no clipping
    adamw_begin_step_v2(&lab->ctx, fused.step, lab_upload_f32(lab, &half, 1), 1.0f, LAB8_STEP,
                        LAB8_LR, &cfg2);
    LabRow row2 = {"adamw8bit_update", "v2 fused", "84.9M, 48 matrices", 10, error, 1e-6,
                   lab_time_ms(lab, adamw8bit_fused, &fused), bytes, 0};
    lab_report(lab, &row2);
    free(params), free(grads), free(m), free(v), free(m_q), free(v_q), free(m_absmax);
    free(v_absmax), free(clipped), free(g_params), free(g_m_q), free(g_v_q), free(t), free(scales);
    free(tm), free(tv);
    lab_free_buffers(lab);
}
