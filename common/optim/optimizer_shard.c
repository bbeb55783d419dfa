// optimizer_shard.c: see optimizer_shard.h.
#include "optim/optimizer_shard.h"

#include <string.h>

#include "optim/quantize8.h"
#include "util/util.h"

// The fp32 moments of each slice start on 64 floats (256 bytes) in the
// shard's buffers, as the model's buffers do, so that the fused update's
// vector loads find them aligned.
#define FP32_ALIGN 64

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }
static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

// A quantized tensor may be cut at `at` (a shard's edge inside it) only on a
// block of its 256.
static int check_cut(const AdamLayout *whole, int i, size_t at, char *err) {
    const size_t start = whole->param_offset[i], end = start + whole->size[i];
    if (!whole->quantized[i] || at <= start || at >= end || (at - start) % Q8_BLOCK == 0)
        return 0;
    return fail(err, "--shard-optimizer: a shard's edge would cut %s's 8-bit moments inside a "
                     "block of %d (the tensor starts at value %zu, not a multiple of %d)",
                gpt2_param_names[i], Q8_BLOCK, start, Q8_BLOCK);
}

int optimizer_shard_for(OptimizerShard *s, const AdamLayout *whole, int rank, int world_size,
                        char *err) {
    memset(s, 0, sizeof *s);
    const size_t P = whole->num_params, N = (size_t)world_size;
    s->rank = rank, s->world_size = world_size;
    s->shard_values = round_up((P + N - 1) / N, Q8_BLOCK);
    s->padded_values = N * s->shard_values;
    s->first = min_size((size_t)rank * s->shard_values, P);
    s->last = min_size(s->first + s->shard_values, P);
    AdamLayout *l = &s->local;
    l->num_params = s->last - s->first;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (check_cut(whole, i, s->first, err) || check_cut(whole, i, s->last, err)) return -1;
        const size_t start = whole->param_offset[i], end = start + whole->size[i];
        const size_t a = max_size(start, s->first), b = min_size(end, s->last);
        l->quantized[i] = whole->quantized[i];
        l->param_offset[i] = a < b ? a : s->first;
        l->size[i] = a < b ? b - a : 0;
        if (l->quantized[i]) {
            l->state_offset[i] = l->q8_values;
            l->q8_values += q8_blocks(l->size[i]) * Q8_BLOCK;
        } else {
            l->state_offset[i] = round_up(l->fp32_values, FP32_ALIGN);
            l->fp32_values = l->state_offset[i] + l->size[i];
        }
    }
    l->q8_blocks = l->q8_values / Q8_BLOCK;
    return 0;
}

void optimizer_shard_table(AdamWTensors *t, const OptimizerShard *s, const int *decay,
                           int quantized, size_t values_per_block) {
    const AdamLayout *l = &s->local;
    memset(t, 0, sizeof *t);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (l->size[i] == 0 || l->quantized[i] != quantized) continue;
        const int k = t->count++;
        t->offset[k] = l->param_offset[i];
        t->size[k] = l->size[i];
        t->state_offset[k] = l->state_offset[i];
        t->master_shift[k] = -(long long)s->first;
        t->decay[k] = decay[i] != 0;
        t->first_block[k] = t->blocks;
        t->blocks += (unsigned int)((l->size[i] + values_per_block - 1) / values_per_block);
    }
}

// Where slice i of the shard starts in the whole state: its first moment
// (fp32) or byte (8-bit; on a block of 256, as is its place in the shard's).
static size_t whole_place(const OptimizerShard *s, const AdamLayout *whole, int i) {
    return whole->state_offset[i] + (s->local.param_offset[i] - whole->param_offset[i]);
}

// Copies slice i's moments from src to dst, one of them the shard's state
// and the other the whole's (`into_whole` says which is dst). An 8-bit
// slice is whole blocks: cut at a shard's edge on a block
// (optimizer_shard_for), or ending where its tensor does, whose last block
// both states pad alike.
static void copy_slice(const OptimizerShard *s, const AdamLayout *whole, const AdamState *src,
                       AdamState *dst, int i, int into_whole) {
    const size_t n = s->local.size[i], mine = s->local.state_offset[i];
    const size_t at = whole_place(s, whole, i);
    const size_t from = into_whole ? mine : at, to = into_whole ? at : mine;
    if (!s->local.quantized[i]) {
        memcpy(dst->m + to, src->m + from, n * sizeof(float));
        memcpy(dst->v + to, src->v + from, n * sizeof(float));
        return;
    }
    const size_t blocks = q8_blocks(n);
    memcpy(dst->m_q + to, src->m_q + from, blocks * Q8_BLOCK);
    memcpy(dst->v_q + to, src->v_q + from, blocks * Q8_BLOCK);
    memcpy(dst->m_absmax + to / Q8_BLOCK, src->m_absmax + from / Q8_BLOCK, blocks * sizeof(float));
    memcpy(dst->v_absmax + to / Q8_BLOCK, src->v_absmax + from / Q8_BLOCK, blocks * sizeof(float));
}

void optimizer_shard_gather(const OptimizerShard *s, const AdamState *shard, AdamState *whole) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (s->local.size[i]) copy_slice(s, &whole->layout, shard, whole, i, 1);
}

void optimizer_shard_scatter(const OptimizerShard *s, const AdamState *whole, AdamState *shard) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (s->local.size[i]) copy_slice(s, &whole->layout, whole, shard, i, 0);
}
