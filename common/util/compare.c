// compare.c: see compare.h.
#include "util/compare.h"

#include <math.h>

Diff diff_tensors(const float *got, const float *ref, size_t n) {
    Diff d = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - ref[i]);
        if (diff > d.max_diff || isnan(diff)) d.max_diff = isnan(diff) ? INFINITY : diff, d.worst = i;
        if (fabs(ref[i]) > d.max_ref) d.max_ref = fabs(ref[i]);
    }
    return d;
}

double cosine_similarity(const float *a, const float *b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    if (aa == 0 && bb == 0) return 1.0;  // both zero: the same direction, nothing to compare
    if (aa == 0 || bb == 0) return 0.0;
    double c = ab / (sqrt(aa) * sqrt(bb));
    return isnan(c) ? -INFINITY : c;
}

double norm_ratio(const float *got, const float *ref, size_t n) {
    double gg = 0, rr = 0;
    for (size_t i = 0; i < n; i++) {
        gg += (double)got[i] * got[i];
        rr += (double)ref[i] * ref[i];
    }
    if (gg == 0 && rr == 0) return 1.0;  // both zero: the same size
    if (rr == 0) return INFINITY;
    double r = sqrt(gg / rr);
    return isnan(r) ? INFINITY : r;
}
