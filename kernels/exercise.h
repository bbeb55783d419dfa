// exercise.h: the two stubs that tools/make_exercises.py puts in place of the
// code a reader writes (exercises/README.md tells the whole story).
//
// An unfinished exercise must fail loudly, never crash and never pass:
//   - exercise_fill_nan(p, n), in device code, stands in for a kernel's body:
//     it writes NaN to the kernel's outputs, so every comparison with the
//     reference fails and every loss computed from them is NaN;
//   - exercise_unfinished(...), in host code, is called by the launcher: it
//     says, once per process, on stderr, which exercise is not done and what
//     to do.
// The solutions (solutions/) include this header too but call neither.
// exercise_fill_nan is for the .cu files; exercise_unfinished works in C too.
#ifndef EXERCISE_H
#define EXERCISE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __CUDACC__
#include "precision.h"

// A quiet NaN of each storage type.
__device__ inline void exercise_store_nan(float *p) { *p = __int_as_float(0x7fffffff); }
#ifdef PRECISION_BF16
__device__ inline void exercise_store_nan(floatX *p) { *p = __ushort_as_bfloat16(0x7fc0); }
#endif

// n values from p (float, or floatX in the bf16 build) set to NaN by every
// thread of the grid together (a grid-stride loop over any 1-, 2- or 3-D
// launch shape).
template <typename T>
__device__ inline void exercise_fill_nan(T *p, size_t n) {
    const size_t block = (size_t)blockDim.x * blockDim.y * blockDim.z;
    const size_t threads = block * gridDim.x * gridDim.y * gridDim.z;
    const size_t block_id = ((size_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const size_t thread_id = ((size_t)threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x +
                             threadIdx.x;
    for (size_t i = block_id * block + thread_id; i < n; i += threads) exercise_store_nan(p + i);
}
#endif

// "exercise 00_baseline (layernorm forward) is not finished yet: <hint>",
// the first time a launcher of that exercise runs in this process.
static inline void exercise_unfinished(const char *exercise, const char *what, const char *hint) {
    static int said;  // one per launcher file: one message per exercise piece
    if (said) return;
    said = 1;
    fprintf(stderr, "exercise %s (%s) is not finished yet: %s\n", exercise, what, hint);
    fflush(stderr);
}

#endif
