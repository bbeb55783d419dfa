// compare.h: how a tensor is compared with its reference: the largest
// difference against the reference's scale, the cosine similarity (the
// direction) and the ratio of the norms (the size). The tests and the check
// mode use them; tolerances.h says which tolerance goes with which.
#ifndef COMPARE_H
#define COMPARE_H

#include <stddef.h>

// max|got - ref| and max|ref| over n values.
typedef struct {
    double max_diff, max_ref;
    size_t worst;  // index of the largest difference
} Diff;

Diff diff_tensors(const float *got, const float *ref, size_t n);

// sum(a*b) / (|a| |b|), in double: 1 when a and b point the same way. 1 when
// both are all zero, 0 when only one is, -inf when either holds a NaN or Inf.
double cosine_similarity(const float *a, const float *b, size_t n);

// |got| / |ref|, in double: 1 when both have the same size (and when both
// are zero), +inf when ref is zero and got is not or either holds a NaN.
// The cosine cannot see a tensor twice too large; this can.
double norm_ratio(const float *got, const float *ref, size_t n);

#endif
