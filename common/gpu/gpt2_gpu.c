// gpt2_gpu.c: see gpt2_gpu.h. The forward and backward passes read like the
// CPU reference's (gpt2_cpu_model.inc): the same layers in the same order,
// each one a slot of model->plan.ops. Built twice, for fp32 and for bf16
// (kernels/precision.h): the code is the same, the storage type floatX is
// not; the few lines that differ are under #ifdef PRECISION_BF16.
#include "gpu/gpt2_gpu.h"

#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adamw.h"
#include "adamw8bit.h"
#include "attention.h"
#include "attention_flash.h"
#include "gpu/floatx_host.h"
#include "layernorm.h"
#include "matmul.h"
#include "matmul_lt.h"
#include "gpu/memory_plan.h"
#include "optim/quantize8.h"
#include "util/util.h"

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

// Chapter 09's table of the tensors in the flat buffers, with the decay of
// each: built once, here, and passed to every fused update by value. From
// chapter 10 there are two, one per kind of state: the table of every tensor,
// filtered, each entry given its blocks again and its place in the state.
static void adamw_table_of_kind(AdamWTensors *t, const AdamLayout *l, int quantized,
                                size_t values_per_block) {
    AdamWTensors all;
    int decay[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) decay[i] = gpt2_param_is_decayed(i);
    adamw_table_build(&all, l->size, decay, NUM_PARAM_TENSORS, values_per_block);
    memset(t, 0, sizeof *t);
    for (int k = 0, i = 0; k < all.count; k++) {
        while (l->param_offset[i] != all.offset[k] || l->size[i] == 0) i++;  // entry k's tensor
        if (l->quantized[i] != quantized) continue;
        const int j = t->count++;
        t->offset[j] = all.offset[k];
        t->size[j] = all.size[k];
        t->decay[j] = all.decay[k];
        t->state_offset[j] = l->state_offset[i];
        t->first_block[j] = t->blocks;
        t->blocks += (unsigned int)((all.size[k] + values_per_block - 1) / values_per_block);
    }
}

static void adamw_tables(GPT2Gpu *model) {
    if (model->plan.shard_optimizer) {  // chapter 15: the shard's slices only
        int decay[NUM_PARAM_TENSORS];
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) decay[i] = gpt2_param_is_decayed(i);
        optimizer_shard_table(&model->adamw_tensors, &model->shard, decay, 0,
                              ADAMW_FUSED_VALUES_PER_BLOCK);
        optimizer_shard_table(&model->adamw8_tensors, &model->shard, decay, 1, Q8_BLOCK);
        return;
    }
    adamw_table_of_kind(&model->adamw_tensors, &model->adam, 0, ADAMW_FUSED_VALUES_PER_BLOCK);
    adamw_table_of_kind(&model->adamw8_tensors, &model->adam, 1, Q8_BLOCK);
}

// Chapter 14's update a layer at a time: each layer's tables, their
// gradients where --update-in-backward puts them, their moments where
// --offload-optimizer does; and the norm's parts.
static void alloc_layer_updates(GPT2Gpu *model) {
    const GPT2Config *c = &model->config;
    const int L = c->num_layers;
    const LayerGrads *g = model->plan.update_in_backward ? &model->layer_grads : NULL;
    const OptimizerOffload *off = &model->offload;
    model->layer_tables = xmalloc(2 * (size_t)(L + 1) * sizeof(AdamWTensors));
    for (int l = 0; l <= L; l++) {
        const StateBlock *b = !model->plan.offload_optimizer ? NULL
                              : l < L                        ? &off->layer
                                                             : &off->rest;
        layer_table_build(&model->layer_tables[2 * l], c, &model->adam, g, b, l, 0,
                          ADAMW_FUSED_VALUES_PER_BLOCK);
        layer_table_build(&model->layer_tables[2 * l + 1], c, &model->adam, g, b, l, 1, Q8_BLOCK);
    }
    if (g) model->norm_parts = alloc_floats(model, (size_t)L, "gradient norm's parts");
}

static void *alloc_zeros(GPT2Gpu *model, size_t bytes, const char *what) {
    if (bytes == 0) return NULL;
    model->device_bytes += bytes;
    void *p = gpu_malloc(bytes, what);
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
}

// AdamW's moments, all zero (a fresh state: zero bytes with zero scales
// dequantize to 0): fp32 for every tensor through chapter 09; from chapter
// 10 one byte each for the weight matrices' (adam_state.h); with chapter
// 15's --shard-optimizer, those of the rank's shard only.
static void alloc_adam_state(GPT2Gpu *model) {
    const AdamLayout *l = model->plan.shard_optimizer ? &model->shard.local : &model->adam;
    model->m = alloc_zeros(model, l->fp32_values * sizeof(float), "AdamW first moments (fp32)");
    model->v = alloc_zeros(model, l->fp32_values * sizeof(float), "AdamW second moments (fp32)");
    model->m_q = alloc_zeros(model, l->q8_values, "AdamW first moments (8-bit)");
    model->v_q = alloc_zeros(model, l->q8_values, "AdamW second moments (8-bit)");
    model->m_absmax = alloc_zeros(model, l->q8_blocks * sizeof(float), "8-bit moments' scales");
    model->v_absmax = alloc_zeros(model, l->q8_blocks * sizeof(float), "8-bit moments' scales");
}

void gpt2_gpu_init(GPT2Gpu *model, GpuContext *ctx, const GPT2Config *cfg, const float *params,
                   int max_B, int max_T, const RunPlan *plan) {
    memset(model, 0, sizeof(*model));
    model->config = *cfg;
    model->ctx = ctx;
    model->plan = *plan;
    gpu_launch_apply(ctx, &plan->launch);
    model->max_B = max_B;
    model->max_T = max_T;
    gpt2_param_sizes(cfg, model->param_sizes);
    model->num_params = gpt2_num_params(cfg);
    model->adam = adam_layout_for(cfg, plan->moments_8bit);
    size_t n = model->num_params;
    // Chapter 15's --shard-optimizer: the parameters and gradients padded to
    // world_size equal shards (zeros), which the collectives move in place.
    char err[ERR_LEN];
    if (plan->shard_optimizer && optimizer_shard_for(&model->shard, &model->adam, plan->rank,
                                                     plan->world_size, err))
        die("gpt2_gpu_init: %s", err);
    const size_t padded = plan->shard_optimizer ? model->shard.padded_values : n;
    model->params = alloc_zeros(model, padded * sizeof(floatX), "parameters");
    // Chapter 14's --update-in-backward keeps one layer's gradients.
    model->layer_grads = layer_grads_for(cfg);
    const LayerGrads *lg = &model->layer_grads;
    if (plan->update_in_backward)
        model->grads = alloc_floatx(model, lg->values, "gradients (one layer's)");
    else
        model->grads = alloc_zeros(model, padded * sizeof(floatX), "gradients");
    // Chapter 14's --offload-optimizer: the moments in its blocks instead.
    if (plan->offload_optimizer) {
        optimizer_offload_init(&model->offload, cfg, &model->adam);
        model->device_bytes += model->offload.device_bytes;
    } else {
        alloc_adam_state(model);
    }
#ifdef PRECISION_BF16
    // Chapter 14's --no-master-weights goes without them: 4 bytes a parameter
    // saved, the update rounding stochastically into the bf16 weights instead.
    if (plan->master_weights)
        model->master = alloc_floats(model, plan->shard_optimizer ? model->shard.shard_values : n,
                                     "fp32 master weights");
#endif
    point_tensors(model->params_of, model->params, model->param_sizes);
    point_tensors(model->grads_of, model->grads,
                  plan->update_in_backward ? lg->size : model->param_sizes);
    gpt2_gpu_set_params(model, params);
    activations_alloc(&model->acts, cfg, max_B, max_T, plan);
    model->device_bytes += model->acts.bytes;
    model->scratch_floats = memory_plan_scratch_floats(cfg, max_B, max_T, plan);
    model->scratch = alloc_floats(model, model->scratch_floats, "scratch");
    model->device_bytes += device_batch_alloc(&model->own, max_B, max_T);
    model->batch = &model->own;
    host_batch_init(&model->staging, max_B, max_T, cfg->vocab_size, 0);
    model->mean_loss = alloc_floats(model, 1, "mean loss");
    model->norm = alloc_floats(model, 1, "gradient norm");
    model->clip_factor = alloc_floats(model, 1, "gradient clipping factor");
    model->device_bytes += sizeof(AdamWStep);
    model->adamw_step = gpu_malloc(sizeof(AdamWStep), "AdamW step values");
    adamw_tables(model);
    if (plan->update_in_backward || plan->offload_optimizer) alloc_layer_updates(model);
    if (plan->shard_optimizer)
        model->shard_norms = alloc_floats(model, (size_t)plan->world_size, "gradient norm's parts");
    model->plan.fp8 = model->fp8_on = plan->fp8 && ctx->fp8;  // what memory_plan counts
    if (model->fp8_on) {
        fp8_layers_alloc(&model->fp8, cfg, max_B, max_T, plan->recompute);
        model->device_bytes += model->fp8.bytes;
    }
}

void gpt2_gpu_set_schedule(GPT2Gpu *model, const LrSchedule *lr, const AdamWConfig *cfg,
                           int steps, int steps_done) {
    if (!model->plan.device_schedule)
        die("gpt2_gpu_set_schedule: the run's plan takes the step's values from the host");
    const size_t bytes = (size_t)steps * sizeof(AdamWScheduleEntry);
    AdamWScheduleEntry *table = xmalloc(bytes);
    adamw_schedule_build(table, steps, lr, cfg);
    gpu_free(model->schedule);
    model->device_bytes -= (size_t)model->schedule_steps * sizeof(AdamWScheduleEntry);
    model->device_bytes += bytes;
    model->schedule = gpu_malloc(bytes, "every step's lr and corrections");
    gpu_memcpy_sync(model->ctx, model->schedule, table, bytes, cudaMemcpyHostToDevice);
    free(table);
    model->schedule_steps = steps;
    // The counter adamw_begin_step_v3 advances: AdamWStep.t, the last step taken.
    AdamWStep step = {.t = steps_done};
    gpu_memcpy_sync(model->ctx, model->adamw_step, &step, sizeof step, cudaMemcpyHostToDevice);
}

void gpt2_gpu_free(GPT2Gpu *model) {
    void *all[] = {model->params, model->grads,     model->m,       model->v,
                   model->master, model->scratch,   model->mean_loss, model->norm,
                   model->clip_factor, model->adamw_step, model->m_q, model->v_q,
                   model->m_absmax, model->v_absmax, model->schedule, model->norm_parts,
                   model->shard_norms};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(all[i]);
    free(model->layer_tables);
    optimizer_offload_free(&model->offload);
    device_batch_free(&model->own);
    activations_free(&model->acts);
    if (model->fp8_on) fp8_layers_free(&model->fp8);
    host_batch_free(&model->staging);
    memset(model, 0, sizeof(*model));
}

void gpt2_gpu_print_memory(const GPT2Gpu *model, const MemoryBudget *budget, FILE *out) {
    memory_plan_print(out, &model->config, model->max_B, model->max_T, &model->plan, budget);
}

// ---- per-layer views -----------------------------------------------------------

typedef struct {
    floatX *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    floatX *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerWeights;

static LayerWeights layer_weights(floatX *const t[NUM_PARAM_TENSORS], int l, size_t C) {
    LayerWeights w = {
        .ln1w = t[PARAM_LN1W] + l * C,
        .ln1b = t[PARAM_LN1B] + l * C,
        .qkvw = t[PARAM_QKVW] + l * 3 * C * C,
        .qkvb = t[PARAM_QKVB] + l * 3 * C,
        .attprojw = t[PARAM_ATTPROJW] + l * C * C,
        .attprojb = t[PARAM_ATTPROJB] + l * C,
        .ln2w = t[PARAM_LN2W] + l * C,
        .ln2b = t[PARAM_LN2B] + l * C,
        .fcw = t[PARAM_FCW] + l * 4 * C * C,
        .fcb = t[PARAM_FCB] + l * 4 * C,
        .fcprojw = t[PARAM_FCPROJW] + l * 4 * C * C,
        .fcprojb = t[PARAM_FCPROJB] + l * C,
    };
    return w;
}

typedef struct {
    floatX *ln1, *qkv, *atty, *att, *attproj, *residual2;
    floatX *ln2, *fch, *fch_gelu, *fcproj, *residual3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *att_lse;
} LayerActs;

// Layer l's slices of the (L, B, ...) stacked activations, for the current
// batch shape (B, T). Of att and att_lse, the one the switches do not need
// is NULL. A tensor that the plan recomputes (chapter 14) holds one layer,
// which every layer's slice is (activations_layer).
static LayerActs layer_acts(const GpuActivations *a, int l, size_t B, size_t T, size_t C,
                            size_t NH) {
    size_t BTC = B * T * C, BT = B * T;
#define LAYER(field) ((size_t)activations_layer(a, offsetof(GpuActivations, field), l))
    LayerActs x = {
        .ln1 = a->ln1 + LAYER(ln1) * BTC,
        .ln1_mean = a->ln1_mean + LAYER(ln1_mean) * BT,
        .ln1_rstd = a->ln1_rstd + LAYER(ln1_rstd) * BT,
        .qkv = a->qkv + LAYER(qkv) * 3 * BTC,
        .atty = a->atty + LAYER(atty) * BTC,
        .att = a->att ? a->att + LAYER(att) * B * NH * T * T : NULL,
        .att_lse = a->att_lse ? a->att_lse + LAYER(att_lse) * B * NH * T : NULL,
        .attproj = a->attproj + LAYER(attproj) * BTC,
        .residual2 = a->residual2 + LAYER(residual2) * BTC,
        .ln2 = a->ln2 + LAYER(ln2) * BTC,
        .ln2_mean = a->ln2_mean + LAYER(ln2_mean) * BT,
        .ln2_rstd = a->ln2_rstd + LAYER(ln2_rstd) * BT,
        .fch = a->fch + LAYER(fch) * 4 * BTC,
        .fch_gelu = a->fch_gelu + LAYER(fch_gelu) * 4 * BTC,
        .fcproj = a->fcproj + LAYER(fcproj) * BTC,
        .residual3 = a->residual3 + LAYER(residual3) * BTC,
    };
#undef LAYER
    return x;
}

// A layernorm's output and the statistics it saves, with its weights: ln1 of
// a layer, or the final layernorm.
typedef struct {
    floatX *out;
    float *mean, *rstd;
    const floatX *weight, *bias;
} LayernormAt;

// The layernorm that reads the residual stream after layer l: the next
// layer's ln1, or after the last layer the final one.
static LayernormAt layernorm_after(const GPT2Gpu *model, int l) {
    const GPT2Config *c = &model->config;
    const GpuActivations *a = &model->acts;
    if (l + 1 == c->num_layers)
        return (LayernormAt){a->lnf, a->lnf_mean, a->lnf_rstd, model->params_of[PARAM_LNFW],
                             model->params_of[PARAM_LNFB]};
    LayerActs x = layer_acts(a, l + 1, model->B, model->T, c->channels, c->num_heads);
    LayerWeights w = layer_weights(model->params_of, l + 1, c->channels);
    return (LayernormAt){x.ln1, x.ln1_mean, x.ln1_rstd, w.ln1w, w.ln1b};
}

static floatX *lm_head_of(floatX *const t[NUM_PARAM_TENSORS], const GPT2Config *c) {
    return c->tied ? t[PARAM_WTE] : t[PARAM_LM_HEAD];
}

// ---- the batch -----------------------------------------------------------------

// The batch's shape fits the model's buffers.
static void check_batch_shape(const GPT2Gpu *model, int B, int T) {
    if ((size_t)B * T > (size_t)model->max_B * model->max_T || T > model->max_T)
        die("gpt2_gpu: batch %dx%d exceeds the allocated %dx%d", B, T, model->max_B,
            model->max_T);
}

int gpt2_gpu_upload_batch(GPT2Gpu *model, HostBatch *hb, int with_targets, int B, int T,
                          char *err) {
    check_batch_shape(model, B, T);
    if (host_batch_prepare(hb, with_targets, B, T, model->config.vocab_size, err)) return -1;
    const GpuContext *ctx = model->ctx;
    const size_t bytes = (size_t)B * T * sizeof(int32_t);
    DeviceBatch *db = &model->own;
    model->B = B;
    model->T = T;
    model->has_targets = with_targets;
    model->batch = db;
    // ANCHOR: batch_upload
    if (hb->pinned) {
        // Chapter 03, from pinned memory: each copy is queued on the stream
        // and returns at once; the copy engine reads the host buffer when the
        // stream gets there, so the caller must leave it alone until then.
        gpu_memcpy_async(ctx, db->inputs, hb->inputs, bytes, cudaMemcpyHostToDevice,
                         "upload (inputs)");
        if (with_targets)
            gpu_memcpy_async(ctx, db->targets, hb->targets, bytes, cudaMemcpyHostToDevice,
                             "upload (targets)");
    } else {
        // From pageable memory: each cudaMemcpy first waits for the work
        // queued before it, then returns once the host's bytes are staged.
        gpu_memcpy_sync(ctx, db->inputs, hb->inputs, bytes, cudaMemcpyHostToDevice);
        if (with_targets)
            gpu_memcpy_sync(ctx, db->targets, hb->targets, bytes, cudaMemcpyHostToDevice);
    }
    // ANCHOR_END: batch_upload
    if (!with_targets) return 0;
    encoder_buckets_upload(ctx, db->buckets, &hb->buckets);
    db->num_buckets = hb->buckets.num_buckets;
    return 0;
}

void gpt2_gpu_use_batch(GPT2Gpu *model, const DeviceBatch *db, int B, int T) {
    check_batch_shape(model, B, T);
    model->B = B;
    model->T = T;
    model->has_targets = 1;
    model->batch = db;
}

int gpt2_gpu_forward_tokens(GPT2Gpu *model, const int32_t *inputs, const int32_t *targets, int B,
                            int T, Gpt2ForwardMode mode, char *err) {
    if ((size_t)B * T > (size_t)model->max_B * model->max_T)
        die("gpt2_gpu_forward_tokens: batch %dx%d exceeds the allocated %dx%d", B, T,
            model->max_B, model->max_T);
    const size_t bytes = (size_t)B * T * sizeof(int32_t);
    memcpy(model->staging.inputs, inputs, bytes);
    if (targets) memcpy(model->staging.targets, targets, bytes);
    if (gpt2_gpu_upload_batch(model, &model->staging, targets != NULL, B, T, err)) return -1;
    gpt2_gpu_forward(model, mode, model->mean_loss);
    return 0;
}

// ---- chapter 13's FP8 operands --------------------------------------------------------

// The operands of a forward product: NULL (floatX) without FP8; else X cast
// now (fp8_layers.h) into *o.
static const GemmOperands *fp8_input(Fp8Layers *f8, GemmOperands *o, const GpuContext *ctx,
                                     int l, Linear k, const floatX *x, Fp8CastOp op, int BT) {
    if (!f8) return NULL;
    *o = fp8_forward_operands(f8, ctx, l, k, x, op, BT);
    return o;
}

// The operands of a backward product: NULL without FP8; else dout cast now,
// with the bias gradient (and GELU's, for fc) taken by the cast, into *o.
static const GemmOperands *fp8_grad(Fp8Layers *f8, GemmOperands *o, const GpuContext *ctx,
                                    int l, Linear k, const floatX *dout, const floatX *pre,
                                    floatX *dbias, int BT) {
    if (!f8) return NULL;
    *o = fp8_backward_operands(f8, ctx, l, k, dout, pre ? FP8_DGELU : FP8_COPY, pre, dbias, BT);
    return o;
}

// The seam before linear layer k of layer l: residual = a + b (b NULL: the
// embeddings, no add), then the layernorm `ln`. Returns that layer's GEMM
// operands: NULL in bf16, ln->out written; with f8, chapter 13's FP8 ones in
// *o, the layernorm's output made in FP8 by the layernorm (fp8_layers.h).
static const GemmOperands *seam(const GPT2Gpu *model, Fp8Layers *f8, GemmOperands *o, int l,
                                Linear k, floatX *residual, const LayernormAt *ln,
                                const floatX *a, const floatX *b) {
    const GpuOps *ops = &model->plan.ops;
    const int B = model->B, T = model->T, C = model->config.channels;
    if (f8) {
        *o = fp8_layernorm_operands(f8, model->ctx, ops, l, k, residual, ln->out, ln->mean,
                                    ln->rstd, a, b, ln->weight, ln->bias, B, T);
        return o;
    }
    if (b)
        ops->residual_layernorm_forward(model->ctx, residual, ln->out, ln->mean, ln->rstd, a, b,
                                        ln->weight, ln->bias, B, T, C);
    else
        ops->layernorm_forward(model->ctx, ln->out, ln->mean, ln->rstd, a, ln->weight, ln->bias,
                               B, T, C);
    return NULL;
}

// ---- forward ---------------------------------------------------------------------

void gpt2_gpu_forward(GPT2Gpu *model, Gpt2ForwardMode mode, float *mean_loss) {
    const GPT2Config *c = &model->config;
    const int L = c->num_layers, NH = c->num_heads, C = c->channels;
    const int V = c->vocab_size, Vp = c->padded_vocab_size, ld = model->plan.logits_stride;
    const GpuContext *ctx = model->ctx;
    const GpuOps *ops = &model->plan.ops;
    const int B = model->B, T = model->T;
    if (mode != GPT2_LOGITS && !model->has_targets)
        die("gpt2_gpu_forward: a loss needs targets, and the last batch came without");
    model->last_mode = mode;

    floatX *const *p = model->params_of;
    GpuActivations *a = &model->acts;
    nvtxRangePushA("forward");
    const DeviceBatch *batch = model->batch;
    // Chapter 13: a training pass multiplies FP8 copies (fp8_layers.h);
    // validation and sampling run the bf16 GEMMs on the same weights.
    Fp8Layers *f8 = model->fp8_on && mode == GPT2_TRAIN ? &model->fp8 : NULL;
    if (f8) fp8_cast_weights(f8, ctx, p);
    ops->encoder_forward(ctx, a->encoded, batch->inputs, p[PARAM_WTE], p[PARAM_WPE], B, T, C);
    LayernormAt ln = layernorm_after(model, -1);  // the first layer's ln1
    GemmOperands o_qkv, o;  // chapter 13's FP8 operands: of qkv, and of the product at hand
    const GemmOperands *qkv_in = seam(model, f8, &o_qkv, 0, LINEAR_QKV, NULL, &ln, a->encoded, NULL);
    // ANCHOR: forward_layers
    floatX *residual = a->encoded;  // the residual stream entering layer l
    for (int l = 0; l < L; l++) {
        nvtxRangePushA("layer");
        LayerWeights w = layer_weights(p, l, C);
        LayerActs x = layer_acts(a, l, B, T, C, NH);
        // attention block: x.ln1 was written at the end of the layer before
        ops->matmul_forward(ctx, x.qkv, NULL, x.ln1, w.qkvw, w.qkvb, B, T, C, 3 * C, 3 * C, qkv_in);
        ops->attention_forward(ctx, x.atty, x.att, x.att_lse, model->scratch, x.qkv, B, T, C,
                               NH);
        ops->matmul_forward(ctx, x.attproj, NULL, x.atty, w.attprojw, w.attprojb, B, T, C, C, C,
                            fp8_input(f8, &o, ctx, l, LINEAR_ATTPROJ, x.atty, FP8_COPY, B * T));
        LayernormAt ln2 = {x.ln2, x.ln2_mean, x.ln2_rstd, w.ln2w, w.ln2b};
        const GemmOperands *fc_in = seam(model, f8, &o, l, LINEAR_FC, x.residual2, &ln2, residual,
                                         x.attproj);
        // MLP block. In FP8 the GELU is not fc's epilogue but the cast of
        // fc's projection's input: fc writes x.fch alone, and x.fch_gelu is
        // never made in bf16.
        ops->matmul_forward(ctx, f8 ? x.fch : x.fch_gelu, f8 ? NULL : x.fch, x.ln2, w.fcw, w.fcb,
                            B, T, C, 4 * C, 4 * C, fc_in);
        ops->matmul_forward(ctx, x.fcproj, NULL, x.fch_gelu, w.fcprojw, w.fcprojb, B, T, 4 * C, C,
                            C, fp8_input(f8, &o, ctx, l, LINEAR_FCPROJ, x.fch, FP8_GELU, B * T));
        // the residual stream after this layer, and its layernorm for the next
        // layer (or the final layernorm, bf16 for the lm_head, after the last)
        ln = layernorm_after(model, l);
        qkv_in = seam(model, l + 1 < L ? f8 : NULL, &o_qkv, l + 1, LINEAR_QKV, x.residual3, &ln,
                      x.residual2, x.fcproj);
        residual = x.residual3;
        nvtxRangePop();
    }
    // ANCHOR_END: forward_layers
    model->shared_hold_last_layer = 1;
    // ANCHOR: forward_classifier
    ops->matmul_forward(ctx, a->logits, NULL, a->lnf, lm_head_of(p, c), NULL, B, T, C, Vp, ld,
                        NULL);
    if (mode != GPT2_LOGITS)
        ops->classifier_forward(ctx, a->losses, mean_loss, a->logits, a->probs, batch->targets,
                                B, T, V, ld, mode == GPT2_TRAIN);
    // ANCHOR_END: forward_classifier
    nvtxRangePop();
}

// ---- chapter 14: what the backward pass recomputes ---------------------------------
// At the plan's level of --recompute (recompute.h), the forward pass keeps
// one layer of some activations (activations.c), and the backward pass
// computes them again, for each layer, before its backward pass: with the
// forward pass's own calls, on the inputs it had, so with the same bits.

// The layernorm of linear layer k (qkv's ln1, fc's ln2) of layer l from the
// residual stream it read, into ln (in FP8, into the layer's operand, with
// the forward pass's scale). The forward pass's seam added the residual
// first; its kernels normalize the sum as they stored it, rounded
// (layernorm.h, layernorm_fp8.h), so the layernorm alone of what they
// stored computes the same bits.
static void recompute_layernorm(const GPT2Gpu *model, Fp8Layers *f8, int l, Linear k,
                                const LayernormAt *ln, const floatX *residual) {
    GemmOperands unused;
    seam(model, f8, &unused, l, k, NULL, ln, residual, NULL);
}

// GELU's output, into the buffer every layer shares. In FP8, GELU(fch) cast
// again into fc's projection's operand, as the forward pass cast it. In
// bf16, fc's product again, the forward pass's call: since chapter 04 GELU
// is fc's GEMM epilogue, which takes it from the product's fp32 sum, while
// GELU's own kernel (gelu_forward_v1) would take it from fch, that sum
// rounded to bf16: other bits. The product writes fch again, with the bits
// it has.
static void recompute_gelu(const GPT2Gpu *model, Fp8Layers *f8, int l, const LayerActs *x,
                           const LayerWeights *w) {
    const int B = model->B, T = model->T, C = model->config.channels;
    if (f8) {
        fp8_forward_operands(f8, model->ctx, l, LINEAR_FCPROJ, x->fch, FP8_GELU, B * T);
        return;
    }
    model->plan.ops.matmul_forward(model->ctx, x->fch_gelu, x->fch, x->ln2, w->fcw, w->fcb, B, T,
                                   C, 4 * C, 4 * C, NULL);
}

// Layer l's forward pass again from the residual stream entering it, up to
// what its backward pass reads: everything but fc's projection and the sum
// after it (the residual stream leaving the layer, which is kept).
static void recompute_block(const GPT2Gpu *model, Fp8Layers *f8, int l, const floatX *residual,
                            const LayerActs *x, const LayerWeights *w) {
    const GpuContext *ctx = model->ctx;
    const GpuOps *ops = &model->plan.ops;
    const int B = model->B, T = model->T, C = model->config.channels, NH = model->config.num_heads;
    const LayernormAt ln1 = {x->ln1, x->ln1_mean, x->ln1_rstd, w->ln1w, w->ln1b};
    const LayernormAt ln2 = {x->ln2, x->ln2_mean, x->ln2_rstd, w->ln2w, w->ln2b};
    GemmOperands o_qkv, o;
    const GemmOperands *qkv_in = seam(model, f8, &o_qkv, l, LINEAR_QKV, NULL, &ln1, residual, NULL);
    ops->matmul_forward(ctx, x->qkv, NULL, x->ln1, w->qkvw, w->qkvb, B, T, C, 3 * C, 3 * C, qkv_in);
    ops->attention_forward(ctx, x->atty, x->att, x->att_lse, model->scratch, x->qkv, B, T, C, NH);
    ops->matmul_forward(ctx, x->attproj, NULL, x->atty, w->attprojw, w->attprojb, B, T, C, C, C,
                        fp8_input(f8, &o, ctx, l, LINEAR_ATTPROJ, x->atty, FP8_COPY, B * T));
    const GemmOperands *fc_in = seam(model, f8, &o, l, LINEAR_FC, x->residual2, &ln2, residual,
                                     x->attproj);
    ops->matmul_forward(ctx, f8 ? x->fch : x->fch_gelu, f8 ? NULL : x->fch, x->ln2, w->fcw, w->fcb,
                        B, T, C, 4 * C, 4 * C, fc_in);
    if (f8) fp8_forward_operands(f8, ctx, l, LINEAR_FCPROJ, x->fch, FP8_GELU, B * T);
}

// ANCHOR: recompute_layer
// What layer l's backward pass reads and the forward pass did not keep,
// computed again; `residual` is the residual stream entering the layer.
static void recompute_layer(const GPT2Gpu *model, Fp8Layers *f8, int l, const floatX *residual,
                            const LayerActs *x, const LayerWeights *w) {
    const Recompute level = model->plan.recompute;
    if (level == RECOMPUTE_NONE) return;
    nvtxRangePushA("recompute");
    if (level == RECOMPUTE_BLOCK) {
        recompute_block(model, f8, l, residual, x, w);
    } else {
        if (level >= RECOMPUTE_NORMS) {
            const LayernormAt ln1 = {x->ln1, x->ln1_mean, x->ln1_rstd, w->ln1w, w->ln1b};
            const LayernormAt ln2 = {x->ln2, x->ln2_mean, x->ln2_rstd, w->ln2w, w->ln2b};
            recompute_layernorm(model, f8, l, LINEAR_QKV, &ln1, residual);
            recompute_layernorm(model, f8, l, LINEAR_FC, &ln2, x->residual2);
        }
        recompute_gelu(model, f8, l, x, w);  // in bf16 it reads ln2: after it
    }
    nvtxRangePop();
}
// ANCHOR_END: recompute_layer

// ---- chapter 15: the gradients' mean over the ranks ----------------------------------

// ANCHOR: mean_layer_grads
// Layer l's twelve gradient tensors, averaged over the ranks in one group of
// all-reduces on the communication stream, while the backward pass goes on
// to the layer below.
static void mean_layer_grads(GPT2Gpu *model, int l) {
    const size_t C = (size_t)model->config.channels;
    const LayerWeights g = layer_weights(model->grads_of, l, C);
    floatX *const ptrs[] = {g.ln1w, g.ln1b, g.qkvw,  g.qkvb, g.attprojw, g.attprojb,
                            g.ln2w, g.ln2b, g.fcw,   g.fcb,  g.fcprojw,  g.fcprojb};
    const size_t counts[] = {C, C, 3 * C * C, 3 * C, C * C,     C,
                             C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    if (!model->plan.shard_optimizer) {
        gpu_comm_mean_async(model->comm, model->ctx, ptrs, counts, 12);
        return;
    }
    // --shard-optimizer: each tensor's mean only where its owner keeps it.
    size_t firsts[12];
    for (int i = 0; i < 12; i++) firsts[i] = (size_t)(ptrs[i] - model->grads);
    gpu_comm_mean_to_owners_async(model->comm, model->ctx, model->grads, firsts, counts, 12,
                                  model->shard.shard_values);
}
// ANCHOR_END: mean_layer_grads

// The tensors outside the layers (the embeddings, whose gradient is complete
// only after the encoder's backward pass, and the final layernorm; lm_head
// when untied), then the model's stream waits for every all-reduce: the
// update reads the mean. Without --overlap-comm, every gradient here, in
// one all-reduce of the whole buffer (with --shard-optimizer, one
// reduce-scatter), which nothing then overlaps.
static void mean_other_grads(GPT2Gpu *model) {
    const int sharded = model->plan.shard_optimizer;
    if (!model->plan.overlap_comm) {
        floatX *const all = model->grads;
        if (sharded)  // --shard-optimizer: each shard's mean on its owner
            gpu_comm_mean_scatter_async(model->comm, model->ctx, model->grads,
                                        model->shard.shard_values);
        else
            gpu_comm_mean_async(model->comm, model->ctx, &all, &model->num_params, 1);
        gpu_comm_wait(model->comm, model->ctx);
        return;
    }
    const int others[] = {PARAM_WTE, PARAM_WPE, PARAM_LNFW, PARAM_LNFB, PARAM_LM_HEAD};
    floatX *ptrs[5];
    size_t firsts[5], counts[5];
    int n = 0;
    for (int i = 0; i < 5; i++) {
        if (!model->param_sizes[others[i]]) continue;
        ptrs[n] = model->grads_of[others[i]], counts[n] = model->param_sizes[others[i]];
        firsts[n++] = (size_t)(model->grads_of[others[i]] - model->grads);
    }
    if (sharded)
        gpu_comm_mean_to_owners_async(model->comm, model->ctx, model->grads, firsts, counts, n,
                                      model->shard.shard_values);
    else
        gpu_comm_mean_async(model->comm, model->ctx, ptrs, counts, n);
    gpu_comm_wait(model->comm, model->ctx);
}

// ---- backward --------------------------------------------------------------------

static void backward_pass(GPT2Gpu *model, int zero_grads);

void gpt2_gpu_backward(GPT2Gpu *model) { backward_pass(model, 1); }
void gpt2_gpu_backward_add(GPT2Gpu *model) { backward_pass(model, 0); }

static void backward_pass(GPT2Gpu *model, int zero_grads) {
    const GPT2Config *c = &model->config;
    const int B = model->B, T = model->T;
    const int L = c->num_layers, NH = c->num_heads, C = c->channels;
    const int V = c->vocab_size, Vp = c->padded_vocab_size, ld = model->plan.logits_stride;
    const GpuContext *ctx = model->ctx;
    const GpuOps *ops = &model->plan.ops;
    if (model->last_mode != GPT2_TRAIN)
        die("gpt2_gpu_backward: the last forward pass was not a GPT2_TRAIN one");
    floatX *const *p = model->params_of;
    floatX *const *g = model->grads_of;
    GpuActivations *a = &model->acts;
    GpuActGrads *d = &a->d;
    float *scratch = model->scratch;
    Fp8Layers *f8 = model->fp8_on ? &model->fp8 : NULL;  // a GPT2_TRAIN forward cast for it
    const int BT = B * T;

    nvtxRangePushA("backward");
    // The parameter gradients accumulate (gpu_ops.h): from zero, once a step
    // (chapter 11's micro-batches after the first add to the ones before).
    const int in_backward = model->plan.update_in_backward;  // chapter 14
    const size_t grad_values = in_backward ? model->layer_grads.values : model->num_params;
    if (zero_grads) gpu_zero(ctx, model->grads, grad_values * sizeof(floatX), "memset (gradients)");
    if (in_backward) gpt2_gpu_layer_updates_begin(model);
    if (ops->classifier_backward)
        ops->classifier_backward(ctx, d->logits, d->losses, a->probs, model->batch->targets, B,
                                 T, V, ld);
    ops->matmul_backward(ctx, d->lnf, lm_head_of(g, c), NULL, scratch, d->logits, a->lnf,
                         lm_head_of(p, c), NULL, B, T, C, Vp, ld, NULL);
    // d->residual carries d(loss)/d(residual stream) down through the layers.
    // A residual connection passes its gradient to both branches unchanged, so
    // the branch's backward reads d->residual directly, and the layernorm at
    // the branch's start adds its own contribution into it (+=).
    floatX *last = L > 0 ? layer_acts(a, L - 1, B, T, C, NH).residual3 : a->encoded;
    gpu_zero(ctx, d->residual, (size_t)B * T * C * sizeof(floatX), "memset (d residual)");
    ops->layernorm_backward(ctx, d->residual, g[PARAM_LNFW], g[PARAM_LNFB], scratch, d->lnf, last,
                            p[PARAM_LNFW], a->lnf_mean, a->lnf_rstd, B, T, C);
    // ANCHOR: backward_layers
    for (int l = L - 1; l >= 0; l--) {
        nvtxRangePushA("layer");
        // Chapter 14: with the update in the backward pass, every layer's
        // gradients go to the one layer's buffer.
        LayerWeights w = layer_weights(p, l, C), dw = layer_weights(g, in_backward ? 0 : l, C);
        LayerActs x = layer_acts(a, l, B, T, C, NH);
        floatX *residual_in = l == 0 ? a->encoded : layer_acts(a, l - 1, B, T, C, NH).residual3;
        // Chapter 14: what the forward pass did not keep, computed again (the
        // last layer's is still where the forward pass left it, unless a
        // backward pass has been here since).
        if (l < L - 1 || !model->shared_hold_last_layer)
            recompute_layer(model, f8, l, residual_in, &x, &w);
        GemmOperands o;  // chapter 13's FP8 operands of the product at hand
        const GemmOperands *o8;
        // MLP block, in reverse: through fcproj, then GELU, then fc. In FP8
        // the bias gradients come from the casts (dbias NULL here), and
        // fcproj's writes the gradient of GELU's output into d->fch, which
        // fc's cast takes through GELU (FP8_DGELU).
        o8 = fp8_grad(f8, &o, ctx, l, LINEAR_FCPROJ, d->residual, NULL, dw.fcprojb, BT);
        ops->matmul_backward(ctx, d->fch, dw.fcprojw, o8 ? NULL : dw.fcprojb, scratch,
                             d->residual, x.fch_gelu, w.fcprojw, o8 ? NULL : x.fch, B, T, 4 * C,
                             C, C, o8);
        o8 = fp8_grad(f8, &o, ctx, l, LINEAR_FC, d->fch, x.fch, dw.fcb, BT);
        ops->matmul_backward(ctx, d->ln, dw.fcw, o8 ? NULL : dw.fcb, scratch, d->fch, x.ln2, w.fcw,
                             NULL, B, T, C, 4 * C, 4 * C, o8);
        ops->layernorm_backward(ctx, d->residual, dw.ln2w, dw.ln2b, scratch, d->ln, x.residual2,
                                w.ln2w, x.ln2_mean, x.ln2_rstd, B, T, C);
        // attention block, in reverse
        o8 = fp8_grad(f8, &o, ctx, l, LINEAR_ATTPROJ, d->residual, NULL, dw.attprojb, BT);
        ops->matmul_backward(ctx, d->atty, dw.attprojw, o8 ? NULL : dw.attprojb, scratch,
                             d->residual, x.atty, w.attprojw, NULL, B, T, C, C, C, o8);
        ops->attention_backward(ctx, d->qkv, scratch, d->atty, x.atty, x.qkv, x.att, x.att_lse,
                                B, T, C, NH);
        o8 = fp8_grad(f8, &o, ctx, l, LINEAR_QKV, d->qkv, NULL, dw.qkvb, BT);
        ops->matmul_backward(ctx, d->ln, dw.qkvw, o8 ? NULL : dw.qkvb, scratch, d->qkv, x.ln1,
                             w.qkvw, NULL, B, T, C, 3 * C, 3 * C, o8);
        ops->layernorm_backward(ctx, d->residual, dw.ln1w, dw.ln1b, scratch, d->ln, residual_in,
                                w.ln1w, x.ln1_mean, x.ln1_rstd, B, T, C);
        // ANCHOR: layer_grads_done
        // Chapter 14: the layer's gradients are complete; applied now, their
        // buffer goes to the layer below. Chapter 15: averaged over the ranks
        // meanwhile.
        if (in_backward) gpt2_gpu_update_layer(model, l);
        if (model->comm && model->sync_grads && model->plan.overlap_comm)
            mean_layer_grads(model, l);
        // ANCHOR_END: layer_grads_done
        nvtxRangePop();
    }
    // ANCHOR_END: backward_layers
    if (model->plan.recompute != RECOMPUTE_NONE) model->shared_hold_last_layer = 0;
    ops->encoder_backward(ctx, g[PARAM_WTE], g[PARAM_WPE], d->residual, model->batch->buckets,
                          model->batch->num_buckets, B, T, C);
    if (in_backward) gpt2_gpu_update_layer(model, L);  // wte's gradient is complete only now
    if (model->comm && model->sync_grads) mean_other_grads(model);
    nvtxRangePop();
}

