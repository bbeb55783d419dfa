// check_state.c: see check_state.h.
#define _POSIX_C_SOURCE 200809L  // stat, access
#include "gpu/check_state.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/check_cpu.h"
#include "files/checkpoint.h"
#include "util/compare.h"
#include "files/debug_state.h"
#include "train/exit_status.h"
#include "gpu/gpt2_gpu.h"
#include "util/tolerances.h"
#include "util/util.h"

// A file the check reads: there, a regular file (a directory or a pipe is
// not one), readable.
static int check_input_file(const char *path, char *err) {
    struct stat st;
    if (stat(path, &st) != 0) return fail(err, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return fail(err, "%s: is a directory, expected a file", path);
    if (!S_ISREG(st.st_mode)) return fail(err, "%s: not a regular file", path);
    if (access(path, R_OK) != 0) return fail(err, "%s: cannot read: %s", path, strerror(errno));
    return 0;
}

int check_state_files(const char *model_path, const char *state_path, char *err) {
    GPT2Config cfg;
    if (check_input_file(model_path, err) || checkpoint_read_config(model_path, &cfg, err))
        return -1;
    return check_input_file(state_path, err);
}

// One row of the report; returns 1 when the tensor is out of tolerance.
static int report(const char *name, Diff d, double tol) {
    double rel = d.max_ref > 0 ? d.max_diff / d.max_ref : d.max_diff;
    int bad = !(rel <= tol);
    printf("%-10s max|diff| %.3e  max|ref| %.3e  relative %.3e  (tolerance %.0e) %s\n", name,
           d.max_diff, d.max_ref, rel, tol, bad ? "FAIL" : "ok");
    return bad;
}

#ifdef PRECISION_BF16
// The bf16 build's tolerances (tolerances.h): values within a relative
// tolerance of their scale, gradients by their direction (cosine similarity),
// which is what the optimizer uses of them.
#define CHECK_TOL_LOGITS TOL_CHECK_LOGITS_BF16
#define CHECK_TOL_LOSS TOL_CHECK_LOSS_BF16

// A gradient's row: the largest difference for information; as the test,
// the cosine similarity with the reference (the direction) and the ratio of
// their norms (the size, which the cosine does not see: a gradient twice
// too large has cosine 1).
static int report_gradient(const char *name, const float *got, const float *ref, size_t n) {
    Diff d = diff_tensors(got, ref, n);
    double rel = d.max_ref > 0 ? d.max_diff / d.max_ref : d.max_diff;
    double cos = cosine_similarity(got, ref, n), ratio = norm_ratio(got, ref, n);
    int bad = !(cos >= TOL_CHECK_GRAD_COSINE_BF16) || !(fabs(ratio - 1) <= TOL_GRAD_NORM_RATIO);
    printf("%-10s max|diff| %.3e  max|ref| %.3e  relative %.3e  cosine %.6f (at least %.3f)  "
           "norm ratio %.5f (1 +- %.2f) %s\n",
           name, d.max_diff, d.max_ref, rel, cos, TOL_CHECK_GRAD_COSINE_BF16, ratio,
           TOL_GRAD_NORM_RATIO, bad ? "FAIL" : "ok");
    return bad;
}
#else
#define CHECK_TOL_LOGITS TOL_CHECK_LOGITS_FP32
#define CHECK_TOL_LOSS TOL_CHECK_LOSS_FP32

static int report_gradient(const char *name, const float *got, const float *ref, size_t n) {
    return report(name, diff_tensors(got, ref, n), TOL_CHECK_GRADS_FP32);
}
#endif

int check_state_run(const char *model_path, const char *state_path, const Optimizations *optim) {
    char err[ERR_LEN];
    GPT2Config cfg;
    float *params;
    DebugState ds;
    if (check_files_read(model_path, state_path, &cfg, &params, &ds, err)) return bad_input(err);
    printf("check: %s + %s: L=%d H=%d C=%d V=%d (padded %d) %s, B=%d T=%d\n", model_path,
           state_path, cfg.num_layers, cfg.num_heads, cfg.channels, cfg.vocab_size,
           cfg.padded_vocab_size, cfg.tied ? "tied" : "untied", ds.B, ds.T);
#ifdef PRECISION_BF16
    printf("check: the bf16 build: weights, activations and gradients in bf16\n");
#endif

    GpuContext ctx;
    gpu_context_init(&ctx, GPU_FIRST_DEVICE);
    GPT2Gpu model;
    const RunPlan plan = run_plan_for_model(optim, cfg.padded_vocab_size);
    gpt2_gpu_init(&model, &ctx, &cfg, params, ds.B, ds.T, &plan);
    // Logits from a GPT2_LOSS pass: a GPT2_TRAIN one may overwrite them with
    // their gradient (chapter 04's fused classifier). Ours keep V of each row.
    if (gpt2_gpu_forward_tokens(&model, ds.x, ds.y, ds.B, ds.T, GPT2_LOSS, err))
        die("%s: %s", state_path, err);
    const size_t BT = (size_t)ds.B * ds.T, V = cfg.vocab_size;
    float *ours = xmalloc(BT * V * sizeof(float));
    gpt2_gpu_download_logits(&model, 0, BT, (int)V, ours);
    if (gpt2_gpu_forward_tokens(&model, ds.x, ds.y, ds.B, ds.T, GPT2_TRAIN, err))
        die("%s: %s", state_path, err);
    float loss = gpt2_gpu_read_loss(&model);
    gpt2_gpu_backward(&model);

    int bad = report("logits", diff_tensors(ours, ds.logits, BT * V), CHECK_TOL_LOGITS);
    bad |= report("loss", diff_tensors(&loss, &ds.loss, 1), CHECK_TOL_LOSS);
    printf("           ours %.6f, reference %.6f\n", loss, ds.loss);

    // Gradients, tensor by tensor, the real rows only. The state's layout is
    // the model's own (llm.c's: wte, and an untied lm_head, padded to Vp
    // rows), so both buffers have each tensor at the same offset; the
    // padding rows, which no token reaches, are not compared.
    float *grads = xmalloc(model.num_params * sizeof(float));
    gpt2_gpu_download_floatx(&model, model.grads, grads, model.num_params);
    size_t sizes[NUM_PARAM_TENSORS], real[NUM_PARAM_TENSORS], offset = 0;
    debug_grad_sizes(&cfg, sizes);
    debug_grad_real_sizes(&cfg, real);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (sizes[t] == 0) continue;
        bad |= report_gradient(gpt2_param_names[t], grads + offset, ds.grads + offset, real[t]);
        offset += sizes[t];
    }
    printf("check: %s\n", bad ? "FAILED" : "passed");
    free(grads);
    free(ours);
    free(params);
    debug_state_free(&ds);
    gpt2_gpu_free(&model);
    gpu_context_free(&ctx);
    return bad;
}
