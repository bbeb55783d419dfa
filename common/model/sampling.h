// sampling.h: drawing the next token from the model's output distribution.
#ifndef SAMPLING_H
#define SAMPLING_H

// Returns the index i such that the cumulative probability first exceeds
// coin (in [0, 1)), walking probs[0..n). Rounding can leave the total a hair
// under 1; then the last index with nonzero probability is returned.
int sample_from_probs(const float *probs, int n, float coin);

// The same draw from softmax(logits[0..n)), the softmax computed here in
// double: the GPU hands over one row of logits, not probabilities.
int sample_from_logits(const float *logits, int n, float coin);

#endif
