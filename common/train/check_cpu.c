// check_cpu.c: see check_cpu.h.
#include "train/check_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "files/checkpoint.h"
#include "train/exit_status.h"
#include "model/gpt2_cpu.h"
#include "util/tolerances.h"
#include "util/util.h"

// max|got - ref| / max|ref| over n values: the relative largest difference
// (a NaN anywhere makes it infinite).
static double relative_diff(const float *got, const float *ref, size_t n, double *max_diff,
                            double *max_ref) {
    *max_diff = 0, *max_ref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= *max_diff)) *max_diff = isnan(d) ? INFINITY : d;
        if (fabs(ref[i]) > *max_ref) *max_ref = fabs(ref[i]);
    }
    return *max_ref > 0 ? *max_diff / *max_ref : *max_diff;
}

// One line of the report; returns 1 when out of tolerance.
static int report(const char *name, const float *got, const float *ref, size_t n, double tol) {
    double max_diff, max_ref;
    double rel = relative_diff(got, ref, n, &max_diff, &max_ref);
    int bad = !(rel <= tol);
    printf("%-10s max|diff| %.3e  max|ref| %.3e  relative %.3e  (tolerance %.0e) %s\n", name,
           max_diff, max_ref, rel, tol, bad ? "FAIL" : "ok");
    return bad;
}

// Our logits are (B,T,Vp); the state's are (B,T,V).
static int report_logits(const GPT2Cpu *model, const DebugState *ds) {
    const GPT2Config *c = &model->config;
    size_t BT = (size_t)ds->B * ds->T, V = c->vocab_size, Vp = c->padded_vocab_size;
    float *ours = xmalloc(BT * V * sizeof(float));
    for (size_t i = 0; i < BT; i++)
        for (size_t j = 0; j < V; j++) ours[i * V + j] = model->acts.logits[i * Vp + j];
    int bad = report("logits", ours, ds->logits, BT * V, TOL_CHECK_LOGITS_FP32);
    free(ours);
    return bad;
}

// Tensor by tensor, the real rows only: both buffers are in the checkpoint's layout.
static int report_gradients(const GPT2Cpu *model, const DebugState *ds) {
    size_t sizes[NUM_PARAM_TENSORS], real[NUM_PARAM_TENSORS], offset = 0;
    debug_grad_sizes(&model->config, sizes);
    debug_grad_real_sizes(&model->config, real);
    int bad = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (sizes[t] == 0) continue;
        bad |= report(gpt2_param_names[t], model->grads + offset, ds->grads + offset, real[t],
                      TOL_CHECK_GRADS_FP32);
        offset += sizes[t];
    }
    return bad;
}

int check_files_read(const char *model_path, const char *state_path, GPT2Config *cfg,
                     float **params, DebugState *ds, char *err) {
    if (checkpoint_read(model_path, cfg, params, err)) return -1;
    if (debug_state_read(state_path, cfg, ds, err)) {
        free(*params);
        *params = NULL;
        return -1;
    }
    return 0;
}

int check_state_cpu(const char *model_path, const char *state_path) {
    char err[ERR_LEN];
    GPT2Config cfg;
    float *params;
    DebugState ds;
    if (check_files_read(model_path, state_path, &cfg, &params, &ds, err)) return bad_input(err);
    printf("check: %s + %s: L=%d H=%d C=%d V=%d (padded %d) %s, B=%d T=%d, on the CPU (fp32)\n",
           model_path, state_path, cfg.num_layers, cfg.num_heads, cfg.channels, cfg.vocab_size,
           cfg.padded_vocab_size, cfg.tied ? "tied" : "untied", ds.B, ds.T);
    GPT2Cpu model;
    gpt2_cpu_init(&model, &cfg);
    for (size_t i = 0; i < model.num_params; i++) model.params[i] = params[i];
    gpt2_cpu_forward(&model, ds.x, ds.y, ds.B, ds.T);
    gpt2_cpu_zero_grad(&model);
    gpt2_cpu_backward(&model);

    int bad = report_logits(&model, &ds);
    bad |= report("loss", &model.mean_loss, &ds.loss, 1, TOL_CHECK_LOSS_FP32);
    printf("           ours %.6f, reference %.6f\n", model.mean_loss, ds.loss);
    bad |= report_gradients(&model, &ds);
    printf("check: %s\n", bad ? "FAILED" : "passed");
    gpt2_cpu_free(&model);
    debug_state_free(&ds);
    free(params);
    return bad;
}
