// lab_optimizer.c: the optimizer's kernels over a tensor of all 124M's
// parameters at once: the gradient norm, and one AdamW step (with fp32
// master weights in the bf16 build, as the trainer runs it).
#include <math.h>
#include <stdlib.h>

#include "adamw.h"
#include "lab.h"
#include "optimizer.h"

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
    adamw_update_v1(&lab->ctx, a->params, a->master, a->grads, a->m, a->v, a->n, 6e-4f, &cfg, 1, 3);
}

static void grad_norm(Lab *lab, void *p) {
    Args *a = p;
    grad_norm_v1(&lab->ctx, a->norm, a->scratch, a->grads, a->n);
}

void lab_optimizer(Lab *lab) {
    if (!lab_wants(lab, "optimizer")) return;
    // The check: 100003 values, one step, against common/optimizer.c.
    const size_t n = 100003;
    float *params = lab_random_x(lab, n, -1, 1), *grads = lab_random_x(lab, n, -0.1f, 0.1f);
    float *m = lab_random_x(lab, n, -0.01f, 0.01f), *v = lab_random_x(lab, n, 1e-6f, 1e-4f);
    Args check = upload(lab, n, params, grads, m, v);
    float norm = grad_global_norm(grads, n);
    AdamWConfig cfg = adamw_default_config();
    adamw_update(params, grads, m, v, n, 6e-4f, &cfg, 1, 3);
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
    // written (and, with master weights, the floatX copy written).
    const double adamw_bytes = check.master ? tn * (x + 6 * 4.0 + x) : tn * (x + 6 * 4.0);
    LabRow a = {"adamw_update", "v1", "163M parameters", 0, lab_error(g_params, params, n), 1e-5,
                lab_time_ms(lab, adamw, &timed), adamw_bytes, 0};
    lab_report(lab, &a);
    LabRow g = {"grad_norm", "v1", "163M parameters", 0, lab_error(g_norm, &norm, 1), 1e-5,
                lab_time_ms(lab, grad_norm, &timed), tn * x, 0};
    lab_report(lab, &g);
    free(params), free(grads), free(m), free(v), free(g_norm), free(g_params), free(t);
    lab_free_buffers(lab);
}
