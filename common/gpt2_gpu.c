// gpt2_gpu.c: see gpt2_gpu.h. The forward and backward passes read like the
// CPU reference's (gpt2_cpu_model.inc): the same layers in the same order,
// each one a launcher from kernels/. Built twice, for fp32 and for bf16
// (kernels/precision.h): the code is the same, the storage type floatX is
// not; the few lines that differ are under #ifdef PRECISION_BF16.
#include "gpt2_gpu.h"

#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adamw.h"
#include "attention.h"
#include "gelu.h"
#include "layernorm.h"
#include "matmul.h"
#include "residual.h"
#include "softmax_crossentropy.h"
#include "util.h"
#ifdef PRECISION_BF16
#include "bf16.h"
#endif

// ---- allocation ----------------------------------------------------------------

static float *alloc_floats(GPT2Gpu *model, size_t n, const char *what) {
    model->device_bytes += n * sizeof(float);
    return gpu_malloc(n * sizeof(float), what);
}

// The storage type's buffers: the same as alloc_floats in the fp32 build,
// half the bytes in the bf16 build.
static floatX *alloc_floatx(GPT2Gpu *model, size_t n, const char *what) {
    model->device_bytes += n * sizeof(floatX);
    return gpu_malloc(n * sizeof(floatX), what);
}

static void point_tensors(floatX *views[NUM_PARAM_TENSORS], floatX *base,
                          const size_t sizes[NUM_PARAM_TENSORS]) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        views[i] = sizes[i] ? base : NULL;
        base += sizes[i];
    }
}

static void alloc_activations(GPT2Gpu *model, int B, int T) {
    const GPT2Config *c = &model->config;
    size_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T, BTC = BT * C;
    GpuActivations *a = &model->acts;
    a->encoded = alloc_floatx(model, BTC, "activations: encoded");
    a->ln1 = alloc_floatx(model, L * BTC, "activations: ln1");
    a->ln1_mean = alloc_floats(model, L * BT, "activations: ln1_mean");
    a->ln1_rstd = alloc_floats(model, L * BT, "activations: ln1_rstd");
    a->qkv = alloc_floatx(model, L * 3 * BTC, "activations: qkv");
    a->atty = alloc_floatx(model, L * BTC, "activations: atty");
    a->att = alloc_floatx(model, L * B * NH * T * T, "activations: att (B,NH,T,T) per layer");
    a->attproj = alloc_floatx(model, L * BTC, "activations: attproj");
    a->residual2 = alloc_floatx(model, L * BTC, "activations: residual2");
    a->ln2 = alloc_floatx(model, L * BTC, "activations: ln2");
    a->ln2_mean = alloc_floats(model, L * BT, "activations: ln2_mean");
    a->ln2_rstd = alloc_floats(model, L * BT, "activations: ln2_rstd");
    a->fch = alloc_floatx(model, L * 4 * BTC, "activations: fch");
    a->fch_gelu = alloc_floatx(model, L * 4 * BTC, "activations: fch_gelu");
    a->fcproj = alloc_floatx(model, L * BTC, "activations: fcproj");
    a->residual3 = alloc_floatx(model, L * BTC, "activations: residual3");
    a->lnf = alloc_floatx(model, BTC, "activations: lnf");
    a->lnf_mean = alloc_floats(model, BT, "activations: lnf_mean");
    a->lnf_rstd = alloc_floats(model, BT, "activations: lnf_rstd");
    a->logits = alloc_floatx(model, BT * Vp, "activations: logits");
    a->probs = alloc_floatx(model, BT * Vp, "activations: probs");
    a->losses = alloc_floats(model, BT, "activations: losses");

    GpuGradBuffers *d = &model->d;
    d->residual = alloc_floatx(model, BTC, "gradients: residual stream");
    d->ln = alloc_floatx(model, BTC, "gradients: ln");
    d->qkv = alloc_floatx(model, 3 * BTC, "gradients: qkv");
    d->atty = alloc_floatx(model, BTC, "gradients: atty");
    d->fch = alloc_floatx(model, 4 * BTC, "gradients: fch");
    d->fch_gelu = alloc_floatx(model, 4 * BTC, "gradients: fch_gelu");
    d->lnf = alloc_floatx(model, BTC, "gradients: lnf");
    d->logits = alloc_floatx(model, BT * Vp, "gradients: logits");
    d->losses = alloc_floats(model, BT, "gradients: losses");
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

// One scratch buffer serves every kernel: none keeps anything in it between calls.
static size_t scratch_floats_needed(const GPT2Config *c, int B, int T) {
    int C = c->channels, NH = c->num_heads;
    size_t n = GRAD_NORM_MAX_BLOCKS;
    n = max_size(n, attention_forward_scratch_floats(B, T, C, NH));
    n = max_size(n, attention_backward_scratch_floats(B, T, C, NH));
    n = max_size(n, layernorm_backward_scratch_floats(B, T, C));
    n = max_size(n, matmul_backward_scratch_floats(B, T, 4 * C));  // the widest biased matmul
    return n;
}

void gpt2_gpu_init(GPT2Gpu *model, GpuContext *ctx, const GPT2Config *cfg, const float *params,
                   int max_B, int max_T) {
    memset(model, 0, sizeof(*model));
    model->config = *cfg;
    model->ctx = ctx;
    model->max_B = max_B;
    model->max_T = max_T;
    gpt2_param_sizes(cfg, model->param_sizes);
    model->num_params = gpt2_num_params(cfg);
    size_t n = model->num_params;
    model->params = alloc_floatx(model, n, "parameters");
    model->grads = alloc_floatx(model, n, "gradients");
    model->m = alloc_floats(model, n, "AdamW first moments");
    model->v = alloc_floats(model, n, "AdamW second moments");
#ifdef PRECISION_BF16
    model->master = alloc_floats(model, n, "fp32 master weights");
#endif
    point_tensors(model->params_of, model->params, model->param_sizes);
    point_tensors(model->grads_of, model->grads, model->param_sizes);
    gpt2_gpu_set_params(model, params);
    CUDA_CHECK(cudaMemset(model->m, 0, n * sizeof(float)));
    CUDA_CHECK(cudaMemset(model->v, 0, n * sizeof(float)));
    alloc_activations(model, max_B, max_T);
    model->scratch_floats = scratch_floats_needed(cfg, max_B, max_T);
    model->scratch = alloc_floats(model, model->scratch_floats, "scratch");
    size_t BT = (size_t)max_B * max_T;
    model->device_bytes += 2 * BT * sizeof(int32_t);
    model->inputs = gpu_malloc(BT * sizeof(int32_t), "input tokens");
    model->targets = gpu_malloc(BT * sizeof(int32_t), "target tokens");
    size_t bucket_ints = encoder_buckets_ints((int)BT);
    model->device_bytes += bucket_ints * sizeof(int32_t);
    model->buckets = gpu_malloc(bucket_ints * sizeof(int32_t), "encoder buckets");
    encoder_buckets_init(&model->host_buckets, (int)BT, cfg->vocab_size);
    model->mean_loss = alloc_floats(model, 1, "mean loss");
    model->norm = alloc_floats(model, 1, "gradient norm");
    model->clip_factor = alloc_floats(model, 1, "gradient clipping factor");
}

void gpt2_gpu_free(GPT2Gpu *model) {
    void *all[] = {
        model->params,         model->grads,          model->m,
        model->v,              model->master,         model->acts.encoded,
        model->acts.ln1,       model->acts.ln1_mean,  model->acts.ln1_rstd,
        model->acts.qkv,       model->acts.atty,      model->acts.att,
        model->acts.attproj,   model->acts.residual2, model->acts.ln2,
        model->acts.ln2_mean,  model->acts.ln2_rstd,  model->acts.fch,
        model->acts.fch_gelu,  model->acts.fcproj,    model->acts.residual3,
        model->acts.lnf,       model->acts.lnf_mean,  model->acts.lnf_rstd,
        model->acts.logits,    model->acts.probs,     model->acts.losses,
        model->d.residual,     model->d.ln,           model->d.qkv,
        model->d.atty,         model->d.fch,          model->d.fch_gelu,
        model->d.lnf,          model->d.logits,       model->d.losses,
        model->scratch,        model->mean_loss,      model->norm,
        model->clip_factor,
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(all[i]);
    gpu_free(model->inputs);
    gpu_free(model->targets);
    gpu_free(model->buckets);
    encoder_buckets_free(&model->host_buckets);
    memset(model, 0, sizeof(*model));
}

// ---- per-layer views -----------------------------------------------------------

typedef struct {
    floatX *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    floatX *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerWeights;

static LayerWeights layer_weights(floatX *const t[NUM_PARAM_TENSORS], int l, size_t C) {
    LayerWeights w = {
        .ln1w = t[2] + l * C,              .ln1b = t[3] + l * C,
        .qkvw = t[4] + l * 3 * C * C,      .qkvb = t[5] + l * 3 * C,
        .attprojw = t[6] + l * C * C,      .attprojb = t[7] + l * C,
        .ln2w = t[8] + l * C,              .ln2b = t[9] + l * C,
        .fcw = t[10] + l * 4 * C * C,      .fcb = t[11] + l * 4 * C,
        .fcprojw = t[12] + l * 4 * C * C,  .fcprojb = t[13] + l * C,
    };
    return w;
}

typedef struct {
    floatX *ln1, *qkv, *atty, *att, *attproj, *residual2;
    floatX *ln2, *fch, *fch_gelu, *fcproj, *residual3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
} LayerActs;

static LayerActs layer_acts(const GpuActivations *a, int l, size_t B, size_t T, size_t C,
                            size_t NH) {
    size_t BTC = B * T * C, BT = B * T;
    LayerActs x = {
        .ln1 = a->ln1 + l * BTC,            .ln1_mean = a->ln1_mean + l * BT,
        .ln1_rstd = a->ln1_rstd + l * BT,   .qkv = a->qkv + l * 3 * BTC,
        .atty = a->atty + l * BTC,          .att = a->att + l * B * NH * T * T,
        .attproj = a->attproj + l * BTC,    .residual2 = a->residual2 + l * BTC,
        .ln2 = a->ln2 + l * BTC,            .ln2_mean = a->ln2_mean + l * BT,
        .ln2_rstd = a->ln2_rstd + l * BT,   .fch = a->fch + l * 4 * BTC,
        .fch_gelu = a->fch_gelu + l * 4 * BTC, .fcproj = a->fcproj + l * BTC,
        .residual3 = a->residual3 + l * BTC,
    };
    return x;
}

static floatX *lm_head_of(floatX *const t[NUM_PARAM_TENSORS], const GPT2Config *c) {
    return c->tied ? t[0] : t[LM_HEAD_INDEX];
}

// The backward kernels accumulate (+=), as the CPU reference's do, so every
// reused gradient buffer starts from zero (all-zero bytes are 0.0 in fp32
// and in bf16 alike).
static void zero(const GPT2Gpu *model, floatX *buf, size_t n) {
    CUDA_CHECK(cudaMemsetAsync(buf, 0, n * sizeof(floatX), model->ctx->stream));
}

// ---- forward ---------------------------------------------------------------------

// The batch's shape fits the buffers and every token is in the vocabulary.
static int check_batch(const GPT2Gpu *model, const int32_t *inputs, const int32_t *targets,
                       int B, int T, char *err) {
    const int V = model->config.vocab_size;
    if ((size_t)B * T > (size_t)model->max_B * model->max_T || T > model->max_T)
        die("gpt2_gpu_forward: batch %dx%d exceeds the allocated %dx%d", B, T, model->max_B,
            model->max_T);
    size_t BT = (size_t)B * T;
    for (size_t i = 0; i < BT; i++)
        if (inputs[i] < 0 || inputs[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V)))
            return fail(err, "token %zu of the batch is outside the vocabulary [0, %d)", i, V);
    return 0;
}

int gpt2_gpu_forward(GPT2Gpu *model, const int32_t *inputs, const int32_t *targets, int B, int T,
                     char *err) {
    if (check_batch(model, inputs, targets, B, T, err)) return -1;
    size_t BT = (size_t)B * T;
    model->B = B;
    model->T = T;
    // ANCHOR: batch_upload_sync
    // From pageable host memory: each cudaMemcpy first waits for the work
    // queued before it, then returns once the host's bytes are staged.
    gpu_memcpy_sync(model->inputs, inputs, BT * sizeof(int32_t), cudaMemcpyHostToDevice);
    if (targets) {
        gpu_memcpy_sync(model->targets, targets, BT * sizeof(int32_t), cudaMemcpyHostToDevice);
        // The embedding's backward pass needs the positions grouped by token.
        model->host_buckets.BT = (int)BT;
        if (encoder_buckets_build(&model->host_buckets, inputs, err)) return -1;
        encoder_buckets_upload(model->ctx, model->buckets, &model->host_buckets);
        model->num_buckets = model->host_buckets.num_buckets;
    }
    // ANCHOR_END: batch_upload_sync
    gpt2_gpu_forward_uploaded(model, targets != NULL, model->mean_loss);
    return 0;
}

int gpt2_gpu_upload_batch_async(GPT2Gpu *model, const int32_t *inputs, const int32_t *targets,
                                EncoderBuckets *buckets, int B, int T, char *err) {
    if (check_batch(model, inputs, targets, B, T, err)) return -1;
    size_t BT = (size_t)B * T;
    model->B = B;
    model->T = T;
    const GpuContext *ctx = model->ctx;
    // ANCHOR: batch_upload_async
    // From pinned host memory: each copy is queued on the stream and this
    // returns at once; the copy engine reads the host buffers when the stream
    // gets there, so the caller must leave them alone until then.
    CUDA_CHECK(cudaMemcpyAsync(model->inputs, inputs, BT * sizeof(int32_t), cudaMemcpyHostToDevice,
                               ctx->stream));
    CUDA_CHECK(cudaMemcpyAsync(model->targets, targets, BT * sizeof(int32_t),
                               cudaMemcpyHostToDevice, ctx->stream));
    buckets->BT = (int)BT;
    if (encoder_buckets_build(buckets, inputs, err)) return -1;
    encoder_buckets_upload(ctx, model->buckets, buckets);
    model->num_buckets = buckets->num_buckets;
    // ANCHOR_END: batch_upload_async
    return 0;
}

void gpt2_gpu_forward_uploaded(GPT2Gpu *model, int with_targets, float *mean_loss) {
    const GPT2Config *c = &model->config;
    const int L = c->num_layers, NH = c->num_heads, C = c->channels;
    const int V = c->vocab_size, Vp = c->padded_vocab_size;
    const GpuContext *ctx = model->ctx;
    const int B = model->B, T = model->T;
    const size_t BTC = (size_t)B * T * C;

    floatX *const *p = model->params_of;
    GpuActivations *a = &model->acts;
    nvtxRangePushA("forward");
    encoder_forward_v1(ctx, a->encoded, model->inputs, p[0], p[1], B, T, C);
    // ANCHOR: forward_layers
    floatX *residual = a->encoded;
    for (int l = 0; l < L; l++) {
        nvtxRangePushA("layer");
        LayerWeights w = layer_weights(p, l, C);
        LayerActs x = layer_acts(a, l, B, T, C, NH);
        layernorm_forward_v1(ctx, x.ln1, x.ln1_mean, x.ln1_rstd, residual, w.ln1w, w.ln1b, B, T, C);
        matmul_forward_v1(ctx, x.qkv, x.ln1, w.qkvw, w.qkvb, B, T, C, 3 * C);
        attention_forward_v1(ctx, x.atty, x.att, model->scratch, x.qkv, B, T, C, NH);
        matmul_forward_v1(ctx, x.attproj, x.atty, w.attprojw, w.attprojb, B, T, C, C);
        residual_forward_v1(ctx, x.residual2, residual, x.attproj, BTC);
        layernorm_forward_v1(ctx, x.ln2, x.ln2_mean, x.ln2_rstd, x.residual2, w.ln2w, w.ln2b, B, T, C);
        matmul_forward_v1(ctx, x.fch, x.ln2, w.fcw, w.fcb, B, T, C, 4 * C);
        gelu_forward_v1(ctx, x.fch_gelu, x.fch, 4 * BTC);
        matmul_forward_v1(ctx, x.fcproj, x.fch_gelu, w.fcprojw, w.fcprojb, B, T, 4 * C, C);
        residual_forward_v1(ctx, x.residual3, x.residual2, x.fcproj, BTC);
        residual = x.residual3;
        nvtxRangePop();
    }
    // ANCHOR_END: forward_layers
    layernorm_forward_v1(ctx, a->lnf, a->lnf_mean, a->lnf_rstd, residual, p[14], p[15], B, T, C);
    matmul_forward_v1(ctx, a->logits, a->lnf, lm_head_of(p, c), NULL, B, T, C, Vp);
    softmax_forward_v1(ctx, a->probs, a->logits, B, T, V, Vp);
    if (with_targets) {
        crossentropy_forward_v1(ctx, a->losses, a->logits, a->probs, model->targets, B, T, V, Vp);
        loss_mean_v1(ctx, mean_loss, a->losses, B, T);
    }
    nvtxRangePop();
}

float gpt2_gpu_read_loss(const GPT2Gpu *model) {
    float loss;
    gpu_memcpy_sync(&loss, model->mean_loss, sizeof loss, cudaMemcpyDeviceToHost);
    return loss;
}

// ---- backward --------------------------------------------------------------------

void gpt2_gpu_backward(GPT2Gpu *model) {
    const GPT2Config *c = &model->config;
    const int B = model->B, T = model->T;
    const int L = c->num_layers, NH = c->num_heads, C = c->channels;
    const int V = c->vocab_size, Vp = c->padded_vocab_size;
    const GpuContext *ctx = model->ctx;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    floatX *const *p = model->params_of;
    floatX *const *g = model->grads_of;
    GpuActivations *a = &model->acts;
    GpuGradBuffers *d = &model->d;
    float *scratch = model->scratch;

    nvtxRangePushA("backward");
    zero(model, model->grads, model->num_params);
    dlosses_fill_v1(ctx, d->losses, B, T);
    zero(model, d->logits, BT * Vp);
    crossentropy_softmax_backward_v1(ctx, d->logits, d->losses, a->probs, model->targets, B, T, V, Vp);
    zero(model, d->lnf, BTC);
    matmul_backward_v1(ctx, d->lnf, lm_head_of(g, c), NULL, scratch, d->logits, a->lnf,
                       lm_head_of(p, c), B, T, C, Vp);
    // d->residual carries d(loss)/d(residual stream) down through the layers.
    // A residual connection passes its gradient to both branches unchanged, so
    // the branch's backward reads d->residual directly, and the layernorm at
    // the branch's start adds its own contribution into it (+=).
    floatX *last = L > 0 ? layer_acts(a, L - 1, B, T, C, NH).residual3 : a->encoded;
    zero(model, d->residual, BTC);
    layernorm_backward_v1(ctx, d->residual, g[14], g[15], scratch, d->lnf, last, p[14],
                          a->lnf_mean, a->lnf_rstd, B, T, C);
    // ANCHOR: backward_layers
    for (int l = L - 1; l >= 0; l--) {
        nvtxRangePushA("layer");
        LayerWeights w = layer_weights(p, l, C), dw = layer_weights(g, l, C);
        LayerActs x = layer_acts(a, l, B, T, C, NH);
        floatX *residual_in = l == 0 ? a->encoded : layer_acts(a, l - 1, B, T, C, NH).residual3;
        // MLP block, in reverse
        zero(model, d->fch_gelu, 4 * BTC);
        matmul_backward_v1(ctx, d->fch_gelu, dw.fcprojw, dw.fcprojb, scratch, d->residual,
                           x.fch_gelu, w.fcprojw, B, T, 4 * C, C);
        zero(model, d->fch, 4 * BTC);
        gelu_backward_v1(ctx, d->fch, x.fch, d->fch_gelu, 4 * BTC);
        zero(model, d->ln, BTC);
        matmul_backward_v1(ctx, d->ln, dw.fcw, dw.fcb, scratch, d->fch, x.ln2, w.fcw, B, T, C, 4 * C);
        layernorm_backward_v1(ctx, d->residual, dw.ln2w, dw.ln2b, scratch, d->ln, x.residual2,
                              w.ln2w, x.ln2_mean, x.ln2_rstd, B, T, C);
        // attention block, in reverse
        zero(model, d->atty, BTC);
        matmul_backward_v1(ctx, d->atty, dw.attprojw, dw.attprojb, scratch, d->residual, x.atty,
                           w.attprojw, B, T, C, C);
        zero(model, d->qkv, 3 * BTC);
        attention_backward_v1(ctx, d->qkv, scratch, d->atty, x.qkv, x.att, B, T, C, NH);
        zero(model, d->ln, BTC);
        matmul_backward_v1(ctx, d->ln, dw.qkvw, dw.qkvb, scratch, d->qkv, x.ln1, w.qkvw, B, T, C,
                           3 * C);
        layernorm_backward_v1(ctx, d->residual, dw.ln1w, dw.ln1b, scratch, d->ln, residual_in,
                              w.ln1w, x.ln1_mean, x.ln1_rstd, B, T, C);
        nvtxRangePop();
    }
    // ANCHOR_END: backward_layers
    encoder_backward_v1(ctx, g[0], g[1], d->residual, model->buckets, model->num_buckets, B, T,
                        C);
    nvtxRangePop();
}

// ---- update ----------------------------------------------------------------------

// One AdamW step for every tensor, after the clipping.
static void adamw_all_tensors(GPT2Gpu *model, float lr, const AdamWConfig *cfg, int t) {
    const GpuContext *ctx = model->ctx;
    // ANCHOR: adamw_per_tensor
    // Chapter 00 launches AdamW once per parameter tensor, as PyTorch's
    // for-loop implementation does; chapter 09 fuses them into one launch.
    size_t offset = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = model->param_sizes[i];
        if (n == 0) continue;
        // master is NULL in the fp32 build: the update is then made in params.
        float *master = model->master ? model->master + offset : NULL;
        adamw_update_v1(ctx, model->params + offset, master, model->grads + offset,
                        model->m + offset, model->v + offset, n, lr, cfg,
                        gpt2_param_is_decayed(i), t);
        offset += n;
    }
    // ANCHOR_END: adamw_per_tensor
}

float gpt2_gpu_update(GPT2Gpu *model, float lr, const AdamWConfig *cfg, float max_norm, int t) {
    const GpuContext *ctx = model->ctx;
    nvtxRangePushA("optimizer");
    // ANCHOR: clip_on_host
    grad_norm_v1(ctx, model->norm, model->scratch, model->grads, model->num_params);
    float norm;
    gpu_memcpy_sync(&norm, model->norm, sizeof norm, cudaMemcpyDeviceToHost);
    float factor = grad_clip_factor(norm, max_norm);
    if (factor < 1.0f) scale_v1(ctx, model->grads, model->num_params, factor);
    // ANCHOR_END: clip_on_host
    adamw_all_tensors(model, lr, cfg, t);
    nvtxRangePop();
    return norm;
}

void gpt2_gpu_update_async(GPT2Gpu *model, float lr, const AdamWConfig *cfg, float max_norm, int t,
                           float *norm) {
    const GpuContext *ctx = model->ctx;
    nvtxRangePushA("optimizer");
    // ANCHOR: clip_async
    // The norm stays on the device; so does the factor computed from it,
    // which the scaling kernel reads from memory.
    grad_norm_v1(ctx, norm, model->scratch, model->grads, model->num_params);
    grad_clip_factor_v1(ctx, model->clip_factor, norm, max_norm);
    scale_by_device_factor_v1(ctx, model->grads, model->num_params, model->clip_factor);
    // ANCHOR_END: clip_async
    adamw_all_tensors(model, lr, cfg, t);
    nvtxRangePop();
}

void gpt2_gpu_download(const GPT2Gpu *model, const float *device_buffer, float *host) {
    gpu_memcpy_sync(host, device_buffer, model->num_params * sizeof(float),
                    cudaMemcpyDeviceToHost);
}

void gpt2_gpu_upload(GPT2Gpu *model, float *device_buffer, const float *host) {
    gpu_memcpy_sync(device_buffer, host, model->num_params * sizeof(float),
                    cudaMemcpyHostToDevice);
}

// ---- between the host's fp32 and the device's floatX ------------------------------

// ANCHOR: floatx_host_conversion
void gpt2_gpu_download_floatx(const floatX *device, float *host, size_t n) {
#ifdef PRECISION_BF16
    uint16_t *bits = xmalloc(n * sizeof(uint16_t));
    gpu_memcpy_sync(bits, device, n * sizeof(floatX), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; i++) host[i] = bf16_to_float(bits[i]);
    free(bits);
#else
    gpu_memcpy_sync(host, device, n * sizeof(float), cudaMemcpyDeviceToHost);
#endif
}

void gpt2_gpu_get_params(const GPT2Gpu *model, float *host) {
#ifdef PRECISION_BF16
    gpt2_gpu_download(model, model->master, host);
#else
    gpt2_gpu_download_floatx(model->params, host, model->num_params);
#endif
}

void gpt2_gpu_set_params(GPT2Gpu *model, const float *host) {
    const size_t n = model->num_params;
#ifdef PRECISION_BF16
    // The fp32 weights become the master copy as they are, and the bf16
    // working copy is each of them rounded to nearest even.
    gpt2_gpu_upload(model, model->master, host);
    uint16_t *bits = xmalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) bits[i] = bf16_from_float_rne(host[i]);
    gpu_memcpy_sync(model->params, bits, n * sizeof(floatX), cudaMemcpyHostToDevice);
    free(bits);
#else
    gpu_memcpy_sync(model->params, host, n * sizeof(float), cudaMemcpyHostToDevice);
#endif
}
// ANCHOR_END: floatx_host_conversion
