// spread.h: what a set of timings says: the least, the median and the
// largest. The kernel lab reports all three for every kernel, and the
// trainer's --bench-csv the medians of its steps.
#ifndef SPREAD_H
#define SPREAD_H

typedef struct {
    double min, median, max;
} Spread;

// Sorts x (n finite values) in place, ascending, and returns its least, its
// median (the mean of the two middle values when n is even) and its largest.
// With n < 1 there is nothing to say: all three are NaN.
Spread spread_of(double *x, int n);

#endif
