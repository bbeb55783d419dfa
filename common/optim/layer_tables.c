// layer_tables.c: see layer_tables.h.
#include "optim/layer_tables.h"

#include <string.h>

#include "optim/quantize8.h"
#include "util/util.h"

int layer_tensor(int i) { return i >= PARAM_LN1W && i <= PARAM_FCPROJB; }

LayerGrads layer_grads_for(const GPT2Config *cfg) {
    LayerGrads g;
    memset(&g, 0, sizeof g);
    size_t full[NUM_PARAM_TENSORS];
    gpt2_param_sizes(cfg, full);
    const size_t L = (size_t)cfg->num_layers;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        g.size[i] = layer_tensor(i) && L > 0 ? full[i] / L : full[i];
        g.offset[i] = g.values;
        g.values += g.size[i];
        if (layer_tensor(i)) g.layer_values += g.size[i];
    }
    g.layer_offset = g.offset[PARAM_LN1W];
    return g;
}

// Tensor i's slice in group l (layer l, or with l = L outside the layers):
// its first value counted from the tensor's start, and its values.
static size_t slice_of(const GPT2Config *cfg, const AdamLayout *adam, int i, int l,
                       size_t *into) {
    const size_t L = (size_t)cfg->num_layers;
    const size_t n = layer_tensor(i) ? adam->size[i] / L : adam->size[i];
    *into = layer_tensor(i) ? (size_t)l * n : 0;
    return n;
}

// 1 when tensor i has a slice in group l.
static int in_group(const GPT2Config *cfg, int i, int l) {
    return layer_tensor(i) == (l < cfg->num_layers);
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

StateBlock state_block_for(const GPT2Config *cfg, const AdamLayout *adam, int rest) {
    StateBlock b;
    memset(&b, 0, sizeof b);
    const int l = rest ? cfg->num_layers : 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t into;
        const size_t n = slice_of(cfg, adam, i, l, &into);
        if (!in_group(cfg, i, l) || n == 0) continue;
        if (adam->quantized[i]) {
            b.q8_at[i] = b.q8_values;
            b.q8_values += round_up(n, Q8_BLOCK);
        } else {
            b.fp32_at[i] = b.fp32_values;
            b.fp32_values += n;
        }
    }
    // The arrays one after another, each on 256 bytes.
    const size_t fp32 = round_up(b.fp32_values * sizeof(float), 256);
    const size_t scales = round_up(b.q8_values / Q8_BLOCK * sizeof(float), 256);
    const size_t q8 = round_up(b.q8_values, 256);
    b.m = 0, b.v = fp32;
    b.m_absmax = 2 * fp32, b.v_absmax = 2 * fp32 + scales;
    b.m_q = 2 * fp32 + 2 * scales, b.v_q = b.m_q + q8;
    b.bytes = b.v_q + q8;
    return b;
}

// bytes between a state's array and a block's, the way `to_block` says.
static void copy_part(void *state, void *block, size_t bytes, int to_block) {
    if (to_block) memcpy(block, state, bytes);
    else memcpy(state, block, bytes);
}

// Copies group l's moments between a state (s) and a block, either way.
static void copy_group(const StateBlock *b, unsigned char *block, const GPT2Config *cfg, int l,
                       const AdamState *s, int to_block) {
    const AdamLayout *adam = &s->layout;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t into;
        const size_t n = slice_of(cfg, adam, i, l, &into);
        if (!in_group(cfg, i, l) || n == 0) continue;
        const size_t at = adam->state_offset[i] + into;
        if (adam->quantized[i]) {
            const size_t q = b->q8_at[i], scales = (n + Q8_BLOCK - 1) / Q8_BLOCK * sizeof(float);
            const size_t scale_at = q / Q8_BLOCK * sizeof(float);
            copy_part(s->m_q + at, block + b->m_q + q, n, to_block);
            copy_part(s->v_q + at, block + b->v_q + q, n, to_block);
            copy_part(s->m_absmax + at / Q8_BLOCK, block + b->m_absmax + scale_at, scales,
                      to_block);
            copy_part(s->v_absmax + at / Q8_BLOCK, block + b->v_absmax + scale_at, scales,
                      to_block);
        } else {
            const size_t f = b->fp32_at[i] * sizeof(float);
            copy_part(s->m + at, block + b->m + f, n * sizeof(float), to_block);
            copy_part(s->v + at, block + b->v + f, n * sizeof(float), to_block);
        }
    }
}

void state_block_gather(const StateBlock *b, const AdamState *s, const GPT2Config *cfg, int l,
                        unsigned char *block) {
    copy_group(b, block, cfg, l, s, 1);
}

void state_block_scatter(const StateBlock *b, const unsigned char *block, const GPT2Config *cfg,
                         int l, AdamState *s) {
    copy_group(b, (unsigned char *)block, cfg, l, s, 0);
}

// Appends n values of tensor i starting at `first` (its offset in the
// parameters) to the table, their gradients at grad_at, their moments at
// state_at.
static void append(AdamWTensors *t, int i, size_t first, size_t n, size_t grad_at,
                   size_t state_at, size_t values_per_block) {
    if (n == 0) return;
    if (t->count == ADAMW_MAX_TENSORS)
        die("layer_table_build: more than %d tensors", ADAMW_MAX_TENSORS);
    const int k = t->count++;
    t->offset[k] = first;
    t->size[k] = n;
    t->state_offset[k] = state_at;
    t->grad_shift[k] = (long long)grad_at - (long long)first;
    t->decay[k] = gpt2_param_is_decayed(i);
    t->first_block[k] = t->blocks;
    t->blocks += (unsigned int)((n + values_per_block - 1) / values_per_block);
}

void layer_table_build(AdamWTensors *t, const GPT2Config *cfg, const AdamLayout *adam,
                       const LayerGrads *g, const StateBlock *b, int l, int quantized,
                       size_t values_per_block) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (adam->quantized[i] != quantized || !in_group(cfg, i, l)) continue;
        size_t into;
        const size_t slice = slice_of(cfg, adam, i, l, &into);
        const size_t first = adam->param_offset[i] + into;
        if (quantized && into % Q8_BLOCK != 0)
            die("a layer's slice of %s (%zu values) does not start on a block of %d of the "
                "8-bit moments: the update a layer at a time needs channels (%d) that are a "
                "multiple of 16", gpt2_param_names[i], slice, Q8_BLOCK, cfg->channels);
        const size_t grad_at = g ? g->offset[i] : first;
        const size_t state_at = !b ? adam->state_offset[i] + into
                                   : quantized ? b->q8_at[i] : b->fp32_at[i];
        append(t, i, first, slice, grad_at, state_at, values_per_block);
    }
}
