// optimizer_offload.c: see optimizer_offload.h.
#include "gpu/optimizer_offload.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static MomentsAt moments_in(unsigned char *block, const StateBlock *b) {
    return (MomentsAt){(float *)(block + b->m),        (float *)(block + b->v),
                       block + b->m_q,                 block + b->v_q,
                       (float *)(block + b->m_absmax), (float *)(block + b->v_absmax)};
}

size_t optimizer_offload_device_bytes(const GPT2Config *cfg, const AdamLayout *adam) {
    return 2 * state_block_for(cfg, adam, 0).bytes + state_block_for(cfg, adam, 1).bytes;
}

size_t optimizer_offload_host_bytes(const GPT2Config *cfg, const AdamLayout *adam) {
    return (size_t)cfg->num_layers * state_block_for(cfg, adam, 0).bytes;
}

void optimizer_offload_init(OptimizerOffload *o, const GPT2Config *cfg, const AdamLayout *adam) {
    memset(o, 0, sizeof *o);
    o->config = *cfg;
    o->layer = state_block_for(cfg, adam, 0);
    o->rest = state_block_for(cfg, adam, 1);
    const size_t host_bytes = (size_t)cfg->num_layers * o->layer.bytes;
    CUDA_CHECK(cudaMallocHost((void **)&o->host, host_bytes));
    memset(o->host, 0, host_bytes);
    o->slots = gpu_malloc(2 * o->layer.bytes, "2 layers' AdamW moments (--offload-optimizer)");
    o->rest_block = gpu_malloc(o->rest.bytes, "AdamW moments outside the layers");
    CUDA_CHECK(cudaMemset(o->rest_block, 0, o->rest.bytes));
    o->device_bytes = 2 * o->layer.bytes + o->rest.bytes;
    CUDA_CHECK(cudaStreamCreateWithFlags(&o->up, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&o->down, cudaStreamNonBlocking));
    // Only waited for, never timed: cheaper to record.
    cudaEvent_t *events[] = {&o->fork, &o->in[0], &o->in[1], &o->updated[0], &o->updated[1],
                             &o->out[0], &o->out[1]};
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(events[i], cudaEventDisableTiming));
}

void optimizer_offload_free(OptimizerOffload *o) {
    if (!o->host) return;
    CUDA_CHECK(cudaStreamSynchronize(o->up));
    CUDA_CHECK(cudaStreamSynchronize(o->down));
    CUDA_CHECK(cudaFreeHost(o->host));
    gpu_free(o->slots);
    gpu_free(o->rest_block);
    CUDA_CHECK(cudaStreamDestroy(o->up));
    CUDA_CHECK(cudaStreamDestroy(o->down));
    cudaEvent_t events[] = {o->fork,       o->in[0],  o->in[1], o->updated[0],
                            o->updated[1], o->out[0], o->out[1]};
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        CUDA_CHECK(cudaEventDestroy(events[i]));
    memset(o, 0, sizeof *o);
}

static unsigned char *slot_of(const OptimizerOffload *o, int l) {
    return o->slots + (size_t)(l % 2) * o->layer.bytes;
}

static unsigned char *host_of(const OptimizerOffload *o, int l) {
    return o->host + (size_t)l * o->layer.bytes;
}

// ANCHOR: offload_copies
// Layer l's block into its slot, on the up stream, once the slot's last
// block has gone back (a layer two above, this step; none at the start).
static void copy_in(OptimizerOffload *o, int l, int slot_was_used) {
    const int s = l % 2;
    if (slot_was_used) CUDA_CHECK(cudaStreamWaitEvent(o->up, o->out[s], 0));
    CUDA_CHECK(cudaMemcpyAsync(slot_of(o, l), host_of(o, l), o->layer.bytes,
                               cudaMemcpyHostToDevice, o->up));
    CUDA_CHECK(cudaEventRecord(o->in[s], o->up));
}

void optimizer_offload_begin(OptimizerOffload *o, const GpuContext *ctx) {
    const int L = o->config.num_layers;
    // The up stream starts where the model's stream is: after the last
    // step, whose copies the model's stream waited for.
    CUDA_CHECK(cudaEventRecord(o->fork, ctx->stream));
    CUDA_CHECK(cudaStreamWaitEvent(o->up, o->fork, 0));
    CUDA_CHECK(cudaStreamWaitEvent(o->down, o->fork, 0));
    for (int l = L - 1; l >= 0 && l >= L - 2; l--) copy_in(o, l, 0);
}

MomentsAt optimizer_offload_acquire(OptimizerOffload *o, const GpuContext *ctx, int l) {
    if (l == o->config.num_layers) return moments_in(o->rest_block, &o->rest);
    CUDA_CHECK(cudaStreamWaitEvent(ctx->stream, o->in[l % 2], 0));
    return moments_in(slot_of(o, l), &o->layer);
}

void optimizer_offload_release(OptimizerOffload *o, const GpuContext *ctx, int l) {
    if (l == o->config.num_layers) return;
    const int s = l % 2;
    CUDA_CHECK(cudaEventRecord(o->updated[s], ctx->stream));
    CUDA_CHECK(cudaStreamWaitEvent(o->down, o->updated[s], 0));
    CUDA_CHECK(cudaMemcpyAsync(host_of(o, l), slot_of(o, l), o->layer.bytes,
                               cudaMemcpyDeviceToHost, o->down));
    CUDA_CHECK(cudaEventRecord(o->out[s], o->down));
    if (l >= 2) copy_in(o, l - 2, 1);
}

void optimizer_offload_end(OptimizerOffload *o, const GpuContext *ctx) {
    const int L = o->config.num_layers;
    // The last copies out: of layers 1 and 0, or of the one layer there is.
    for (int s = 0; s < 2 && s < L; s++) CUDA_CHECK(cudaStreamWaitEvent(ctx->stream, o->out[s], 0));
}
// ANCHOR_END: offload_copies

void optimizer_offload_get(const OptimizerOffload *o, const GpuContext *ctx, AdamState *s) {
    gpu_stream_sync(ctx, "the optimizer's copies, before reading its moments");
    const int L = o->config.num_layers;
    for (int l = 0; l < L; l++) state_block_scatter(&o->layer, host_of(o, l), &o->config, l, s);
    unsigned char *rest = xmalloc(o->rest.bytes);
    gpu_memcpy_sync(ctx, rest, o->rest_block, o->rest.bytes, cudaMemcpyDeviceToHost);
    state_block_scatter(&o->rest, rest, &o->config, L, s);
    free(rest);
}

void optimizer_offload_set(OptimizerOffload *o, const GpuContext *ctx, const AdamState *s) {
    gpu_stream_sync(ctx, "the optimizer's copies, before writing its moments");
    const int L = o->config.num_layers;
    for (int l = 0; l < L; l++) state_block_gather(&o->layer, s, &o->config, l, host_of(o, l));
    unsigned char *rest = xcalloc(o->rest.bytes, 1);
    state_block_gather(&o->rest, s, &o->config, L, rest);
    gpu_memcpy_sync(ctx, o->rest_block, rest, o->rest.bytes, cudaMemcpyHostToDevice);
    free(rest);
}
