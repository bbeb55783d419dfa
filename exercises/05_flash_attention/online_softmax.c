// GENERATED from solutions/05_flash_attention/online_softmax.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 05_flash_attention); what to do and
// how to test it: exercises/05_flash_attention/README.md.
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
    // TODO(exercise 05_flash_attention): the tile's scores and their max; rescale l and acc by exp(m_old - m_new); then add exp(x_i - m_new) to l and exp(x_i - m_new) * v_i to acc
    // Replace this stub, which makes the tests fail, with your code.
    (void)q, (void)k, (void)v, (void)n, (void)ld, (void)scale;
    s->m = s->l = NAN;  // every result is NaN until this is written
    // TODO(exercise 05_flash_attention): delete this call once the code above is written.
    exercise_unfinished("05_flash_attention", "online softmax, one tile",
                        "the tile's scores and their max; rescale l and acc by exp(m_old - m_new); then add exp(x_i - m_new) to l and exp(x_i - m_new) * v_i to acc");
}
// ANCHOR_END: online_softmax_tile

// ANCHOR: online_softmax_finish
void online_softmax_finish(const OnlineSoftmax *s, float *out, float *lse) {
    // TODO(exercise 05_flash_attention): out = acc / l, and lse = m + log(l)
    // Replace this stub, which makes the tests fail, with your code.
    for (int d = 0; d < s->hs; d++) out[d] = NAN;
    *lse = NAN;
    // TODO(exercise 05_flash_attention): delete this call once the code above is written.
    exercise_unfinished("05_flash_attention", "online softmax, the finish",
                        "out = acc / l, and lse = m + log(l)");
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
