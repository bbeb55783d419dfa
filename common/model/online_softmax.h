// online_softmax.h: one row of causal attention by the online softmax, on
// the CPU: the arithmetic of flash attention's inner loop (chapter 05), which
// chapter 05's exercise asks you to write, without a GPU.
//
// For one query q (hs values) and the keys and values of the positions it
// sees, rows 0..n-1 of k and v (each row hs values, rows `ld` floats apart):
//     x_j  = q . k_j * scale                  (scale = 1 / sqrt(hs))
//     lse  = log(sum_j exp(x_j))
//     out  = sum_j exp(x_j - lse) * v_j       (softmax(x) @ v)
// The textbook computes all x_j, then their maximum, then the exponentials:
// three passes over the row. The online softmax takes ONE pass, a tile of
// keys at a time, and keeps only a running state:
//     m    the largest x_j seen so far
//     l    sum over the keys seen of exp(x_j - m)
//     acc  sum over the keys seen of exp(x_j - m) * v_j      (hs values)
// When a tile brings a larger maximum m', everything summed so far was
// relative to the old m: l and acc are multiplied by exp(m - m') first. At
// the end, out = acc / l and lse = m + log(l). Every exponent is <= 0, so
// nothing overflows, however large the scores.
//
// solutions/05_flash_attention/online_softmax.c has the functions complete;
// exercises/05_flash_attention/ has online_softmax_tile and
// online_softmax_finish cut out. The GPU kernel (kernels/attention_flash.cu,
// online_softmax) does the same per row, 64 keys at a time, in log2 units.
#ifndef ONLINE_SOFTMAX_H
#define ONLINE_SOFTMAX_H

typedef struct {
    float m;     // the running maximum of the scores (-INFINITY before any key)
    float l;     // sum of exp(x_j - m)
    float *acc;  // hs floats: sum of exp(x_j - m) * v_j
    int hs;
} OnlineSoftmax;

// The state before any key: m = -infinity, l = 0, acc = 0 (acc: hs floats,
// the caller's).
void online_softmax_init(OnlineSoftmax *s, float *acc, int hs);

// Takes in n more keys and values (rows k[i*ld], v[i*ld], i < n): their
// scores x_i = q . k_i * scale, then the update of m, l and acc above.
void online_softmax_tile(OnlineSoftmax *s, const float *q, const float *k, const float *v, int n,
                         int ld, float scale);

// out (hs floats) = acc / l; *lse = m + log(l).
void online_softmax_finish(const OnlineSoftmax *s, float *out, float *lse);

// The whole row: the n_keys keys in tiles of `tile` (the last one shorter),
// through the three functions above; scale = 1 / sqrt(hs).
void attention_row_online(float *out, float *lse, const float *q, const float *k, const float *v,
                          int n_keys, int hs, int ld, int tile);

#endif
