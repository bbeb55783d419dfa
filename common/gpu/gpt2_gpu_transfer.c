// gpt2_gpu_transfer.c: see gpt2_gpu.h. What crosses between the host and
// the GPU model outside the training step: the weights, AdamW's moments, the
// logits and the loss, each converted between the host's fp32 and the
// device's storage type.
#include <stdlib.h>
#include <string.h>

#include "gpu/floatx_host.h"
#include "gpu/gpt2_gpu.h"
#include "util/util.h"

void gpt2_gpu_download_logits(const GPT2Gpu *model, size_t first_row, size_t rows, int width,
                              float *out) {
    const size_t ld = (size_t)model->plan.logits_stride;
    float *full = xmalloc(rows * ld * sizeof(float));
    gpt2_gpu_download_floatx(model, model->acts.logits + first_row * ld, full, rows * ld);
    for (size_t r = 0; r < rows; r++)
        memcpy(out + r * width, full + r * ld, (size_t)width * sizeof(float));
    free(full);
}

float gpt2_gpu_read_loss(const GPT2Gpu *model) {
    float loss;
    gpu_memcpy_sync(model->ctx, &loss, model->mean_loss, sizeof loss, cudaMemcpyDeviceToHost);
    return loss;
}

// ---- chapter 15: what the shards hold, gathered on rank 0 -----------------------

// Rank `from`'s `bytes` of device memory at `mine` (its own buffer, read on
// that rank only) into host memory `out` on rank 0: a copy on rank 0 itself,
// else sent over NCCL in pieces through `bounce` (BOUNCE_BYTES of rank 0's
// device memory), so that rank 0 never holds another rank's whole shard on
// its GPU. Every rank calls it for every `from`; the ranks it does not
// concern pass it by.
#define BOUNCE_BYTES ((size_t)16 << 20)

static void shard_bytes_to_rank0(const GPT2Gpu *model, int from, const void *mine, size_t bytes,
                                 void *out, void *bounce) {
    const int rank = model->shard.rank;
    const GpuContext *ctx = model->ctx;
    if (bytes == 0 || (rank != 0 && rank != from)) return;
    if (from == 0) {
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        gpu_memcpy_sync(ctx, out, mine, bytes, cudaMemcpyDeviceToHost);
        return;
    }
    for (size_t at = 0; at < bytes; at += BOUNCE_BYTES) {
        const size_t n = bytes - at < BOUNCE_BYTES ? bytes - at : BOUNCE_BYTES;
        if (rank == from) {
            gpu_comm_send(model->comm, ctx, (const char *)mine + at, n, 0);
            continue;
        }
        gpu_comm_recv(model->comm, ctx, bounce, n, from);
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        gpu_memcpy_sync(ctx, (char *)out + at, bounce, n, cudaMemcpyDeviceToHost);
    }
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

// Rank r's shard of the run, as rank r made it (every rank can work it out).
static OptimizerShard shard_of_rank(const GPT2Gpu *model, int r) {
    OptimizerShard s;
    char err[ERR_LEN];
    if (optimizer_shard_for(&s, &model->adam, r, model->shard.world_size, err))
        die("shard_of_rank: %s", err);
    return s;
}

// The master weights (num_params floats) on rank 0, each rank's shard in
// its place.
static void gather_sharded_master(const GPT2Gpu *model, float *host) {
    void *bounce = model->shard.rank == 0 ? gpu_malloc(BOUNCE_BYTES, "gather bounce") : NULL;
    for (int r = 0; r < model->shard.world_size; r++) {
        const OptimizerShard theirs = shard_of_rank(model, r);
        float *place = model->shard.rank == 0 ? host + theirs.first : NULL;
        shard_bytes_to_rank0(model, r, model->master, (theirs.last - theirs.first) * sizeof(float),
                             place, bounce);
    }
    gpu_free(bounce);
}

// AdamW's moments in the whole layout, on rank 0: each rank's shard's
// buffers, then put in their places (optimizer_shard_gather). The other
// ranks only send: nothing is allocated for them.
static void gather_sharded_state(const GPT2Gpu *model, AdamState *whole) {
    const int receiver = model->shard.rank == 0;
    void *bounce = receiver ? gpu_malloc(BOUNCE_BYTES, "gather bounce") : NULL;
    for (int r = 0; r < model->shard.world_size; r++) {
        const OptimizerShard theirs = shard_of_rank(model, r);
        const AdamLayout *l = &theirs.local;
        AdamState got = {0};
        if (receiver) adam_state_alloc(&got, l);
        shard_bytes_to_rank0(model, r, model->m, l->fp32_values * sizeof(float), got.m, bounce);
        shard_bytes_to_rank0(model, r, model->v, l->fp32_values * sizeof(float), got.v, bounce);
        shard_bytes_to_rank0(model, r, model->m_q, l->q8_values, got.m_q, bounce);
        shard_bytes_to_rank0(model, r, model->v_q, l->q8_values, got.v_q, bounce);
        shard_bytes_to_rank0(model, r, model->m_absmax, l->q8_blocks * sizeof(float),
                             got.m_absmax, bounce);
        shard_bytes_to_rank0(model, r, model->v_absmax, l->q8_blocks * sizeof(float),
                             got.v_absmax, bounce);
        if (!receiver) continue;
        optimizer_shard_gather(&theirs, &got, whole);
        adam_state_free(&got);
    }
    gpu_free(bounce);
}

// ANCHOR: adam_state_transfer
static void check_layout(const GPT2Gpu *model, const AdamState *s) {
    if (!adam_layout_equal(&s->layout, &model->adam))
        die("gpt2_gpu: an AdamState of another layout (adam_state_convert it first)");
}

// The moments of the buffers at hand (the model's, or, with
// --shard-optimizer, the rank's shard's) into a state of their layout.
static void download_moments(const GPT2Gpu *model, const AdamLayout *l, AdamState *s) {
    const GpuContext *ctx = model->ctx;
    gpu_memcpy_sync(ctx, s->m, model->m, l->fp32_values * sizeof(float), cudaMemcpyDeviceToHost);
    gpu_memcpy_sync(ctx, s->v, model->v, l->fp32_values * sizeof(float), cudaMemcpyDeviceToHost);
    if (l->q8_values == 0) return;
    gpu_memcpy_sync(ctx, s->m_q, model->m_q, l->q8_values, cudaMemcpyDeviceToHost);
    gpu_memcpy_sync(ctx, s->v_q, model->v_q, l->q8_values, cudaMemcpyDeviceToHost);
    gpu_memcpy_sync(ctx, s->m_absmax, model->m_absmax, l->q8_blocks * sizeof(float),
                    cudaMemcpyDeviceToHost);
    gpu_memcpy_sync(ctx, s->v_absmax, model->v_absmax, l->q8_blocks * sizeof(float),
                    cudaMemcpyDeviceToHost);
}

static void upload_moments(GPT2Gpu *model, const AdamLayout *l, const AdamState *s) {
    const GpuContext *ctx = model->ctx;
    gpu_memcpy_sync(ctx, model->m, s->m, l->fp32_values * sizeof(float), cudaMemcpyHostToDevice);
    gpu_memcpy_sync(ctx, model->v, s->v, l->fp32_values * sizeof(float), cudaMemcpyHostToDevice);
    if (l->q8_values == 0) return;
    gpu_memcpy_sync(ctx, model->m_q, s->m_q, l->q8_values, cudaMemcpyHostToDevice);
    gpu_memcpy_sync(ctx, model->v_q, s->v_q, l->q8_values, cudaMemcpyHostToDevice);
    gpu_memcpy_sync(ctx, model->m_absmax, s->m_absmax, l->q8_blocks * sizeof(float),
                    cudaMemcpyHostToDevice);
    gpu_memcpy_sync(ctx, model->v_absmax, s->v_absmax, l->q8_blocks * sizeof(float),
                    cudaMemcpyHostToDevice);
}

void gpt2_gpu_get_state(const GPT2Gpu *model, AdamState *s) {
    if (model->plan.shard_optimizer) {  // chapter 15: each rank's shard, to rank 0
        if (model->shard.rank == 0) check_layout(model, s);
        gather_sharded_state(model, s);
        return;
    }
    check_layout(model, s);
    if (model->plan.offload_optimizer) {  // chapter 14: in blocks, most on the host
        optimizer_offload_get(&model->offload, model->ctx, s);
        return;
    }
    download_moments(model, &model->adam, s);
}

void gpt2_gpu_set_state(GPT2Gpu *model, const AdamState *s) {
    check_layout(model, s);
    if (model->plan.offload_optimizer) {
        optimizer_offload_set(&model->offload, model->ctx, s);
        return;
    }
    if (!model->plan.shard_optimizer) {
        upload_moments(model, &model->adam, s);
        return;
    }
    // Chapter 15: every rank has the whole state (it read the file); it
    // keeps its shard's.
    AdamState mine;
    adam_state_alloc(&mine, &model->shard.local);
    optimizer_shard_scatter(&model->shard, s, &mine);
    upload_moments(model, &model->shard.local, &mine);
    adam_state_free(&mine);
}
// ANCHOR_END: adam_state_transfer

// ANCHOR: fp8_state_transfer
// The file keeps, per FP8 tensor, the floats of its Fp8Meta (fp8.h) that
// the casts read and write (scale, amax, history), in the same order;
// the padding that aligns the device's array is not kept.
_Static_assert(LINEARS * FP8_ROLES == TRAIN_STATE_FP8_PER_LAYER,
               "train_state.h's FP8 tensors a layer are fp8_layers.h's");

static int fp8_tensors_of(const GPT2Gpu *model) { return model->fp8.L * LINEARS * FP8_ROLES; }

void gpt2_gpu_get_fp8_state(const GPT2Gpu *model, Fp8State *s) {
    *s = (Fp8State){0};
    if (!model->fp8_on) return;
    const int n = fp8_tensors_of(model);
    Fp8Meta *metas = xmalloc((size_t)n * sizeof *metas);
    gpu_memcpy_sync(model->ctx, metas, model->fp8.metas, (size_t)n * sizeof *metas,
                    cudaMemcpyDeviceToHost);
    fp8_state_alloc(s, n, FP8_HISTORY);
    s->history_ready = model->fp8.history_ready;
    for (int i = 0; i < n; i++) {
        float *t = fp8_state_tensor(s, i);
        t[0] = metas[i].scale;
        t[1] = metas[i].amax;
        memcpy(t + 2, metas[i].history, sizeof metas[i].history);
    }
    free(metas);
}

int gpt2_gpu_set_fp8_state(GPT2Gpu *model, const Fp8State *s, char *err) {
    if (!model->fp8_on) return fail(err, "FP8 scales, for a model that runs no FP8 GEMMs");
    const int n = fp8_tensors_of(model);
    if (s->tensors != n)
        return fail(err, "FP8 scales of %d tensors, but the model has %d (%d layers of %d)",
                    s->tensors, n, model->fp8.L, LINEARS * FP8_ROLES);
    if (s->history != FP8_HISTORY)
        return fail(err, "amax histories of %d steps, but this build keeps %d (fp8.h's "
                         "FP8_HISTORY): its delayed scales would look back over other steps",
                    s->history, FP8_HISTORY);
    Fp8Meta *metas = xcalloc((size_t)n, sizeof *metas);
    for (int i = 0; i < n; i++) {
        const float *t = fp8_state_tensor(s, i);
        metas[i].scale = t[0];
        metas[i].amax = t[1];
        memcpy(metas[i].history, t + 2, sizeof metas[i].history);
    }
    gpu_memcpy_sync(model->ctx, model->fp8.metas, metas, (size_t)n * sizeof *metas,
                    cudaMemcpyHostToDevice);
    // 1 after any step that ended: the next step casts with delayed scales.
    model->fp8.history_ready = s->history_ready;
    free(metas);
    return 0;
}
// ANCHOR_END: fp8_state_transfer

void gpt2_gpu_get_moments(const GPT2Gpu *model, float *m, float *v) {
    AdamState s;
    adam_state_alloc(&s, &model->adam);
    gpt2_gpu_get_state(model, &s);
    adam_state_to_full(&s, m, v);
    adam_state_free(&s);
}

void gpt2_gpu_download(const GPT2Gpu *model, const float *device_buffer, float *host) {
    gpu_memcpy_sync(model->ctx, host, device_buffer, model->num_params * sizeof(float),
                    cudaMemcpyDeviceToHost);
}

void gpt2_gpu_upload(GPT2Gpu *model, float *device_buffer, const float *host) {
    gpu_memcpy_sync(model->ctx, device_buffer, host, model->num_params * sizeof(float),
                    cudaMemcpyHostToDevice);
}

// ---- between the host's fp32 and the device's floatX ------------------------------

// ANCHOR: floatx_host_conversion
void gpt2_gpu_download_floatx(const GPT2Gpu *model, const floatX *device, float *host, size_t n) {
    floatX *stored = xmalloc(n * sizeof(floatX));
    gpu_memcpy_sync(model->ctx, stored, device, n * sizeof(floatX), cudaMemcpyDeviceToHost);
    floats_from_floatx(host, stored, n);
    free(stored);
}

void gpt2_gpu_get_params(const GPT2Gpu *model, float *host) {
    if (model->master && model->plan.shard_optimizer) gather_sharded_master(model, host);
    else if (!host) return;  // a rank other than 0 of a --shard-optimizer save: nothing to send
    else if (model->master) gpt2_gpu_download(model, model->master, host);
    else gpt2_gpu_download_floatx(model, model->params, host, model->num_params);
}

void gpt2_gpu_set_params(GPT2Gpu *model, const float *host) {
    const size_t n = model->num_params;
    // The bf16 build: the fp32 weights become the master copy as they are,
    // and the bf16 working copy is each of them rounded to nearest even.
    // Chapter 15's --shard-optimizer keeps the master weights of its shard.
    const OptimizerShard *s = &model->shard;
    if (model->master && model->plan.shard_optimizer)
        gpu_memcpy_sync(model->ctx, model->master, host + s->first,
                        (s->last - s->first) * sizeof(float), cudaMemcpyHostToDevice);
    else if (model->master)
        gpt2_gpu_upload(model, model->master, host);
    floatX *stored = xmalloc(n * sizeof(floatX));
    floatx_from_floats(stored, host, n);
    gpu_memcpy_sync(model->ctx, model->params, stored, n * sizeof(floatX), cudaMemcpyHostToDevice);
    free(stored);
}
// ANCHOR_END: floatx_host_conversion
