// lab_optimizer.c: the optimizer's kernels over all of 124M's parameters:
// the gradient norm, and one AdamW step (with fp32 master weights in the
// bf16 build, as the trainer runs it): v1 over one tensor of every
// parameter at once; then the update as the trainer makes it over the 16
// tensors of the tied model, chapter 03-08's (the clip factor, the scaling,
// v1 once per tensor) against chapter 09's (the step's values, one fused
// launch).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adamw.h"
#include "train/chapters.h"
#include "model/gpt2_config.h"
#include "lab.h"
#include "optim/optimizer.h"

// The step the lab times and checks: step 3 at the peak learning rate.
#define LAB_STEP 3
#define LAB_LR 6e-4f

typedef struct {
    size_t n;
    floatX *params, *grads;
    float *master, *m, *v, *norm, *scratch;
} Args;

static Args upload(Lab *lab, size_t n, const float *params, const float *grads, const float *m,
                   const float *v) {
    Args a = {.n = n, .params = lab_upload_x(lab, params, n), .grads = lab_upload_x(lab, grads, n),
              .master = NULL, .m = lab_upload_f32(lab, m, n), .v = lab_upload_f32(lab, v, n),
              .norm = lab_alloc(lab, sizeof(float)),
              .scratch = lab_alloc(lab, GRAD_NORM_MAX_BLOCKS * sizeof(float))};
#ifdef PRECISION_BF16
    a.master = lab_upload_f32(lab, params, n);
#endif
    return a;
}

static void adamw(Lab *lab, void *p) {
    Args *a = p;
    AdamWConfig cfg = adamw_default_config();
    adamw_update_v1(&lab->ctx, a->params, a->master, a->grads, a->m, a->v, a->n, LAB_LR, &cfg, 1,
                    LAB_STEP);
}

static void grad_norm(Lab *lab, void *p) {
    Args *a = p;
    grad_norm_v1(&lab->ctx, a->norm, a->scratch, a->grads, a->n);
}

// ---- the update over a model's tensors -------------------------------------------

// Flat buffers cut into tensors, as the trainer's: sizes (0: absent) and
// decay flags, the fused kernel's table, and the device's clipping state.
typedef struct {
    Args a;
    int count;
    size_t sizes[NUM_PARAM_TENSORS];
    int decay[NUM_PARAM_TENSORS];
    AdamWTensors table;
    AdamWStep *step;
    float *factor;   // chapter 03's clip factor
    float max_norm;  // a.norm holds the norm it is compared with
} Layout;

static Layout layout(Lab *lab, Args a, const size_t *sizes, const int *decay, int count,
                     float max_norm) {
    Layout l = {.a = a, .count = count, .max_norm = max_norm};
    memcpy(l.sizes, sizes, count * sizeof sizes[0]);
    memcpy(l.decay, decay, count * sizeof decay[0]);
    adamw_tensors_v2(&l.table, sizes, decay, count);
    l.step = lab_alloc(lab, sizeof(AdamWStep));
    l.factor = lab_alloc(lab, sizeof(float));
    return l;
}

// Chapters 03-08: the clip factor and the scaling (which returns at once
// when there is nothing to clip), then v1 once per non-empty tensor.
static void adamw_per_tensor(Lab *lab, void *p) {
    Layout *l = p;
    Args *a = &l->a;
    AdamWConfig cfg = adamw_default_config();
    grad_clip_factor_v1(&lab->ctx, l->factor, a->norm, l->max_norm);
    scale_by_device_factor_v1(&lab->ctx, a->grads, a->n, l->factor);
    size_t offset = 0;
    for (int i = 0; i < l->count; offset += l->sizes[i], i++) {
        if (l->sizes[i] == 0) continue;
        adamw_update_v1(&lab->ctx, a->params + offset, a->master ? a->master + offset : NULL,
                        a->grads + offset, a->m + offset, a->v + offset, l->sizes[i], LAB_LR,
                        &cfg, l->decay[i], LAB_STEP);
    }
}

// Chapter 09: the step's values, then one launch for every tensor.
static void adamw_fused(Lab *lab, void *p) {
    Layout *l = p;
    Args *a = &l->a;
    AdamWConfig cfg = adamw_default_config();
    adamw_begin_step_v2(&lab->ctx, l->step, a->norm, l->max_norm, LAB_STEP, LAB_LR, &cfg);
    adamw_fused_v2(&lab->ctx, &l->table, a->params, a->master, a->grads, a->m, a->v, l->step,
                   &cfg, 0);
}

// The weights of record after one call of `run` over a check layout of
// params, grads, m and v (n values each), against common/optim/optimizer.c's
// adamw_update over each tensor. max_norm 0: no clipping.
static double check_layout(Lab *lab, void (*run)(Lab *, void *), const float *params,
                           const float *grads, const float *m, const float *v, size_t n) {
    const size_t sizes[] = {60000, 0, 3, 40000};  // with an empty one, and a short one
    const int decay[] = {1, 1, 0, 1};
    const int count = (int)(sizeof sizes / sizeof sizes[0]);
    Layout l = layout(lab, upload(lab, n, params, grads, m, v), sizes, decay, count, 0.0f);
    float *want = xmalloc(n * sizeof(float)), *wm = xmalloc(n * sizeof(float));
    float *wv = xmalloc(n * sizeof(float));
    memcpy(want, params, n * sizeof(float));
    memcpy(wm, m, n * sizeof(float));
    memcpy(wv, v, n * sizeof(float));
    AdamWConfig cfg = adamw_default_config();
    size_t offset = 0;
    for (int i = 0; i < count; offset += sizes[i], i++)
        adamw_update(want + offset, grads + offset, wm + offset, wv + offset, sizes[i], LAB_LR,
                     &cfg, decay[i], LAB_STEP);
    grad_norm(lab, &l.a);
    run(lab, &l);
    float *got = l.a.master ? lab_download_f32(lab, l.a.master, n)
                            : lab_download_x(lab, l.a.params, n);
    double error = lab_error(got, want, n);
    free(want), free(wm), free(wv), free(got);
    return error;
}

// The tensors of GPT-2 124M as chapter 09 shapes it: the vocabulary padded
// to 50304 rows and lm_head tied to wte (its size 0), 16 tensors.
static void sizes_124m_tied(size_t sizes[NUM_PARAM_TENSORS], int decay[NUM_PARAM_TENSORS]) {
    GPT2Config cfg = gpt2_config_124m();
    Optimizations o = chapter_optimizations(9);
    apply_model_switches(&o, &cfg);
    gpt2_param_sizes(&cfg, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) decay[i] = gpt2_param_is_decayed(i);
}

static void lab_update_rows(Lab *lab, const float *params, const float *grads, const float *m,
                            const float *v, size_t check_n, double adamw_bytes_per_value) {
    const double per_tensor_error = check_layout(lab, adamw_per_tensor, params, grads, m, v, check_n);
    const double fused_error = check_layout(lab, adamw_fused, params, grads, m, v, check_n);
    size_t sizes[NUM_PARAM_TENSORS];
    int decay[NUM_PARAM_TENSORS];
    sizes_124m_tied(sizes, decay);
    size_t n = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) n += sizes[i];
    // Positive second moments, as in training (a negative one makes NaNs,
    // which may take the slow paths of the division and the square root).
    float *t = lab_random_x(lab, n, -0.1f, 0.1f), *tv = lab_random_x(lab, n, 1e-8f, 1e-4f);
    // The norm below max_norm: no clipping, the usual step (chapter 03's
    // scaling kernel returns at once; chapter 09 reads its grads unscaled).
    Layout timed = layout(lab, upload(lab, n, t, t, t, tv), sizes, decay, NUM_PARAM_TENSORS, 1.0f);
    const float norm = 0.5f;
    gpu_memcpy_sync(&lab->ctx, timed.a.norm, &norm, sizeof norm, cudaMemcpyHostToDevice);
    const double bytes = n * adamw_bytes_per_value;
    LabRow a = {"adamw_update", "v1 per tensor", "124M tied, 16 tensors", 3, per_tensor_error,
                1e-5, lab_time_ms(lab, adamw_per_tensor, &timed), bytes, 0};
    lab_report(lab, &a);
    LabRow f = {"adamw_update", "v2 fused", "124M tied, 16 tensors", 9, fused_error, 1e-5,
                lab_time_ms(lab, adamw_fused, &timed), bytes, 0};
    lab_report(lab, &f);
    free(t), free(tv);
}

void lab_optimizer(Lab *lab) {
    if (!lab_wants(lab, "optimizer")) return;
    // The check: 100003 values, one step, against common/optim/optimizer.c.
    const size_t n = 100003;
    float *params = lab_random_x(lab, n, -1, 1), *grads = lab_random_x(lab, n, -0.1f, 0.1f);
    float *m = lab_random_x(lab, n, -0.01f, 0.01f), *v = lab_random_x(lab, n, 1e-6f, 1e-4f);
    Args check = upload(lab, n, params, grads, m, v);
    float norm = grad_global_norm(grads, n);
    AdamWConfig cfg = adamw_default_config();
    float *want = xmalloc(n * sizeof(float)), *wm = xmalloc(n * sizeof(float));
    float *wv = xmalloc(n * sizeof(float));
    memcpy(want, params, n * sizeof(float));
    memcpy(wm, m, n * sizeof(float));
    memcpy(wv, v, n * sizeof(float));
    adamw_update(want, grads, wm, wv, n, LAB_LR, &cfg, 1, LAB_STEP);
    grad_norm(lab, &check);
    adamw(lab, &check);
    float *g_norm = lab_download_f32(lab, check.norm, 1);
    float *g_params = check.master ? lab_download_f32(lab, check.master, n)
                                   : lab_download_x(lab, check.params, n);
    // Timed: every parameter of the untied 124M model, 163M values.
    const size_t tn = 163037184;
    float *t = lab_random_x(lab, tn, -0.1f, 0.1f);
    Args timed = upload(lab, tn, t, t, t, t);
    const double x = sizeof(floatX);
    // AdamW: the gradient read; m, v and the weights of record read and
    // written (and, with master weights, the floatX copy written): 28 bytes
    // a value in bf16 with master weights, and in fp32.
    const double adamw_bytes = check.master ? x + 6 * 4.0 + x : x + 6 * 4.0;
    LabRow a = {"adamw_update", "v1", "163M parameters", 0, lab_error(g_params, want, n), 1e-5,
                lab_time_ms(lab, adamw, &timed), tn * adamw_bytes, 0};
    lab_report(lab, &a);
    LabRow g = {"grad_norm", "v1", "163M parameters", 0, lab_error(g_norm, &norm, 1), 1e-5,
                lab_time_ms(lab, grad_norm, &timed), tn * x, 0};
    lab_report(lab, &g);
    free(t);
    lab_free_buffers(lab);
    lab_update_rows(lab, params, grads, m, v, n, adamw_bytes);
    free(params), free(grads), free(m), free(v), free(want), free(wm), free(wv), free(g_norm),
        free(g_params);
    lab_free_buffers(lab);
}
