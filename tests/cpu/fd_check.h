// fd_check.h: finite-difference gradient checking, in double precision.
//
// A central difference (f(x+h) - f(x-h)) / 2h approximates df/dx with an
// error of O(h^2) from truncation and O(eps_double / h) from rounding; with
// h = 1e-5 both are far below 1e-8, so an analytic gradient that differs from
// it by more than FD_RTOL (relative) or FD_ATOL (absolute) is wrong, not
// merely imprecise.
#ifndef FD_CHECK_H
#define FD_CHECK_H

#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>

#include "util/util.h"

#define FD_STEP 1e-5
#define FD_RTOL 1e-5
#define FD_ATOL 1e-8

// eval(ctx) recomputes the scalar function from the current contents of x.
typedef double (*ScalarFn)(void *ctx);

// Compares analytic[i] with the central difference of eval along x[i], for
// every i in [0, n). Restores x. Fails the running test at the first mismatch,
// naming `what` and the index.
static inline void fd_check(const char *what, ScalarFn eval, void *ctx, double *x,
                            const double *analytic, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double saved = x[i];
        x[i] = saved + FD_STEP;
        double up = eval(ctx);
        x[i] = saved - FD_STEP;
        double down = eval(ctx);
        x[i] = saved;
        double numeric = (up - down) / (2 * FD_STEP);
        double diff = fabs(numeric - analytic[i]);
        double allowed = FD_ATOL + FD_RTOL * fabs(numeric);
        cr_assert(diff <= allowed,
                  "%s[%zu]: analytic %.10g, finite difference %.10g (|diff| %.3g > %.3g)", what, i,
                  analytic[i], numeric, diff, allowed);
        if (diff > worst) worst = diff;
    }
    (void)worst;
}

// Fills x with uniform values in [lo, hi) from a seeded RNG.
static inline void fill_uniform(double *x, size_t n, double lo, double hi, Rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(rng);
}

static inline double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

#endif
