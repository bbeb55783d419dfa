// gpu_test.h: what every GPU kernel test shares.
//
//  - gpu_test_init/gpu_test_fini, the suites' .init and .fini: a test on a
//    machine without a CUDA device reports itself SKIPPED (never passes
//    silently); otherwise it gets a fresh context, gt_ctx, with chapter 00's
//    switches (synchronizing checks on, tensor cores off). Criterion runs each
//    test in its own process, so nothing leaks from one test to the next.
//  - host buffers of seeded random values, and copies to and from the device;
//    device buffers are freed by gpu_test_fini.
//  - comparisons against the CPU reference with an explicit tolerance, and a
//    bit-for-bit comparison for determinism.
//  - the storage type: every kernel test is built twice, for fp32 and for
//    bf16 (kernels/precision.h). Its floatX buffers go through the _x
//    helpers, and its inputs are drawn already rounded to floatX
//    (gt_random_x), so that the CPU reference computes from exactly the
//    values the kernel reads, and what remains is the kernel's own error:
//    its sums' order, and in bf16 the rounding of what it stores. Each
//    tolerance is GT_TOL(fp32's, bf16's), with its reason beside it.
//
// Set GPU_TEST_VERBOSE=1 to print every comparison's worst error, which is
// how each file's tolerances were chosen.
#ifndef GPU_TEST_H
#define GPU_TEST_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/floatx_host.h"
#include "gpu_context.h"
#include "precision.h"
#include "util/util.h"

#define GT_MAX_DEVICE_BUFFERS 256

static GpuContext gt_ctx;
static void *gt_device_buffers[GT_MAX_DEVICE_BUFFERS];
static int gt_num_device_buffers;

static inline void gpu_test_init(void) {
    if (gpu_device_count() == 0) cr_skip_test("no CUDA device");
    gpu_context_init(&gt_ctx, GPU_FIRST_DEVICE);
}

// Frees every device buffer the test has allocated so far (gpu_test_fini
// does it at the end; a test that runs many cases may do it between them).
static inline void gt_device_free_all(void) {
    for (int i = 0; i < gt_num_device_buffers; i++) gpu_free(gt_device_buffers[i]);
    gt_num_device_buffers = 0;
}

static inline void gpu_test_fini(void) {
    gt_device_free_all();
    if (gt_ctx.cublas) gpu_context_free(&gt_ctx);
}

// ---- host buffers -------------------------------------------------------------
// Uniform in [lo, hi). Tests pick ranges that exclude 0 where a zero could
// hide a bug (an untouched output that should have been written).
static inline float *gt_random(size_t n, float lo, float hi, Rng *rng) {
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(rng);
    return x;
}

static inline int32_t *gt_random_tokens(size_t n, int V, Rng *rng) {
    int32_t *x = xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)rng_below(rng, (uint32_t)V);
    return x;
}

static inline float *gt_copy(const float *x, size_t n) {
    float *y = xmalloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

// ---- device buffers -----------------------------------------------------------
static inline void *gt_device_alloc(size_t bytes, const char *what) {
    cr_assert(gt_num_device_buffers < GT_MAX_DEVICE_BUFFERS, "too many device buffers");
    void *d = gpu_malloc(bytes, what);
    gt_device_buffers[gt_num_device_buffers++] = d;
    return d;
}

static inline float *gt_upload(const float *host, size_t n) {
    float *d = gt_device_alloc(n * sizeof(float), "test buffer");
    CUDA_CHECK(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static inline int32_t *gt_upload_i32(const int32_t *host, size_t n) {
    int32_t *d = gt_device_alloc(n * sizeof(int32_t), "test buffer");
    CUDA_CHECK(cudaMemcpy(d, host, n * sizeof(int32_t), cudaMemcpyHostToDevice));
    return d;
}

// A device buffer of n floats filled with NaN bit patterns (0xff bytes), so
// that an element a kernel should write but does not fails every comparison.
static inline float *gt_device_poisoned(size_t n) {
    float *d = gt_device_alloc(n * sizeof(float), "test buffer");
    CUDA_CHECK(cudaMemset(d, 0xff, n * sizeof(float)));
    return d;
}

// Waits for the context's stream (so an asynchronous fault is reported here,
// by name, even with sync_after_launch off) and copies n floats back into a
// fresh host buffer.
static inline float *gt_download(const float *d, size_t n) {
    CUDA_CHECK(cudaStreamSynchronize(gt_ctx.stream));
    float *host = xmalloc(n * sizeof(float));
    CUDA_CHECK(cudaMemcpy(host, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
}

// ---- the storage type, floatX -------------------------------------------------
#ifdef PRECISION_BF16
#define GT_TOL(fp32, bf16) (bf16)
#else
#define GT_TOL(fp32, bf16) (fp32)
#endif

// Uniform in [lo, hi), each value rounded to floatX (a no-op in fp32).
static inline float *gt_random_x(size_t n, float lo, float hi, Rng *rng) {
    float *x = gt_random(n, lo, hi, rng);
    for (size_t i = 0; i < n; i++) x[i] = round_to_floatx(x[i]);
    return x;
}

// n host floats as a floatX device buffer: exact for values gt_random_x drew.
static inline floatX *gt_upload_x(const float *host, size_t n) {
    floatX *stored = xmalloc(n * sizeof(floatX));
    floatx_from_floats(stored, host, n);
    floatX *d = gt_device_alloc(n * sizeof(floatX), "test buffer");
    CUDA_CHECK(cudaMemcpy(d, stored, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(stored);
    return d;
}

// A floatX device buffer of NaNs: all-ones bytes are a NaN in bf16 too.
static inline floatX *gt_device_poisoned_x(size_t n) {
    floatX *d = gt_device_alloc(n * sizeof(floatX), "test buffer");
    CUDA_CHECK(cudaMemset(d, 0xff, n * sizeof(floatX)));
    return d;
}

// As gt_download, from a floatX buffer, each value converted exactly to float.
static inline float *gt_download_x(const floatX *d, size_t n) {
    CUDA_CHECK(cudaStreamSynchronize(gt_ctx.stream));
    floatX *stored = xmalloc(n * sizeof(floatX));
    CUDA_CHECK(cudaMemcpy(stored, d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    float *host = xmalloc(n * sizeof(float));
    floats_from_floatx(host, stored, n);
    free(stored);
    return host;
}

// The CPU reference's results as the kernel stores them: rounded to floatX
// (for the kernels whose only error is that rounding: compared bit for bit).
static inline float *gt_rounded_x(const float *x, size_t n) {
    float *y = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) y[i] = round_to_floatx(x[i]);
    return y;
}

// ---- comparisons --------------------------------------------------------------
// Passes when max_i |got[i] - ref[i]| <= rel_tol * max_i |ref[i]|: the error is
// measured against the tensor's scale, because fp32 summation-order error
// grows with the magnitude of the terms summed, not with each result's own
// (possibly tiny, cancelled) value. A NaN anywhere fails.
static inline void gt_compare(const char *what, const float *got, const float *ref, size_t n,
                              double rel_tol) {
    double max_ref = 0, worst = 0;
    size_t worst_at = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(ref[i]) > max_ref) max_ref = fabs(ref[i]);
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - (double)ref[i]);
        if (!(diff <= worst)) {  // also catches NaN
            worst = diff;
            worst_at = i;
            if (isnan(diff)) break;
        }
    }
    const double allowed = rel_tol * max_ref;
    if (getenv("GPU_TEST_VERBOSE"))
        fprintf(stderr, "  %-40s max|gpu-cpu| = %.3g = %.3g x max|cpu| (tolerance %.1g)\n", what,
                worst, max_ref > 0 ? worst / max_ref : worst, rel_tol);
    cr_assert(worst <= allowed,
              "%s: max |gpu - cpu| = %.6g at [%zu] (gpu %.9g, cpu %.9g) exceeds %.3g x max|cpu| "
              "(%.6g) = %.6g",
              what, worst, worst_at, (double)got[worst_at], (double)ref[worst_at], rel_tol,
              max_ref, allowed);
}

// Bit-for-bit equality: for determinism (two runs of a kernel) and for the
// kernels whose arithmetic is exactly the CPU reference's.
static inline void gt_assert_identical(const char *what, const float *a, const float *b,
                                       size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
            cr_assert_fail("%s: not bit-identical at [%zu]: %.9g vs %.9g", what, i, (double)a[i],
                           (double)b[i]);
    }
}

#endif
