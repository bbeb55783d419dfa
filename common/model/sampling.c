// sampling.c: see sampling.h.
#include "model/sampling.h"

#include <math.h>

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

int sample_from_logits(const float *logits, int n, float coin) {
    double max = logits[0], sum = 0.0;
    for (int i = 1; i < n; i++)
        if (logits[i] > max) max = logits[i];
    for (int i = 0; i < n; i++) sum += exp(logits[i] - max);
    // The same walk as sample_from_probs, over exp(z - max) / sum.
    double cumulative = 0.0, target = coin * sum;
    for (int i = 0; i < n; i++) {
        cumulative += exp(logits[i] - max);
        if (target < cumulative) return i;
    }
    return n - 1;  // rounding left the walk a hair short: the last token
}
