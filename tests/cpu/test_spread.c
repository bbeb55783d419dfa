// test_spread.c: the least, median and largest of a set of timings
// (common/util/spread.h), as the kernel lab reports each kernel's calls:
// odd and even counts, ties, one value, values in any order, and nothing.
#include <criterion/criterion.h>
#include <math.h>

#include "util/spread.h"

Test(spread, odd_count_takes_the_middle_value) {
    double x[] = {0.30, 0.10, 0.50, 0.20, 0.40};
    const Spread s = spread_of(x, 5);
    cr_assert_eq(s.min, 0.10);
    cr_assert_eq(s.median, 0.30);
    cr_assert_eq(s.max, 0.50);
}

// The lab's LAB_REPS is even: the median is the mean of the two middle values.
Test(spread, even_count_takes_the_mean_of_the_two_middle_values) {
    double x[] = {4.0, 1.0, 3.0, 2.0};
    const Spread s = spread_of(x, 4);
    cr_assert_eq(s.min, 1.0);
    cr_assert_eq(s.median, 2.5);
    cr_assert_eq(s.max, 4.0);
}

// One slow call (a straggler) moves the largest, not the median.
Test(spread, one_outlier_moves_the_max_not_the_median) {
    double x[50];
    for (int i = 0; i < 50; i++) x[i] = 1.0 + 0.001 * (i % 7);
    x[17] = 9.0;
    const Spread s = spread_of(x, 50);
    cr_assert_eq(s.min, 1.0);
    cr_assert_eq(s.max, 9.0);
    cr_assert_lt(s.median, 1.01);
}

Test(spread, sorts_in_place_and_keeps_ties) {
    double x[] = {2.0, 1.0, 2.0, 1.0, 3.0, 2.0};
    const Spread s = spread_of(x, 6);
    const double sorted[] = {1.0, 1.0, 2.0, 2.0, 2.0, 3.0};
    for (int i = 0; i < 6; i++) cr_assert_eq(x[i], sorted[i], "x[%d] = %g", i, x[i]);
    cr_assert_eq(s.median, 2.0);
}

Test(spread, one_value_is_all_three) {
    double x[] = {0.0731};
    const Spread s = spread_of(x, 1);
    cr_assert_eq(s.min, 0.0731);
    cr_assert_eq(s.median, 0.0731);
    cr_assert_eq(s.max, 0.0731);
}

Test(spread, nothing_to_say_without_values) {
    const Spread s = spread_of(NULL, 0);
    cr_assert(isnan(s.min) && isnan(s.median) && isnan(s.max));
}
