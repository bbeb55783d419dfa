// online_softmax.c: chapter 05's exercise: the online softmax of one row of
// attention, on the CPU (common/model/online_softmax.h says what each function
// must do). solutions/05_flash_attention/ has it complete;
// exercises/05_flash_attention/ has the bodies of online_softmax_tile and
// online_softmax_finish cut out.
#include <math.h>
#include <stdlib.h>

#include "exercise.h"
#include "model/online_softmax.h"
#include "util/util.h"

void online_softmax_init(OnlineSoftmax *s, float *acc, int hs) {
    s->m = -INFINITY;
    s->l = 0.0f;
    s->acc = acc;
    s->hs = hs;
    for (int d = 0; d < hs; d++) acc[d] = 0.0f;
}

static inline float dot(const float *a, const float *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

// ANCHOR: online_softmax_tile
void online_softmax_tile(OnlineSoftmax *s, const float *q, const float *k, const float *v, int n,
                         int ld, float scale) {
    // EXERCISE BEGIN: the tile's scores and their max; rescale l and acc by exp(m_old - m_new); then add exp(x_i - m_new) to l and exp(x_i - m_new) * v_i to acc
    // EXERCISE STUB: (void)q, (void)k, (void)v, (void)n, (void)ld, (void)scale;
    // EXERCISE STUB: s->m = s->l = NAN;  // every result is NaN until this is written
    float tile_max = -INFINITY;
    for (int i = 0; i < n; i++)
        tile_max = fmaxf(tile_max, dot(q, k + (size_t)i * ld, s->hs) * scale);
    const float m_new = fmaxf(s->m, tile_max);
    // What was summed so far is relative to the old maximum: bring it to the
    // new one. Before the first key, m = -inf and the factor is exp(-inf) = 0
    // (l and acc are 0 anyway).
    const float rescale = expf(s->m - m_new);
    s->l *= rescale;
    for (int d = 0; d < s->hs; d++) s->acc[d] *= rescale;
    for (int i = 0; i < n; i++) {
        const float p = expf(dot(q, k + (size_t)i * ld, s->hs) * scale - m_new);
        s->l += p;
        for (int d = 0; d < s->hs; d++) s->acc[d] += p * v[(size_t)i * ld + d];
    }
    s->m = m_new;
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: online softmax, one tile
}
// ANCHOR_END: online_softmax_tile

// ANCHOR: online_softmax_finish
void online_softmax_finish(const OnlineSoftmax *s, float *out, float *lse) {
    // EXERCISE BEGIN: out = acc / l, and lse = m + log(l)
    // EXERCISE STUB: for (int d = 0; d < s->hs; d++) out[d] = NAN;
    // EXERCISE STUB: *lse = NAN;
    for (int d = 0; d < s->hs; d++) out[d] = s->acc[d] / s->l;
    *lse = s->m + logf(s->l);
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: online softmax, the finish
}
// ANCHOR_END: online_softmax_finish

void attention_row_online(float *out, float *lse, const float *q, const float *k, const float *v,
                          int n_keys, int hs, int ld, int tile) {
    float *acc = xmalloc((size_t)hs * sizeof(float));
    OnlineSoftmax s;
    online_softmax_init(&s, acc, hs);
    const float scale = 1.0f / sqrtf((float)hs);
    for (int j = 0; j < n_keys; j += tile) {
        const int n = n_keys - j < tile ? n_keys - j : tile;
        online_softmax_tile(&s, q, k + (size_t)j * ld, v + (size_t)j * ld, n, ld, scale);
    }
    online_softmax_finish(&s, out, lse);
    free(acc);
}
