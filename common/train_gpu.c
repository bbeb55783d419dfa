// train_gpu.c: see train_gpu.h.
#include "train_gpu.h"

#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_cpu.h"
#include "sampling.h"
#include "train_common.h"

// Applies the chapter's switches to the context every launcher reads.
static void apply_optimizations(GpuContext *ctx, const Optimizations *o) {
    ctx->tensor_cores = o->tensor_cores;
}

// The host copy of the initial weights: a checkpoint's or GPT-2's init.
static int initial_params(const TrainOptions *opt, GPT2Config *cfg, float **params, char *err) {
    const char *path = opt->resume_from[0] ? opt->resume_from : opt->init_from;
    if (path[0]) {
        if (load_model_for_run(path, opt->T, cfg, params, err)) return -1;
        if (cfg->vocab_size != opt->model.vocab_size) {
            free(*params);
            return fail(err, "%s: the model's vocabulary (%d) differs from the data's (%d)", path,
                        cfg->vocab_size, opt->model.vocab_size);
        }
        return 0;
    }
    *cfg = opt->model;
    *params = xmalloc(gpt2_num_params(cfg) * sizeof(float));
    gpt2_init_params(cfg, *params, opt->seed);
    return 0;
}

static int restore_state(GpuTrainer *tr, char *err) {
    size_t n = tr->model.num_params;
    float *m = xmalloc(n * sizeof(float)), *v = xmalloc(n * sizeof(float));
    TrainProgress p;
    int rc = load_state_for_run(tr->opt.resume_from, &tr->opt, &p, m, v, n, err);
    if (rc == 0) rc = dataloader_seek(&tr->train, p.data, err);
    if (rc == 0) {
        gpt2_gpu_upload(&tr->model, tr->model.m, m);
        gpt2_gpu_upload(&tr->model, tr->model.v, v);
        tr->step = p.step;
        tr->sampler.state = p.sampler_rng;
    }
    free(m);
    free(v);
    return rc;
}

int gpu_trainer_init(GpuTrainer *tr, const TrainOptions *opt, const Optimizations *optim,
                     char *err) {
    memset(tr, 0, sizeof(*tr));
    tr->opt = *opt;
    tr->optim = *optim;
    rng_seed(&tr->sampler, opt->seed ^ 0x5A5A5A5Aull);
    if (open_data(opt, &tr->train, &tr->val, &tr->has_val, err)) return -1;
    GPT2Config cfg;
    float *params;
    if (initial_params(opt, &cfg, &params, err)) {
        dataloader_free(&tr->train);
        if (tr->has_val) dataloader_free(&tr->val);
        return -1;
    }
    gpu_context_init(&tr->ctx, 0);
    apply_optimizations(&tr->ctx, optim);
    gpt2_gpu_init(&tr->model, &tr->ctx, &cfg, params, opt->B, opt->T);
    free(params);
    for (int i = 0; i < 4; i++) CUDA_CHECK(cudaEventCreate(&tr->events[i]));
    tr->inputs = xmalloc((size_t)opt->B * opt->T * sizeof(int32_t));
    tr->targets = xmalloc((size_t)opt->B * opt->T * sizeof(int32_t));
    if (opt->resume_from[0] && restore_state(tr, err)) {
        gpu_trainer_free(tr);
        return -1;
    }
    return 0;
}

void gpu_trainer_free(GpuTrainer *tr) {
    for (int i = 0; i < 4; i++)
        if (tr->events[i]) CUDA_CHECK(cudaEventDestroy(tr->events[i]));
    gpt2_gpu_free(&tr->model);
    gpu_context_free(&tr->ctx);
    dataloader_free(&tr->train);
    if (tr->has_val) dataloader_free(&tr->val);
    free(tr->inputs);
    free(tr->targets);
    memset(tr, 0, sizeof(*tr));
}

static double event_ms(cudaEvent_t a, cudaEvent_t b) {
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

int gpu_trainer_step(GpuTrainer *tr, GpuStepStats *s, char *err) {
    GpuContext *ctx = &tr->ctx;
    double start = now_ms();
    nvtxRangePushA("data");
    int rc = dataloader_next(&tr->train, tr->inputs, tr->targets, err);
    nvtxRangePop();
    if (rc) return -1;
    s->data_ms = now_ms() - start;

    // ANCHOR: training_step
    CUDA_CHECK(cudaEventRecord(tr->events[0], ctx->stream));
    if (gpt2_gpu_forward(&tr->model, tr->inputs, tr->targets, tr->opt.B, tr->opt.T, err))
        return -1;
    // Chapter 00 reads the loss back every step, as `loss.item()` does: the
    // host waits here for the whole forward pass.
    s->loss = gpt2_gpu_read_loss(&tr->model);
    CUDA_CHECK(cudaEventRecord(tr->events[1], ctx->stream));
    gpt2_gpu_backward(&tr->model);
    CUDA_CHECK(cudaEventRecord(tr->events[2], ctx->stream));
    s->lr = lr_at_step(&tr->opt.lr, tr->step);
    s->grad_norm = gpt2_gpu_update(&tr->model, s->lr, &tr->opt.adamw, tr->opt.grad_clip,
                                   tr->step + 1);
    CUDA_CHECK(cudaEventRecord(tr->events[3], ctx->stream));
    CUDA_CHECK(cudaEventSynchronize(tr->events[3]));
    // ANCHOR_END: training_step
    tr->step++;
    s->ms = now_ms() - start;
    s->forward_ms = event_ms(tr->events[0], tr->events[1]);
    s->backward_ms = event_ms(tr->events[1], tr->events[2]);
    s->optimizer_ms = event_ms(tr->events[2], tr->events[3]);
    return 0;
}

int gpu_trainer_val_loss(GpuTrainer *tr, float *loss, char *err) {
    if (!tr->has_val) return fail(err, "no validation data");
    dataloader_reset(&tr->val);
    double sum = 0;
    for (int i = 0; i < tr->opt.val_batches; i++) {
        if (dataloader_next(&tr->val, tr->inputs, tr->targets, err)) return -1;
        if (gpt2_gpu_forward(&tr->model, tr->inputs, tr->targets, tr->opt.B, tr->opt.T, err))
            return -1;
        sum += gpt2_gpu_read_loss(&tr->model);
    }
    *loss = (float)(sum / tr->opt.val_batches);
    return 0;
}

int gpu_trainer_save(GpuTrainer *tr, char *model_path, size_t cap, char *err) {
    GPT2Gpu *m = &tr->model;
    size_t n = m->num_params;
    float *params = xmalloc(n * sizeof(float)), *mom1 = xmalloc(n * sizeof(float)),
          *mom2 = xmalloc(n * sizeof(float));
    // The weights of record: the fp32 master weights in the bf16 build, so a
    // checkpoint is fp32 (version 3) whichever build wrote it.
    gpt2_gpu_get_params(m, params);
    gpt2_gpu_download(m, m->m, mom1);
    gpt2_gpu_download(m, m->v, mom2);
    TrainProgress p = {.step = tr->step, .data = dataloader_position(&tr->train),
                       .sampler_rng = tr->sampler.state, .B = tr->opt.B, .T = tr->opt.T};
    int rc = save_run(tr->opt.checkpoint_dir, &m->config, params, mom1, mom2, n, &p, model_path,
                      cap, err);
    free(params);
    free(mom1);
    free(mom2);
    return rc;
}

void gpu_trainer_sample(GpuTrainer *tr, int32_t *out, int n, int eot) {
    const GPT2Config *c = &tr->model.config;
    const int Vp = c->padded_vocab_size;
    float *probs = xmalloc((size_t)Vp * sizeof(float));
    char err[ERR_LEN];
    out[0] = eot;
    for (int t = 1; t <= n; t++) {
        // No KV cache: rerun the whole context, cropped to the model's window.
        int len = t < tr->opt.T ? t : tr->opt.T;
        if (gpt2_gpu_forward(&tr->model, out + t - len, NULL, 1, len, err)) die("%s", err);
        gpt2_gpu_download_floatx(tr->model.acts.probs + (size_t)(len - 1) * Vp, probs,
                                 (size_t)Vp);
        out[t] = sample_from_probs(probs, c->vocab_size, rng_uniform(&tr->sampler));
    }
    free(probs);
}
