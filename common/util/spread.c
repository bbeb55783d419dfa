// spread.c: see spread.h.
#include "util/spread.h"

#include <math.h>
#include <stdlib.h>

static int compare_doubles(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

Spread spread_of(double *x, int n) {
    if (n < 1) return (Spread){NAN, NAN, NAN};
    qsort(x, (size_t)n, sizeof *x, compare_doubles);
    const double median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
    return (Spread){x[0], median, x[n - 1]};
}
