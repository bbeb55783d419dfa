// gpt2_gpu_update.c: see gpt2_gpu.h. The update of the GPU model: the
// gradient norm, the clipping, and AdamW over every tensor, in the ways the
// chapters take: per tensor with the clipping apart (chapters 00-08), in one
// launch with the clipping folded in (09), with 8-bit moments (10), and with
// the step's values from a table on the device (11).
#include <math.h>
#include <nvtx3/nvToolsExt.h>

#include "adamw.h"
#include "adamw8bit.h"
#include "gpu/gpt2_gpu.h"
#include "optim/quantize8.h"
#include "util/util.h"

// One AdamW step for every tensor, after the clipping.
static void adamw_all_tensors(GPT2Gpu *model, float lr, const AdamWConfig *cfg, int t) {
    const GpuContext *ctx = model->ctx;
    // ANCHOR: adamw_per_tensor
    // Chapter 00 launches AdamW once per tensor of our flat layout (17
    // launches, 16 when lm_head is tied), walking the tensors one by one as
    // PyTorch's for-loop implementation does (PyTorch's GPT-2 has 149 tensors,
    // each a few kernels there); chapter 09 fuses them into one launch.
    const AdamLayout *l = &model->adam;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const size_t n = l->size[i], p = l->param_offset[i], s = l->state_offset[i];
        if (n == 0) continue;
        // master is NULL in the fp32 build: the update is then made in params.
        float *master = model->master ? model->master + p : NULL;
        if (l->quantized[i])  // chapter 10 without the fused launches
            adamw8bit_update_v1(ctx, model->params + p, master, model->grads + p, model->m_q + s,
                                model->v_q + s, model->m_absmax + s / Q8_BLOCK,
                                model->v_absmax + s / Q8_BLOCK, n, lr, cfg,
                                gpt2_param_is_decayed(i), t, NULL);
        else
            adamw_update_v1(ctx, model->params + p, master, model->grads + p, model->m + s,
                            model->v + s, n, lr, cfg, gpt2_param_is_decayed(i), t);
    }
    // ANCHOR_END: adamw_per_tensor
}

// Chapters 00-08: the gradients clipped in place, then adamw_all_tensors.
// Returns the norm when the host read it (chapters 00-02), else NaN.
static float clip_then_adamw(GPT2Gpu *model, float lr, const AdamWConfig *cfg, float max_norm,
                             int t, const float *norm) {
    const GpuContext *ctx = model->ctx;
    const size_t n = model->num_params;
    float host_norm = NAN;
    // ANCHOR: clip
    if (!model->plan.host_reads_norm) {
        // Chapter 03: the norm stays on the device; so does the factor
        // computed from it, which the scaling kernel reads from memory.
        grad_clip_factor_v1(ctx, model->clip_factor, norm, max_norm);
        scale_by_device_factor_v1(ctx, model->grads, n, model->clip_factor);
    } else {
        // Chapters 00-02: the host reads the norm back (and waits for it).
        gpu_memcpy_sync(model->ctx, &host_norm, norm, sizeof host_norm, cudaMemcpyDeviceToHost);
        float factor = grad_clip_factor(host_norm, max_norm);
        if (factor < 1.0f) scale_v1(ctx, model->grads, n, factor);
    }
    // ANCHOR_END: clip
    adamw_all_tensors(model, lr, cfg, t);
    return host_norm;
}

// The step's values as the host gives them (chapters 00-10); chapter 11's
// come from the device's table instead (gpt2_gpu_update_scheduled).
typedef struct {
    float lr;
    int t;
} HostStep;

// The step's values (t, lr, the bias corrections, the clip factor from the
// norm) into device memory, where the fused launches read them.
static void begin_step(GPT2Gpu *model, const HostStep *host, const AdamWConfig *cfg,
                       float max_norm, float *norm) {
    const GpuContext *ctx = model->ctx;
    if (host)
        adamw_begin_step_v2(ctx, model->adamw_step, norm, max_norm, host->t, host->lr, cfg);
    else  // chapter 11: from the device's table (gpt2_gpu.h)
        adamw_begin_step_v3(ctx, model->adamw_step, norm, max_norm,
                            1.0f / (float)model->plan.micro_batches, model->schedule,
                            model->schedule_steps);
}

// The model's moments, where they are on the GPU (all but with chapter
// 14's --offload-optimizer).
static MomentsAt moments_of(const GPT2Gpu *model) {
    return (MomentsAt){model->m,   model->v,        model->m_q,
                       model->v_q, model->m_absmax, model->v_absmax};
}

// The fused update of the tensors of two tables, with fp32 and 8-bit
// moments, those moments at `at`.
static void adamw_fused_tables(GPT2Gpu *model, const AdamWTensors *fp32, const AdamWTensors *q8,
                               MomentsAt at, const AdamWConfig *cfg) {
    const GpuContext *ctx = model->ctx;
    // ANCHOR: adamw_fused_call
    // Chapter 14's --no-master-weights: no fp32 copy (master NULL), and the
    // weights stochastically rounded into bf16 (stochastic_round.cuh).
    const int stochastic = !model->plan.master_weights;
    adamw_fused_v2(ctx, fp32, model->params, model->master, model->grads, at.m, at.v,
                   model->adamw_step, cfg, stochastic);
    // ANCHOR_END: adamw_fused_call
    // ANCHOR: adamw8bit_call
    // Chapter 10: the tensors whose moments are 8-bit, in a launch of their own.
    adamw8bit_fused_v2(ctx, q8, model->params, model->master, model->grads, at.m_q, at.v_q,
                       at.m_absmax, at.v_absmax, model->adamw_step, cfg, stochastic);
    // ANCHOR_END: adamw8bit_call
}

// Chapter 09: two launches after the norm's, whatever the number of tensors,
// and the gradients only read: the clipping is folded into the update. The
// clip factor is the device's even without sync avoidance, where the host
// still reads the norm back, only to return it.
static void adamw_fused_step(GPT2Gpu *model, const HostStep *host, const AdamWConfig *cfg,
                             float max_norm, float *norm) {
    begin_step(model, host, cfg, max_norm, norm);
    if (!model->plan.offload_optimizer) {
        adamw_fused_tables(model, &model->adamw_tensors, &model->adamw8_tensors,
                           moments_of(model), cfg);
        return;
    }
    // Chapter 14's --offload-optimizer: a layer at a time, as its moments
    // come, from the last, then the tensors outside the layers (l = L).
    const int L = model->config.num_layers;
    model->adamw_cfg = *cfg;
    gpt2_gpu_layer_updates_begin(model);
    for (int l = L - 1; l >= 0; l--) gpt2_gpu_update_layer(model, l);
    gpt2_gpu_update_layer(model, L);
}

// ---- chapter 14: the update in the backward pass ---------------------------------

static void begin_in_backward(GPT2Gpu *model, const HostStep *host, const AdamWConfig *cfg,
                              float *norm) {
    if (!model->plan.update_in_backward)
        die("gpt2_gpu_update_begin: the run's plan updates after the backward pass");
    model->adamw_cfg = *cfg;
    // No clipping (max_norm 0: the factor is 1): the plan refuses --grad-clip.
    begin_step(model, host, cfg, 0.0f, norm);
}

void gpt2_gpu_update_begin(GPT2Gpu *model, float lr, const AdamWConfig *cfg, int t, float *norm) {
    const HostStep host = {lr, t};
    begin_in_backward(model, &host, cfg, norm);
}

void gpt2_gpu_update_begin_scheduled(GPT2Gpu *model, const AdamWConfig *cfg, float *norm) {
    begin_in_backward(model, NULL, cfg, norm);
}

void gpt2_gpu_layer_updates_begin(GPT2Gpu *model) {
    if (model->plan.offload_optimizer) optimizer_offload_begin(&model->offload, model->ctx);
}

// Group l's moments: where --offload-optimizer has brought them, or the
// model's.
static MomentsAt acquire_moments(GPT2Gpu *model, int l) {
    if (model->plan.offload_optimizer)
        return optimizer_offload_acquire(&model->offload, model->ctx, l);
    return moments_of(model);
}

// ANCHOR: update_layer
void gpt2_gpu_update_layer(GPT2Gpu *model, int l) {
    const GpuContext *ctx = model->ctx;
    const LayerGrads *g = &model->layer_grads;
    const AdamWTensors *tables = &model->layer_tables[2 * l];
    const int L = model->config.num_layers, in_backward = model->plan.update_in_backward;
    floatX *layer = model->grads + g->layer_offset;  // the one layer's gradients
    nvtxRangePushA("update (a layer)");
    // --update-in-backward: layer l's share of the norm, before its
    // gradients go. The first layer's stay in the buffer, and are counted
    // with the rest's at the end.
    if (in_backward && l > 0 && l < L)
        grad_norm_v1(ctx, model->norm_parts + l, model->scratch, layer, g->layer_values);
    if (in_backward && l == L)
        grad_norm_v1(ctx, model->norm_parts, model->scratch, model->grads, g->values);
    adamw_fused_tables(model, &tables[0], &tables[1], acquire_moments(model, l),
                       &model->adamw_cfg);
    if (model->plan.offload_optimizer) {
        optimizer_offload_release(&model->offload, ctx, l);
        if (l == L) optimizer_offload_end(&model->offload, ctx);
    }
    // The layer below adds its gradients into the buffer: from zero.
    if (in_backward && l > 0 && l < L)
        gpu_zero(ctx, layer, g->layer_values * sizeof(floatX), "memset (a layer's gradients)");
    nvtxRangePop();
}
// ANCHOR_END: update_layer

// What is left of the step once the backward pass has updated every tensor:
// the norm from its parts (the gradients are gone).
static void end_in_backward(GPT2Gpu *model, float *norm) {
    grad_norm_of_parts_v1(model->ctx, norm, model->norm_parts, model->config.num_layers);
}

// ---- chapter 15: the update of a shard -------------------------------------------

// ANCHOR: sharded_update
// --shard-optimizer: the rank holds the gradients' mean of its shard only.
// The norm of the whole is the norm of the ranks' norms: each rank's part,
// gathered by every rank, then added in the ranks' order, so that every
// rank clips by the same factor.
static void sharded_norm(GPT2Gpu *model, float *norm) {
    const OptimizerShard *s = &model->shard;
    grad_norm_v1(model->ctx, model->shard_norms + s->rank, model->scratch,
                 model->grads + s->first, s->last - s->first);
    if (model->comm) gpu_comm_gather_floats(model->comm, model->ctx, model->shard_norms, 1);
    grad_norm_of_parts_v1(model->ctx, norm, model->shard_norms, s->world_size);
}

// The shard updated (its tables: gpt2_gpu.c's adamw_tables), every rank
// takes every other's new weights.
static void sharded_step(GPT2Gpu *model, const HostStep *host, const AdamWConfig *cfg,
                         float max_norm, float *norm) {
    sharded_norm(model, norm);
    adamw_fused_step(model, host, cfg, max_norm, norm);
    if (model->comm) gpu_comm_gather(model->comm, model->ctx, model->params,
                                     model->shard.shard_values);
}
// ANCHOR_END: sharded_update

static float update(GPT2Gpu *model, const HostStep *host, const AdamWConfig *cfg, float max_norm,
                    float *norm) {
    nvtxRangePushA("optimizer");
    float host_norm = NAN;
    if (model->plan.update_in_backward) {
        end_in_backward(model, norm);
    } else if (model->plan.shard_optimizer) {
        sharded_step(model, host, cfg, max_norm, norm);
    } else if (model->plan.fused_update) {
        grad_norm_v1(model->ctx, norm, model->scratch, model->grads, model->num_params);
        adamw_fused_step(model, host, cfg, max_norm, norm);
    } else {
        grad_norm_v1(model->ctx, norm, model->scratch, model->grads, model->num_params);
        host_norm = clip_then_adamw(model, host->lr, cfg, max_norm, host->t, norm);
    }
    if (model->plan.fused_update && model->plan.host_reads_norm)
        gpu_memcpy_sync(model->ctx, &host_norm, norm, sizeof host_norm, cudaMemcpyDeviceToHost);
    // Chapter 13: the step's amaxes into their histories, for the next
    // step's delayed scales (fp8.h).
    if (model->fp8_on) fp8_end_step(&model->fp8, model->ctx);
    nvtxRangePop();
    return host_norm;
}

float gpt2_gpu_update(GPT2Gpu *model, float lr, const AdamWConfig *cfg, float max_norm, int t,
                      float *norm) {
    if (model->plan.device_schedule)
        die("gpt2_gpu_update: the run's plan takes each step's values from the device "
            "(gpt2_gpu_update_scheduled)");
    const HostStep host = {lr, t};
    return update(model, &host, cfg, max_norm, norm);
}

float gpt2_gpu_update_scheduled(GPT2Gpu *model, const AdamWConfig *cfg, float max_norm,
                                float *norm) {
    if (!model->schedule)
        die("gpt2_gpu_update_scheduled: no schedule on the device (gpt2_gpu_set_schedule)");
    return update(model, NULL, cfg, max_norm, norm);
}
