// check_state.h: the check mode. Loads an llm.c-format model checkpoint and a
// debug state written by another implementation (tools/pytorch_reference.py),
// runs our GPU forward and backward on the state's batch, and reports per
// tensor how far our logits, loss and gradients are from the state's.
#ifndef CHECK_STATE_H
#define CHECK_STATE_H

#include <stddef.h>

#include "chapters.h"

// Prints the report; returns 0 when every tensor is within tolerance
// (tolerances.h), 1 when one is not, and exits with a message on a bad file.
int check_state_run(const char *model_path, const char *state_path, const Optimizations *optim);

// max|got - ref| and max|ref| over n values.
typedef struct {
    double max_diff, max_ref;
    size_t worst;  // index of the largest difference
} Diff;

Diff diff_tensors(const float *got, const float *ref, size_t n);

// sum(a*b) / (|a| |b|), in double: 1 when a and b point the same way. 1 when
// both are all zero, 0 when only one is, -inf when either holds a NaN or Inf.
// The bf16 build compares gradients by it (tolerances.h).
double cosine_similarity(const float *a, const float *b, size_t n);

#endif
