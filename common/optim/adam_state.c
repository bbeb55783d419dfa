// adam_state.c: see adam_state.h.
#include "optim/adam_state.h"

#include <stdlib.h>
#include <string.h>

#include "optim/quantize8.h"
#include "util/util.h"

// Tensors with fewer values per layer stay in fp32 (Dettmers et al.'s 4096).
#define Q8_MIN_VALUES_PER_LAYER 4096

int adam_tensor_is_quantized(const GPT2Config *cfg, int i) {
    if (i != PARAM_QKVW && i != PARAM_ATTPROJW && i != PARAM_FCW && i != PARAM_FCPROJW) return 0;
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    return sizes[i] / (size_t)cfg->num_layers >= Q8_MIN_VALUES_PER_LAYER;
}

AdamLayout adam_layout_for(const GPT2Config *cfg, int quantize8) {
    unsigned mask = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (quantize8 && adam_tensor_is_quantized(cfg, i)) mask |= 1u << i;
    return adam_layout_masked(cfg, mask);
}

unsigned adam_layout_mask(const AdamLayout *l) {
    unsigned mask = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (l->quantized[i]) mask |= 1u << i;
    return mask;
}

AdamLayout adam_layout_masked(const GPT2Config *cfg, unsigned mask) {
    AdamLayout l;
    memset(&l, 0, sizeof l);
    gpt2_param_sizes(cfg, l.size);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        l.param_offset[i] = l.num_params;
        l.num_params += l.size[i];
        l.quantized[i] = (mask >> i) & 1u;
        if (l.quantized[i]) {
            l.state_offset[i] = l.q8_values;
            l.q8_values += q8_blocks(l.size[i]) * Q8_BLOCK;
        } else {
            l.state_offset[i] = l.fp32_values;
            l.fp32_values += l.size[i];
        }
    }
    l.q8_blocks = l.q8_values / Q8_BLOCK;
    return l;
}

void adam_state_alloc(AdamState *s, const AdamLayout *layout) {
    s->layout = *layout;
    s->m = xcalloc(layout->fp32_values ? layout->fp32_values : 1, sizeof(float));
    s->v = xcalloc(layout->fp32_values ? layout->fp32_values : 1, sizeof(float));
    s->m_q = xcalloc(layout->q8_values ? layout->q8_values : 1, 1);
    s->v_q = xcalloc(layout->q8_values ? layout->q8_values : 1, 1);
    s->m_absmax = xcalloc(layout->q8_blocks ? layout->q8_blocks : 1, sizeof(float));
    s->v_absmax = xcalloc(layout->q8_blocks ? layout->q8_blocks : 1, sizeof(float));
}

AdamState adam_state_view_full(const GPT2Config *cfg, float *m, float *v) {
    AdamState s;
    memset(&s, 0, sizeof s);
    s.layout = adam_layout_for(cfg, 0);
    s.m = m;
    s.v = v;
    return s;
}

void adam_state_free(AdamState *s) {
    free(s->m), free(s->v), free(s->m_q), free(s->v_q), free(s->m_absmax), free(s->v_absmax);
    memset(s, 0, sizeof *s);
}

void adam_state_to_full(const AdamState *s, float *m, float *v) {
    const AdamLayout *l = &s->layout;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const size_t n = l->size[i], p = l->param_offset[i], o = l->state_offset[i];
        if (n == 0) continue;
        if (l->quantized[i]) {
            q8_dequantize(Q8_SIGNED, s->m_q + o, s->m_absmax + o / Q8_BLOCK, n, m + p);
            q8_dequantize(Q8_UNSIGNED, s->v_q + o, s->v_absmax + o / Q8_BLOCK, n, v + p);
        } else {
            memcpy(m + p, s->m + o, n * sizeof(float));
            memcpy(v + p, s->v + o, n * sizeof(float));
        }
    }
}

void adam_state_from_full(AdamState *s, const float *m, const float *v) {
    const AdamLayout *l = &s->layout;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const size_t n = l->size[i], p = l->param_offset[i], o = l->state_offset[i];
        if (n == 0) continue;
        if (l->quantized[i]) {
            q8_quantize(Q8_SIGNED, m + p, n, s->m_q + o, s->m_absmax + o / Q8_BLOCK);
            q8_quantize(Q8_UNSIGNED, v + p, n, s->v_q + o, s->v_absmax + o / Q8_BLOCK);
        } else {
            memcpy(s->m + o, m + p, n * sizeof(float));
            memcpy(s->v + o, v + p, n * sizeof(float));
        }
    }
}

int adam_layout_equal(const AdamLayout *a, const AdamLayout *b) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (a->param_offset[i] != b->param_offset[i] || a->size[i] != b->size[i] ||
            a->quantized[i] != b->quantized[i] || a->state_offset[i] != b->state_offset[i])
            return 0;
    return a->num_params == b->num_params && a->fp32_values == b->fp32_values &&
           a->q8_values == b->q8_values && a->q8_blocks == b->q8_blocks;
}

void adam_state_convert(const AdamState *src, AdamState *dst) {
    const AdamLayout *l = &dst->layout;
    if (src->layout.num_params != l->num_params)
        die("adam_state_convert: %zu parameters into %zu", src->layout.num_params, l->num_params);
    if (adam_layout_equal(&src->layout, l)) {
        memcpy(dst->m, src->m, l->fp32_values * sizeof(float));
        memcpy(dst->v, src->v, l->fp32_values * sizeof(float));
        memcpy(dst->m_q, src->m_q, l->q8_values);
        memcpy(dst->v_q, src->v_q, l->q8_values);
        memcpy(dst->m_absmax, src->m_absmax, l->q8_blocks * sizeof(float));
        memcpy(dst->v_absmax, src->v_absmax, l->q8_blocks * sizeof(float));
        return;
    }
    float *m = xmalloc(l->num_params * sizeof(float)), *v = xmalloc(l->num_params * sizeof(float));
    adam_state_to_full(src, m, v);
    adam_state_from_full(dst, m, v);
    free(m);
    free(v);
}
