// train_gpu.c: see train_gpu.h.
#include "train_gpu.h"

#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_cpu.h"
#include "sampling.h"
#include "train_common.h"

// Applies the chapter's switches to the context every launcher reads.
static void apply_optimizations(GpuContext *ctx, const Optimizations *o) {
    ctx->tensor_cores = o->tensor_cores;
    // Chapter 03: launches are still checked (cudaGetLastError), but the
    // host no longer waits for each kernel to finish.
    ctx->sync_after_launch = !o->sync_avoidance;
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

// ---- chapter 03's buffers, all made before the first step ---------------------
// Nothing is allocated or freed inside a step: cudaMallocHost, cudaFreeHost
// and cudaFree wait for the device, and so, at times, does cudaMalloc.

static void *pinned_alloc(size_t bytes) {
    void *p;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
}

static void async_init(GpuTrainer *tr) {
    const size_t BT = (size_t)tr->opt.B * tr->opt.T;
    for (int b = 0; b < 2; b++) {
        UploadBuffer *u = &tr->upload[b];
        u->inputs = pinned_alloc(BT * sizeof(int32_t));
        u->targets = pinned_alloc(BT * sizeof(int32_t));
        encoder_buckets_init_pinned(&u->buckets, (int)BT, tr->model.config.vocab_size);
        // Only waited for, never timed: cheaper to record.
        CUDA_CHECK(cudaEventCreateWithFlags(&u->copied, cudaEventDisableTiming));
    }
    tr->step_scalars = gpu_malloc(2 * GPU_MAX_PENDING_STEPS * sizeof(float),
                                  "per-step losses and gradient norms");
    loss_readback_init(&tr->readback, 2 * GPU_MAX_PENDING_STEPS);
    for (int i = 0; i < GPU_MAX_PENDING_STEPS; i++)
        for (int e = 0; e < 4; e++) CUDA_CHECK(cudaEventCreate(&tr->step_events[i][e]));
}

static void async_free(GpuTrainer *tr) {
    // A step still queued may be reading the buffers: let it finish first.
    gpu_stream_sync(&tr->ctx, "the last steps, before freeing their buffers");
    for (int b = 0; b < 2; b++) {
        UploadBuffer *u = &tr->upload[b];
        if (u->inputs) CUDA_CHECK(cudaFreeHost(u->inputs));
        if (u->targets) CUDA_CHECK(cudaFreeHost(u->targets));
        if (u->buckets.packed) encoder_buckets_free(&u->buckets);
        if (u->copied) CUDA_CHECK(cudaEventDestroy(u->copied));
    }
    gpu_free(tr->step_scalars);
    if (tr->readback.host) loss_readback_free(&tr->readback);
    for (int i = 0; i < GPU_MAX_PENDING_STEPS; i++)
        for (int e = 0; e < 4; e++)
            if (tr->step_events[i][e]) CUDA_CHECK(cudaEventDestroy(tr->step_events[i][e]));
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
    if (optim->sync_avoidance) async_init(tr);
    if (opt->resume_from[0] && restore_state(tr, err)) {
        gpu_trainer_free(tr);
        return -1;
    }
    return 0;
}

void gpu_trainer_free(GpuTrainer *tr) {
    if (tr->optim.sync_avoidance) async_free(tr);
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

// Chapters 00-02 keep the numbers of the last GPU_MAX_PENDING_STEPS steps
// for gpu_trainer_read_stats, dropping the oldest.
static void keep_stats(GpuTrainer *tr, const GpuStepStats *s) {
    if (tr->pending == GPU_MAX_PENDING_STEPS) {
        memmove(tr->pending_stats, tr->pending_stats + 1,
                (GPU_MAX_PENDING_STEPS - 1) * sizeof *s);
        tr->pending--;
    }
    tr->pending_stats[tr->pending++] = *s;
}

// Chapters 00-02: the host waits for the device several times per step.
static int step_waiting(GpuTrainer *tr, GpuStepStats *s, char *err) {
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
    gpu_event_sync(tr->events[3], "the end of the step");
    // ANCHOR_END: training_step
    tr->step++;
    s->step = tr->step;
    s->ms = now_ms() - start;
    s->forward_ms = event_ms(tr->events[0], tr->events[1]);
    s->backward_ms = event_ms(tr->events[1], tr->events[2]);
    s->optimizer_ms = event_ms(tr->events[2], tr->events[3]);
    keep_stats(tr, s);
    return 0;
}

// Chapter 03: the same step, queued on the device without one wait.
//
// The batch goes up from pinned host memory with cudaMemcpyAsync, and that
// is the subtle part. From pageable memory (chapters 00-02) the driver
// copies the bytes into a staging buffer of its own before the call returns,
// so the host may overwrite its buffer at once. From pinned memory nothing
// is copied when the call returns: the copy is only queued, and the GPU's
// copy engine reads the host buffer later, when the stream reaches the copy,
// which can be a whole step or two later, since the host now runs ahead of
// the device. Until then the buffer still belongs to the copy. If the host
// loaded the next batch into it, the step already queued would train on the
// wrong tokens: no error, no crash, only a different model, which chapter
// 03's bit-identity test with chapter 02 would catch.
//
// Hence two buffers, used in turn, and an event recorded on the stream right
// after the copies that read each one. Before writing into a buffer, the host
// waits for its event: the copies of two steps ago must have been done. That
// wait costs nothing in the steady state: when the host is two steps ahead,
// the device still has a whole step queued, so it never runs dry while the
// host waits. With one buffer the host could not prepare step k+1's batch
// until step k's copy had run; with two it can, while the device is still
// busy with step k-1.
static UploadBuffer *free_upload_buffer(GpuTrainer *tr) {
    UploadBuffer *u = &tr->upload[tr->step % 2];
    // ANCHOR: wait_for_buffer
    // Done, or never recorded: the buffer is free. Else the host is two steps
    // ahead of the device, and waits (or an earlier kernel failed: the wait
    // reports it).
    if (cudaEventQuery(u->copied) != cudaSuccess) gpu_event_sync(u->copied, "a free upload buffer");
    // ANCHOR_END: wait_for_buffer
    return u;
}

static int step_without_waiting(GpuTrainer *tr, GpuStepStats *s, char *err) {
    GpuContext *ctx = &tr->ctx;
    GPT2Gpu *model = &tr->model;
    const int k = tr->pending;  // this step's slot among the pending ones
    if (k == GPU_MAX_PENDING_STEPS)
        return fail(err, "%d steps are pending: gpu_trainer_read_stats must read them first",
                    GPU_MAX_PENDING_STEPS);
    UploadBuffer *u = free_upload_buffer(tr);  // may wait: see above
    double start = now_ms();
    if (k == 0) tr->interval_start = start;
    nvtxRangePushA("data");
    int rc = dataloader_next(&tr->train, u->inputs, u->targets, err);
    nvtxRangePop();
    if (rc) return -1;
    *s = (GpuStepStats){.step = tr->step + 1, .lr = lr_at_step(&tr->opt.lr, tr->step),
                        .data_ms = now_ms() - start, .loss = NAN, .grad_norm = NAN,
                        .ms = NAN, .forward_ms = NAN, .backward_ms = NAN, .optimizer_ms = NAN};

    cudaEvent_t *ev = tr->step_events[k];
    float *loss = tr->step_scalars + 2 * k, *norm = loss + 1;
    // ANCHOR: training_step_async
    CUDA_CHECK(cudaEventRecord(ev[0], ctx->stream));
    if (gpt2_gpu_upload_batch_async(model, u->inputs, u->targets, &u->buckets, tr->opt.B,
                                    tr->opt.T, err))
        return -1;
    CUDA_CHECK(cudaEventRecord(u->copied, ctx->stream));  // u is free again once this is done
    // The loss stays on the device, in this step's slot, until the log line.
    gpt2_gpu_forward_uploaded(model, 1, loss);
    CUDA_CHECK(cudaEventRecord(ev[1], ctx->stream));
    gpt2_gpu_backward(model);
    CUDA_CHECK(cudaEventRecord(ev[2], ctx->stream));
    gpt2_gpu_update_async(model, s->lr, &tr->opt.adamw, tr->opt.grad_clip, tr->step + 1, norm);
    CUDA_CHECK(cudaEventRecord(ev[3], ctx->stream));
    // ANCHOR_END: training_step_async
    tr->step++;
    tr->pending_stats[tr->pending++] = *s;
    return 0;
}

int gpu_trainer_step(GpuTrainer *tr, GpuStepStats *s, char *err) {
    // ANCHOR: step_branch
    // Chapter 03's switch: the same step, queued without waiting.
    if (tr->optim.sync_avoidance) return step_without_waiting(tr, s, err);
    return step_waiting(tr, s, err);
    // ANCHOR_END: step_branch
}

int gpu_trainer_pending(const GpuTrainer *tr) { return tr->pending; }

int gpu_trainer_read_stats(GpuTrainer *tr, GpuStepStats *out) {
    const int n = tr->pending;
    if (n == 0) return 0;
    memcpy(out, tr->pending_stats, (size_t)n * sizeof *out);
    tr->pending = 0;
    if (!tr->optim.sync_avoidance) return n;
    // ANCHOR: read_stats_async
    // The one wait: for the copy of the pending steps' losses and norms,
    // queued after all of their work.
    float values[2 * GPU_MAX_PENDING_STEPS];
    loss_readback_start(&tr->readback, tr->step_scalars, 2 * n, tr->ctx.stream);
    loss_readback_finish(&tr->readback, values);
    double ms = (now_ms() - tr->interval_start) / n;
    for (int i = 0; i < n; i++) {
        cudaEvent_t *ev = tr->step_events[i];
        out[i].loss = values[2 * i];
        out[i].grad_norm = values[2 * i + 1];
        out[i].ms = ms;
        out[i].forward_ms = event_ms(ev[0], ev[1]);
        out[i].backward_ms = event_ms(ev[1], ev[2]);
        out[i].optimizer_ms = event_ms(ev[2], ev[3]);
    }
    // ANCHOR_END: read_stats_async
    return n;
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
