// test_kernels_adamw.c: adamw_update_v1, grad_norm_v1 and scale_v1 against
// common/optim/optimizer.c; chapter 03's clipping on the device (grad_clip_factor_v1,
// scale_by_device_factor_v1) against the host's, bit for bit; chapter 09's
// fused update (adamw_begin_step_v2, adamw_fused_v2) against chapter 03's
// clipping and adamw_update_v1 per tensor, bit for bit.
#include "adamw.h"
#include "gpu_test.h"
#include "optim/optimizer.h"

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

// ---- chapter 09: every tensor in one launch ----------------------------------------

// A layout that takes adamw_fused_v2 down each of its paths. Offsets, and
// what each tensor tests (Vecs: 8 values in bf16, 4 in fp32):
//   0     4099  aligned; several blocks, the last ending in a 3-value tail
//   4099     1  a single value, unaligned
//   4100     0  empty: left out of the table
//   4100     4  one Vec in fp32; unaligned in bf16
//   4104  5000  aligned in both builds, several blocks
//   9104     8  exactly one aligned Vec (two in fp32)
//   9112    17  aligned, with a tail of one value
//   9129  3001  unaligned throughout: every value on the scalar path
// with the decay flags mixed.
#define FUSED_TENSORS 8
static const size_t FUSED_SIZES[FUSED_TENSORS] = {4099, 1, 0, 4, 5000, 8, 17, 3001};
static const int FUSED_DECAY[FUSED_TENSORS] = {1, 0, 1, 1, 0, 1, 0, 1};
#define FUSED_VALUES 12130  // their sum

Test(kernels_adamw, fused_table_lists_the_tensors) {
    const size_t offsets[] = {0, 4099, 4100, 4104, 9104, 9112, 9129};
    const size_t sizes[] = {4099, 1, 4, 5000, 8, 17, 3001};
    const int decay[] = {1, 0, 1, 0, 1, 0, 1};
    AdamWTensors table;
    adamw_tensors_v2(&table, FUSED_SIZES, FUSED_DECAY, FUSED_TENSORS);
    cr_assert_eq(table.count, 7, "the empty tensor is left out: %d tensors", table.count);
    cr_assert_eq(table.first_block[0], 0u);
    for (int k = 0; k < table.count; k++) {
        cr_assert_eq(table.offset[k], offsets[k], "tensor %d's offset", k);
        cr_assert_eq(table.size[k], sizes[k], "tensor %d's size", k);
        cr_assert_eq(table.decay[k], decay[k], "tensor %d's decay", k);
        const unsigned int next = k + 1 < table.count ? table.first_block[k + 1] : table.blocks;
        cr_assert_gt(next, table.first_block[k], "tensor %d has no block", k);
    }
    // Blocks of 256 threads of one Vec each: 4099 values take several.
    cr_assert_gt(table.first_block[1] - table.first_block[0], 1u);
}

typedef struct {
    floatX *params;
    float *master, *m, *v;  // master NULL: params are the weights
} FusedState;

static FusedState fused_state(const float *params, const float *m, const float *v,
                              int with_master) {
    FusedState s = {gt_upload_x(params, FUSED_VALUES), NULL, gt_upload(m, FUSED_VALUES),
                    gt_upload(v, FUSED_VALUES)};
    if (with_master) s.master = gt_upload(params, FUSED_VALUES);
    return s;
}

// Chapters 03-08's update: the gradients clipped in place, by the factor
// computed on the device, then adamw_update_v1 once per non-empty tensor.
static void per_tensor_update(FusedState *s, floatX *grads, const float *norm, float max_norm,
                              float lr, int t, const AdamWConfig *cfg) {
    float *factor = gt_device_poisoned(1);
    grad_clip_factor_v1(&gt_ctx, factor, norm, max_norm);
    scale_by_device_factor_v1(&gt_ctx, grads, FUSED_VALUES, factor);
    size_t offset = 0;
    for (int i = 0; i < FUSED_TENSORS; offset += FUSED_SIZES[i], i++) {
        if (FUSED_SIZES[i] == 0) continue;
        adamw_update_v1(&gt_ctx, s->params + offset, s->master ? s->master + offset : NULL,
                        grads + offset, s->m + offset, s->v + offset, FUSED_SIZES[i], lr, cfg,
                        FUSED_DECAY[i], t);
    }
}

static AdamWStep *step_poisoned(void) {
    AdamWStep *d = gt_device_alloc(sizeof(AdamWStep), "AdamW step");
    CUDA_CHECK(cudaMemset(d, 0xff, sizeof(AdamWStep)));
    return d;
}

// What adamw_begin_step_v2 wrote must be what the host computes: t, lr, the
// corrections as adamw_update_v1's launcher computes them, and the host's
// clip factor of the norm, bit for bit.
static void assert_step_is_the_hosts(const AdamWStep *d_step, int t, float lr, float norm,
                                     float max_norm, const AdamWConfig *cfg) {
    CUDA_CHECK(cudaStreamSynchronize(gt_ctx.stream));
    AdamWStep got, want = {t, lr, 1.0f - powf(cfg->beta1, (float)t),
                           1.0f - powf(cfg->beta2, (float)t), grad_clip_factor(norm, max_norm)};
    CUDA_CHECK(cudaMemcpy(&got, d_step, sizeof got, cudaMemcpyDeviceToHost));
    cr_assert(memcmp(&got, &want, sizeof got) == 0,
              "step %d, norm %g, max_norm %g: device (t %d, lr %.9g, c1 %.9g, c2 %.9g, clip "
              "%.9g), host (t %d, lr %.9g, c1 %.9g, c2 %.9g, clip %.9g)",
              t, (double)norm, (double)max_norm, got.t, (double)got.lr, (double)got.correction1,
              (double)got.correction2, (double)got.clip_factor, want.t, (double)want.lr,
              (double)want.correction1, (double)want.correction2, (double)want.clip_factor);
}

static void assert_state_identical(const FusedState *got, const FusedState *want,
                                   const char *what) {
    char name[128];
    snprintf(name, sizeof name, "%s: params", what);
    gt_assert_identical(name, gt_download_x(got->params, FUSED_VALUES),
                        gt_download_x(want->params, FUSED_VALUES), FUSED_VALUES);
    if (want->master) {
        snprintf(name, sizeof name, "%s: master", what);
        gt_assert_identical(name, gt_download(got->master, FUSED_VALUES),
                            gt_download(want->master, FUSED_VALUES), FUSED_VALUES);
    }
    snprintf(name, sizeof name, "%s: m", what);
    gt_assert_identical(name, gt_download(got->m, FUSED_VALUES),
                        gt_download(want->m, FUSED_VALUES), FUSED_VALUES);
    snprintf(name, sizeof name, "%s: v", what);
    gt_assert_identical(name, gt_download(got->v, FUSED_VALUES),
                        gt_download(want->v, FUSED_VALUES), FUSED_VALUES);
}

// Chapter 09's update (adamw_begin_step_v2, adamw_fused_v2) against chapters
// 03-08's (grad_clip_factor_v1, scale_by_device_factor_v1, adamw_update_v1
// per tensor) over 4 steps of fresh gradients: the same params, master, m
// and v, bit for bit, with and without master weights. The gradients are
// small on odd steps (norm about 0.06) and large on even ones (about 6), so
// that max_norm = 1 clips every other step; `clips` is how many of the 4
// steps max_norm must clip, which the test checks, so that it tests what it
// says. The fused kernel must leave the gradients as they were.
static void check_fused(float max_norm, int clips, uint64_t seed) {
    for (int with_master = 0; with_master <= 1; with_master++) {
        Rng rng;
        rng_seed(&rng, seed);
        const size_t n = FUSED_VALUES;
        float *params = gt_random(n, -1, 1, &rng), *m = gt_random(n, -0.01f, 0.01f, &rng);
        float *v = gt_random(n, 1e-6f, 1e-4f, &rng);
        FusedState want = fused_state(params, m, v, with_master);
        FusedState got = fused_state(params, m, v, with_master);
        AdamWTensors table;
        adamw_tensors_v2(&table, FUSED_SIZES, FUSED_DECAY, FUSED_TENSORS);
        AdamWStep *step = step_poisoned();
        float *d_norm = gt_device_poisoned(1), *scratch = gt_device_poisoned(GRAD_NORM_MAX_BLOCKS);
        const AdamWConfig cfg = adamw_default_config();
        int clipped = 0;
        for (int t = 1; t <= 4; t++) {
            const float scale = t % 2 ? 1e-3f : 0.1f, lr = 6e-4f * (float)t;
            float *grads = gt_random_x(n, -scale, scale, &rng);
            floatX *want_grads = gt_upload_x(grads, n), *got_grads = gt_upload_x(grads, n);
            grad_norm_v1(&gt_ctx, d_norm, scratch, got_grads, n);
            per_tensor_update(&want, want_grads, d_norm, max_norm, lr, t, &cfg);
            adamw_begin_step_v2(&gt_ctx, step, d_norm, max_norm, t, lr, &cfg);
            adamw_fused_v2(&gt_ctx, &table, got.params, got.master, got_grads, got.m, got.v, step,
                           &cfg, 0);
            float *norm = gt_download(d_norm, 1);
            clipped += grad_clip_factor(*norm, max_norm) < 1.0f;
            assert_step_is_the_hosts(step, t, lr, *norm, max_norm, &cfg);
            gt_assert_identical("the gradients, left unscaled", gt_download_x(got_grads, n), grads,
                                n);
            free(norm);
            free(grads);
        }
        cr_assert_eq(clipped, clips, "max_norm %g clipped %d steps of 4, not %d", (double)max_norm,
                     clipped, clips);
        char what[96];
        snprintf(what, sizeof what, "fused vs per tensor, max_norm %g, %s", (double)max_norm,
                 with_master ? "master weights" : "no master weights");
        assert_state_identical(&got, &want, what);
        free(params), free(m), free(v);
    }
}

Test(kernels_adamw, fused_is_per_tensor_clipping_every_step) { check_fused(1e-4f, 4, 7); }
Test(kernels_adamw, fused_is_per_tensor_never_clipping) { check_fused(1e9f, 0, 8); }
Test(kernels_adamw, fused_is_per_tensor_default_clip) { check_fused(1.0f, 2, 9); }

// The step's values over the norms and limits of clip_factor_on_device_is_the_hosts,
// and steps far enough out that beta2^t is no longer 1 - something small.
Test(kernels_adamw, begin_step_writes_the_hosts_values) {
    const float norms[] = {0.0f, 1e-7f, 0.999999f, 1.0f, 1.000001f, 3.7f, 3e38f, INFINITY, NAN};
    const float max_norms[] = {1.0f, 1e-3f, 0.0f, -1.0f};
    const int steps[] = {1, 2, 10, 1000, 100000};
    const AdamWConfig cfg = adamw_default_config();
    float *d_norm = gt_device_alloc(sizeof(float), "norm");
    AdamWStep *step = step_poisoned();
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++)
        for (size_t j = 0; j < sizeof max_norms / sizeof max_norms[0]; j++)
            for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
                const float lr = 6e-4f / (float)(i + 1);
                CUDA_CHECK(cudaMemcpy(d_norm, &norms[i], sizeof(float), cudaMemcpyHostToDevice));
                adamw_begin_step_v2(&gt_ctx, step, d_norm, max_norms[j], steps[s], lr, &cfg);
                assert_step_is_the_hosts(step, steps[s], lr, norms[i], max_norms[j], &cfg);
            }
}
