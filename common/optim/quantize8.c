// quantize8.c: see quantize8.h.
#include "optim/quantize8.h"

#include <math.h>

void q8_map(Q8Map map, float values[Q8_MAP_SIZE]) {
    for (int i = 0; i < Q8_MAP_SIZE; i++) values[i] = q8_map_value(map, i);
}

size_t q8_blocks(size_t n) { return (n + Q8_BLOCK - 1) / Q8_BLOCK; }

// q8_dequantize with the map's values already built. (Its twin,
// q8_quantize_blocks, is chapter 10's exercise.)
static void dequantize_with(const float *values, const uint8_t *q, const float *absmax,
                            size_t n, float *x) {
    for (size_t i = 0; i < n; i++) x[i] = q8_dequantize_value(values, q[i], absmax[i / Q8_BLOCK]);
}

void q8_quantize(Q8Map map, const float *x, size_t n, uint8_t *q, float *absmax) {
    float values[Q8_MAP_SIZE];
    q8_map(map, values);
    q8_quantize_blocks(values, x, n, q, absmax);
}

void q8_dequantize(Q8Map map, const uint8_t *q, const float *absmax, size_t n, float *x) {
    float values[Q8_MAP_SIZE];
    q8_map(map, values);
    dequantize_with(values, q, absmax, n, x);
}

// ANCHOR: adamw8bit_step
void adamw8bit_update(float *params, const float *grads, uint8_t *m_q, uint8_t *v_q,
                      float *m_absmax, float *v_absmax, size_t n, float lr,
                      const AdamWConfig *cfg, int decay, int t) {
    float signed_map[Q8_MAP_SIZE], unsigned_map[Q8_MAP_SIZE], m[Q8_BLOCK], v[Q8_BLOCK];
    q8_map(Q8_SIGNED, signed_map);
    q8_map(Q8_UNSIGNED, unsigned_map);
    for (size_t start = 0; start < n; start += Q8_BLOCK) {
        const size_t len = n - start < Q8_BLOCK ? n - start : Q8_BLOCK, b = start / Q8_BLOCK;
        dequantize_with(signed_map, m_q + start, &m_absmax[b], len, m);
        dequantize_with(unsigned_map, v_q + start, &v_absmax[b], len, v);
        adamw_update(params + start, grads + start, m, v, len, lr, cfg, decay, t);
        q8_quantize_blocks(signed_map, m, len, m_q + start, &m_absmax[b]);
        q8_quantize_blocks(unsigned_map, v, len, v_q + start, &v_absmax[b]);
    }
}
// ANCHOR_END: adamw8bit_step
