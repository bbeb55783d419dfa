// test_kernels_adamw.c: adamw_update_v1, grad_norm_v1 and scale_v1 against
// common/optimizer.c; chapter 03's clipping on the device (grad_clip_factor_v1,
// scale_by_device_factor_v1) against the host's, bit for bit.
#include "adamw.h"
#include "gpu_test.h"
#include "optimizer.h"

// The same formula; nvcc fuses b*m + (1-b)*g into one fused multiply-add
// (one rounding instead of two), so m and v may differ in the last bit, and
// the parameters by about an ulp. 1e-6 of the tensors' scale covers that.
#define ADAMW_TOL 1e-6
// The norm: float partial sums on the GPU against a double sum on the CPU.
#define GRAD_NORM_TOL 1e-5

TestSuite(kernels_adamw, .init = gpu_test_init, .fini = gpu_test_fini);

// The weights of record are updated: params in the fp32 build, the fp32
// master weights in the bf16 build, where params must then be the master
// weights rounded to nearest even, bit for bit.
static void check_adamw(int decay, uint64_t seed) {
    const size_t n = 10007;
    Rng rng;
    rng_seed(&rng, seed);
    float *params = gt_random(n, -1, 1, &rng), *m = gt_random(n, -0.01f, 0.01f, &rng);
    float *v = gt_random(n, 1e-6f, 1e-4f, &rng);
    floatX *d_params = gt_upload_x(params, n);
    float *d_m = gt_upload(m, n), *d_v = gt_upload(v, n), *d_master = NULL;
#ifdef PRECISION_BF16
    d_master = gt_upload(params, n);
#endif
    AdamWConfig cfg = adamw_default_config();
    // Three steps with fresh gradients, so that the bias corrections change
    // with t and the moments carry over.
    for (int t = 1; t <= 3; t++) {
        float *grads = gt_random_x(n, -0.1f, 0.1f, &rng);
        const float lr = 6e-4f * (float)t;
        adamw_update(params, grads, m, v, n, lr, &cfg, decay, t);
        adamw_update_v1(&gt_ctx, d_params, d_master, gt_upload_x(grads, n), d_m, d_v, n, lr, &cfg,
                        decay, t);
    }
    float *record = d_master ? gt_download(d_master, n) : gt_download_x(d_params, n);
    gt_compare("adamw weights of record", record, params, n, ADAMW_TOL);
    gt_compare("adamw m", gt_download(d_m, n), m, n, ADAMW_TOL);
    gt_compare("adamw v", gt_download(d_v, n), v, n, ADAMW_TOL);
    if (d_master)
        gt_assert_identical("adamw params: the master weights rounded", gt_download_x(d_params, n),
                            gt_rounded_x(record, n), n);
}

Test(kernels_adamw, update_matches_cpu_with_decay) { check_adamw(1, 1); }
Test(kernels_adamw, update_matches_cpu_without_decay) { check_adamw(0, 2); }

static void check_grad_norm(size_t n, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    float *grads = gt_random_x(n, -1, 1, &rng);
    float ref = grad_global_norm(grads, n);
    floatX *d_grads = gt_upload_x(grads, n);
    float *d_norm = gt_device_poisoned(1);
    float *d_scratch = gt_device_poisoned(GRAD_NORM_MAX_BLOCKS);
    grad_norm_v1(&gt_ctx, d_norm, d_scratch, d_grads, n);
    float *first = gt_download(d_norm, 1);
    gt_compare("grad norm", first, &ref, 1, GRAD_NORM_TOL);
    grad_norm_v1(&gt_ctx, d_norm, d_scratch, d_grads, n);
    gt_assert_identical("grad norm, two runs", first, gt_download(d_norm, 1), 1);
}

Test(kernels_adamw, grad_norm_matches_cpu_small) { check_grad_norm(1001, 3); }

// More values than 1024 blocks of 256 threads: the grid-stride loop runs.
Test(kernels_adamw, grad_norm_matches_cpu_large) { check_grad_norm(300007, 4); }

Test(kernels_adamw, scale_is_bit_identical_to_cpu) {
    const size_t n = 10007;
    Rng rng;
    rng_seed(&rng, 5);
    float *x = gt_random_x(n, -1, 1, &rng);
    floatX *d_x = gt_upload_x(x, n);
    const float factor = grad_clip_factor(3.7f, 1.0f);
    scale_values(x, n, factor);
    scale_v1(&gt_ctx, d_x, n, factor);
    gt_assert_identical("scaled values", gt_download_x(d_x, n), gt_rounded_x(x, n), n);
}

// Chapter 03 computes the clipping factor on the device. It must be the
// host's grad_clip_factor to the bit, whatever the norm: below, at and above
// the limit, zero, huge, Inf and NaN, and with clipping off.
Test(kernels_adamw, clip_factor_on_device_is_the_hosts) {
    const float norms[] = {0.0f,     1e-7f, 0.5f,  0.999999f, 1.0f,     1.000001f, 1.5f,
                           3.7f,     1e3f,  1e30f, 3e38f,     INFINITY, NAN};
    const float max_norms[] = {1.0f, 0.25f, 1e-3f, 0.0f, -1.0f};
    float *d_norm = gt_device_alloc(sizeof(float), "norm");
    float *d_factor = gt_device_poisoned(1);
    for (size_t j = 0; j < sizeof max_norms / sizeof max_norms[0]; j++)
        for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
            CUDA_CHECK(cudaMemcpy(d_norm, &norms[i], sizeof(float), cudaMemcpyHostToDevice));
            grad_clip_factor_v1(&gt_ctx, d_factor, d_norm, max_norms[j]);
            float *got = gt_download(d_factor, 1), want = grad_clip_factor(norms[i], max_norms[j]);
            cr_assert(memcmp(got, &want, sizeof want) == 0,
                      "norm %g, max_norm %g: device factor %.9g, host %.9g", (double)norms[i],
                      (double)max_norms[j], (double)*got, (double)want);
            free(got);
        }
}

// The scaling that reads its factor from memory does what the host's
// `if (factor < 1.0f) scale_v1(...)` does: the same bits when it scales, and
// nothing at all when the factor is 1 (or NaN).
Test(kernels_adamw, scale_by_device_factor_is_scale_v1) {
    const size_t n = 10007;
    Rng rng;
    rng_seed(&rng, 6);
    float *x = gt_random_x(n, -1, 1, &rng);
    const float factors[] = {grad_clip_factor(3.7f, 1.0f), 1.0f, NAN, 0.0f};
    float *d_factor = gt_device_alloc(sizeof(float), "factor");
    for (size_t k = 0; k < sizeof factors / sizeof factors[0]; k++) {
        float f = factors[k];
        floatX *d_want = gt_upload_x(x, n), *d_got = gt_upload_x(x, n);
        if (f < 1.0f) scale_v1(&gt_ctx, d_want, n, f);
        CUDA_CHECK(cudaMemcpy(d_factor, &f, sizeof f, cudaMemcpyHostToDevice));
        scale_by_device_factor_v1(&gt_ctx, d_got, n, d_factor);
        char what[64];
        snprintf(what, sizeof what, "scaled by the device's factor %g", (double)f);
        gt_assert_identical(what, gt_download_x(d_got, n), gt_download_x(d_want, n), n);
    }
}
