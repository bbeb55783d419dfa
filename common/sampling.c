// sampling.c: see sampling.h.
#include "sampling.h"

int sample_from_probs(const float *probs, int n, float coin) {
    float cumulative = 0.0f;
    int last_nonzero = 0;
    for (int i = 0; i < n; i++) {
        cumulative += probs[i];
        if (probs[i] > 0.0f) last_nonzero = i;
        if (coin < cumulative) return i;
    }
    return last_nonzero;
}
