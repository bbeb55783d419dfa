// test_kernels_attention_flash_bf16.c: chapter 05's flash attention, both
// versions (v2, mma.sync; v3, wgmma, heads of 64; bf16 build only), against
// the CPU reference, against chapter 04's eager attention (attention_*_v1),
// against each other, and against themselves run twice. The shapes are
// chosen to cross every edge of the kernels' tiles (128 queries forward, 64
// keys and 64 queries backward): T below one tile, T not a multiple of
// either, 3 heads, batches of 5, and the head sizes the kernels are built for.
// Then chapter 12's v4 (the TMA, warp specialization, tiles of 128 keys;
// heads of 64, Hopper only: skipped elsewhere) at v3's shapes, against the
// same references and against v3, and each of the kernel lab's steps of its
// forward pass.
#define _POSIX_C_SOURCE 200809L  // setenv
#include "attention.h"
#include "attention_flash.h"
#include "util/compare.h"
#include "model/gpt2_cpu.h"
#include "gpu_test.h"  // criterion.h, which <criterion/redirect.h> needs first
#include <criterion/redirect.h>
#include "util/tolerances.h"

TestSuite(kernels_attention_flash, .init = gpu_test_init, .fini = gpu_test_fini);

typedef struct {
    int B, T, C, NH;
} Shape;

// lse[b,h,t] = log(sum_{j<=t} exp(q_t . k_j / sqrt(hs))), in double, from
// the same bf16-exact inputs the kernel reads.
static float *cpu_lse(const float *qkv, Shape s) {
    const int hs = s.C / s.NH, C3 = 3 * s.C;
    const double scale = 1.0 / sqrt((double)hs);
    float *lse = xmalloc((size_t)s.B * s.NH * s.T * sizeof(float));
    double *x = xmalloc((size_t)s.T * sizeof(double));
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++)
            for (int t = 0; t < s.T; t++) {
                const float *q = qkv + ((size_t)b * s.T + t) * C3 + h * hs;
                double max = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    const float *k = qkv + ((size_t)b * s.T + j) * C3 + s.C + h * hs;
                    double dot = 0;
                    for (int i = 0; i < hs; i++) dot += (double)q[i] * k[i];
                    x[j] = dot * scale;
                    if (x[j] > max) max = x[j];
                }
                for (int j = 0; j <= t; j++) sum += exp(x[j] - max);
                lse[((size_t)b * s.NH + h) * s.T + t] = (float)(max + log(sum));
            }
    free(x);
    return lse;
}

// What one run of the flash kernels gives, on the host.
typedef struct {
    float *out, *lse, *dqkv;
} Results;

typedef struct {
    const char *name;
    void (*forward)(const GpuContext *ctx, floatX *out, float *lse, const floatX *qkv, int B,
                    int T, int C, int NH);
    void (*backward)(const GpuContext *ctx, floatX *dqkv, float *scratch, const floatX *dout,
                     const floatX *out, const floatX *qkv, const float *lse, int B, int T, int C,
                     int NH);
    int any_head_size;  // 0: heads of 64 only
    int hopper;         // 1: wgmma's sm_90a code, where the context runs it (gt_ctx.hopper)
    size_t (*scratch_floats)(int B, int T, int NH);  // the backward pass's scratch
} Version;

static const Version VERSIONS[] = {
    {"v2", attention_forward_v2, attention_backward_v2, 1, 0, attention_backward_v2_scratch_floats},
    {"v3", attention_forward_v3, attention_backward_v3, 0, 1, attention_backward_v2_scratch_floats},
};
#define NUM_VERSIONS ((int)(sizeof VERSIONS / sizeof VERSIONS[0]))

// Chapter 12's: v3's contracts, a scratch of its own.
static const Version V4 = {"v4", attention_forward_v4, attention_backward_v4, 0, 1,
                           attention_backward_v4_scratch_floats};

// v3 runs where the GPU and the build have it, and not under
// GPT2_PORTABLE_KERNELS=1 (gpu_context.h): there v2 alone is tested.
static int runs_shape(const Version *v, Shape s) {
    return (v->any_head_size || s.C == 64 * s.NH) && (!v->hopper || gt_ctx.hopper);
}

static Results run_flash(const Version *v, Shape s, const floatX *d_qkv, const floatX *d_dout) {
    const size_t N = (size_t)s.B * s.T * s.C, rows = (size_t)s.B * s.NH * s.T;
    floatX *d_out = gt_device_poisoned_x(N), *d_dqkv = gt_device_poisoned_x(3 * N);
    float *d_lse = gt_device_poisoned(rows);
    float *d_scratch = gt_device_poisoned(v->scratch_floats(s.B, s.T, s.NH));
    v->forward(&gt_ctx, d_out, d_lse, d_qkv, s.B, s.T, s.C, s.NH);
    v->backward(&gt_ctx, d_dqkv, d_scratch, d_dout, d_out, d_qkv, d_lse, s.B, s.T, s.C, s.NH);
    Results r = {gt_download_x(d_out, N), gt_download(d_lse, rows), gt_download_x(d_dqkv, 3 * N)};
    return r;
}

// dq, dk and dv, each (B,T,C), out of a (B,T,3C) gradient.
static float *part_of(const float *dqkv, Shape s, int which) {
    const size_t BT = (size_t)s.B * s.T;
    float *part = xmalloc(BT * s.C * sizeof(float));
    for (size_t r = 0; r < BT; r++)
        memcpy(part + r * s.C, dqkv + r * 3 * s.C + which * s.C, s.C * sizeof(float));
    return part;
}

// Scale, direction and size of dq, dk and dv against a reference.
static void compare_gradients(const char *version, const char *against, const float *got,
                              const float *ref, Shape s, double tol) {
    static const char *const names[] = {"dq", "dk", "dv"};
    const size_t n = (size_t)s.B * s.T * s.C;
    for (int which = 0; which < 3; which++) {
        float *g = part_of(got, s, which), *r = part_of(ref, s, which);
        char what[96];
        snprintf(what, sizeof what, "flash %s %s vs %s", version, names[which], against);
        gt_compare(what, g, r, n, tol);
        double cos = cosine_similarity(g, r, n), ratio = norm_ratio(g, r, n);
        if (getenv("GPU_TEST_VERBOSE"))
            fprintf(stderr, "  %-40s cosine %.7f, norm ratio %.6f\n", what, cos, ratio);
        cr_assert(cos >= TOL_GPU_GRAD_COSINE_BF16, "%s: cosine %.7f below %g", what, cos,
                  TOL_GPU_GRAD_COSINE_BF16);
        cr_assert(fabs(ratio - 1) <= TOL_GRAD_NORM_RATIO, "%s: norm ratio %.6f", what, ratio);
        free(g), free(r);
    }
}

static void check_versions_against_cpu(const Version *versions, int count, Shape s,
                                       uint64_t seed) {
    const size_t N = (size_t)s.B * s.T * s.C, A = (size_t)s.B * s.NH * s.T * s.T;
    Rng rng;
    rng_seed(&rng, seed);
    float *qkv = gt_random_x(3 * N, -1, 1, &rng), *dout = gt_random_x(N, -1, 1, &rng);
    float *out = xmalloc(N * sizeof(float)), *preatt = xmalloc(A * sizeof(float));
    float *att = xmalloc(A * sizeof(float)), *dqkv = xcalloc(3 * N, sizeof(float));
    float *dpreatt = xcalloc(A, sizeof(float)), *datt = xcalloc(A, sizeof(float));
    cpu_attention_forward(out, preatt, att, qkv, s.B, s.T, s.C, s.NH);
    cpu_attention_backward(dqkv, dpreatt, datt, dout, qkv, att, s.B, s.T, s.C, s.NH);

    floatX *d_qkv = gt_upload_x(qkv, 3 * N), *d_dout = gt_upload_x(dout, N);
    float *lse = cpu_lse(qkv, s);
    for (int i = 0; i < count; i++) {
        const Version *v = &versions[i];
        if (!runs_shape(v, s)) continue;
        Results r = run_flash(v, s, d_qkv, d_dout);
        char what[64];
        snprintf(what, sizeof what, "flash %s out vs cpu", v->name);
        gt_compare(what, r.out, out, N, TOL_FLASH_OUT_BF16);
        snprintf(what, sizeof what, "flash %s lse vs cpu", v->name);
        gt_compare(what, r.lse, lse, (size_t)s.B * s.NH * s.T, TOL_FLASH_LSE);
        compare_gradients(v->name, "cpu", r.dqkv, dqkv, s, TOL_FLASH_GRADS_BF16);
    }
}

static void check_against_cpu(Shape s, uint64_t seed) {
    check_versions_against_cpu(VERSIONS, NUM_VERSIONS, s, seed);
}

// hs = 64, GPT-2's, over two query tiles forward and four backward.
Test(kernels_attention_flash, matches_cpu_hs64) { check_against_cpu((Shape){2, 256, 128, 2}, 1); }

// T = 200: no tile is full at the end, forward or backward; 3 heads.
Test(kernels_attention_flash, matches_cpu_odd_t) { check_against_cpu((Shape){2, 200, 192, 3}, 2); }

// B = 5, 3 heads of 32, T = 37: less than one tile of anything.
Test(kernels_attention_flash, matches_cpu_hs32_short) {
    check_against_cpu((Shape){5, 37, 96, 3}, 3);
}

// The tiny test model's heads: 4 of 16, T = 32.
Test(kernels_attention_flash, matches_cpu_hs16) { check_against_cpu((Shape){4, 32, 64, 4}, 4); }

// Against chapter 04's eager attention (attention_forward_v1 and
// attention_backward_v1, bf16), on the same inputs: both are bf16
// computations of one function, rounded at different places.
static void check_versions_against_eager(const Version *versions, int count, Shape s,
                                         uint64_t seed) {
    const size_t N = (size_t)s.B * s.T * s.C, A = (size_t)s.B * s.NH * s.T * s.T;
    Rng rng;
    rng_seed(&rng, seed);
    floatX *d_qkv = gt_upload_x(gt_random_x(3 * N, -1, 1, &rng), 3 * N);
    floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
    floatX *d_out = gt_device_poisoned_x(N), *d_att = gt_device_poisoned_x(A);
    floatX *d_dqkv = gt_upload_x(xcalloc(3 * N, sizeof(float)), 3 * N);
    size_t scratch = attention_forward_scratch_floats(s.B, s.T, s.C, s.NH);
    if (attention_backward_scratch_floats(s.B, s.T, s.C, s.NH) > scratch)
        scratch = attention_backward_scratch_floats(s.B, s.T, s.C, s.NH);
    float *d_scratch = gt_device_poisoned(scratch);
    attention_forward_v1(&gt_ctx, d_out, d_att, d_scratch, d_qkv, s.B, s.T, s.C, s.NH);
    attention_backward_v1(&gt_ctx, d_dqkv, d_scratch, d_dout, d_qkv, d_att, s.B, s.T, s.C, s.NH);
    float *eager_out = gt_download_x(d_out, N), *eager_dqkv = gt_download_x(d_dqkv, 3 * N);

    for (int i = 0; i < count; i++) {
        const Version *v = &versions[i];
        if (!runs_shape(v, s)) continue;
        Results r = run_flash(v, s, d_qkv, d_dout);
        char what[64];
        snprintf(what, sizeof what, "flash %s out vs eager", v->name);
        gt_compare(what, r.out, eager_out, N, TOL_GPU_MODEL_BF16);
        compare_gradients(v->name, "eager", r.dqkv, eager_dqkv, s, TOL_GPU_MODEL_BF16);
    }
}

static void check_against_eager(Shape s, uint64_t seed) {
    check_versions_against_eager(VERSIONS, NUM_VERSIONS, s, seed);
}

Test(kernels_attention_flash, matches_eager_odd_shape) {
    check_against_eager((Shape){5, 150, 192, 3}, 5);
}

Test(kernels_attention_flash, matches_eager_gpt2_heads) {
    check_against_eager((Shape){2, 384, 768, 12}, 6);
}

// No atomics, every sum in a fixed order: two runs give the same bits.
static void check_deterministic(const Version *versions, int count, Shape s, uint64_t seed) {
    const size_t N = (size_t)s.B * s.T * s.C;
    Rng rng;
    rng_seed(&rng, seed);
    floatX *d_qkv = gt_upload_x(gt_random_x(3 * N, -1, 1, &rng), 3 * N);
    floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
    for (int i = 0; i < count; i++) {
        const Version *v = &versions[i];
        if (!runs_shape(v, s)) continue;
        Results first = run_flash(v, s, d_qkv, d_dout), second = run_flash(v, s, d_qkv, d_dout);
        char what[64];
        snprintf(what, sizeof what, "flash %s out, two runs", v->name);
        gt_assert_identical(what, first.out, second.out, N);
        snprintf(what, sizeof what, "flash %s lse, two runs", v->name);
        gt_assert_identical(what, first.lse, second.lse, (size_t)s.B * s.NH * s.T);
        snprintf(what, sizeof what, "flash %s dqkv, two runs", v->name);
        gt_assert_identical(what, first.dqkv, second.dqkv, 3 * N);
    }
}

Test(kernels_attention_flash, is_deterministic) {
    check_deterministic(VERSIONS, NUM_VERSIONS, (Shape){3, 300, 192, 3}, 7);
}

// v3 computes v2's function with the same roundings to bf16 (P, dS, the
// outputs) and the same fp32 statistics; the tensor cores add the products
// of each step in their own order, so the two agree to a few bf16 roundings.
Test(kernels_attention_flash, v3_matches_v2) {
    if (!gt_ctx.hopper) cr_skip_test("v3 needs a GPU of compute capability 9.0 and GPU_ARCH=90");
    const Shape s = {4, 333, 256, 4};
    const size_t N = (size_t)s.B * s.T * s.C;
    Rng rng;
    rng_seed(&rng, 8);
    floatX *d_qkv = gt_upload_x(gt_random_x(3 * N, -1, 1, &rng), 3 * N);
    floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
    Results v2 = run_flash(&VERSIONS[0], s, d_qkv, d_dout);
    Results v3 = run_flash(&VERSIONS[1], s, d_qkv, d_dout);
    gt_compare("flash v3 out vs v2", v3.out, v2.out, N, TOL_FLASH_OUT_BF16);
    gt_compare("flash v3 lse vs v2", v3.lse, v2.lse, (size_t)s.B * s.NH * s.T, TOL_FLASH_LSE);
    compare_gradients("v3", "v2", v3.dqkv, v2.dqkv, s, TOL_FLASH_GRADS_BF16);
}

// ---- chapter 12: v4 ----------------------------------------------------------------
// v4 runs where v3 does: a Hopper GPU, a build for it (GPU_ARCH=90), and
// GPT2_PORTABLE_KERNELS not set to 1; its tests are skipped elsewhere.
static void skip_without_v4(void) {
    if (!gt_ctx.hopper)
        cr_skip_test("v4 needs a GPU of compute capability 9.0, GPU_ARCH=90, and "
                     "GPT2_PORTABLE_KERNELS unset");
}

// Forward and backward against the CPU, at v3's shapes: two query tiles
// forward and four backward; T = 200 (no tile full at the end) with 3 heads;
// T = 150 in batches of 5; and less than one tile of anything, T = 37.
Test(kernels_attention_flash, v4_matches_cpu_hs64) {
    skip_without_v4();
    check_versions_against_cpu(&V4, 1, (Shape){2, 256, 128, 2}, 1);
}

Test(kernels_attention_flash, v4_matches_cpu_odd_t) {
    skip_without_v4();
    check_versions_against_cpu(&V4, 1, (Shape){2, 200, 192, 3}, 2);
}

Test(kernels_attention_flash, v4_matches_cpu_odd_shape) {
    skip_without_v4();
    check_versions_against_cpu(&V4, 1, (Shape){5, 150, 192, 3}, 5);
}

Test(kernels_attention_flash, v4_matches_cpu_short) {
    skip_without_v4();
    check_versions_against_cpu(&V4, 1, (Shape){5, 37, 192, 3}, 3);
}

// Against chapter 04's eager attention, as v2 and v3 are.
Test(kernels_attention_flash, v4_matches_eager_gpt2_heads) {
    skip_without_v4();
    check_versions_against_eager(&V4, 1, (Shape){5, 150, 192, 3}, 5);
    check_versions_against_eager(&V4, 1, (Shape){2, 384, 768, 12}, 6);
}

// Chapter 12's promise: dQ added in a fixed order, no atomics. Two runs,
// the same bits, at v2's and v3's shape and at GPT-2's 12 heads.
Test(kernels_attention_flash, v4_is_deterministic) {
    skip_without_v4();
    check_deterministic(&V4, 1, (Shape){3, 300, 192, 3}, 7);
    check_deterministic(&V4, 1, (Shape){2, 1024, 768, 12}, 9);
}

// v4's forward pass (step 7, tiles of 128 keys) moves each row's running
// maximum once per 128 keys where v3 moves it per 64: the same values,
// rounded elsewhere (the exponentials taken from other maxima, the sums
// added in other groups), so within chapter 05's tolerances of v3's, and
// the gradients, which read them, within its gradients' tolerance.
Test(kernels_attention_flash, v4_matches_v3) {
    skip_without_v4();
    const Shape shapes[] = {{4, 333, 256, 4}, {2, 1024, 768, 12}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const Shape s = shapes[k];
        const size_t N = (size_t)s.B * s.T * s.C;
        Rng rng;
        rng_seed(&rng, 8 + k);
        floatX *d_qkv = gt_upload_x(gt_random_x(3 * N, -1, 1, &rng), 3 * N);
        floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
        Results v3 = run_flash(&VERSIONS[1], s, d_qkv, d_dout);
        Results v4 = run_flash(&V4, s, d_qkv, d_dout);
        gt_compare("flash v4 out vs v3", v4.out, v3.out, N, TOL_FLASH_OUT_BF16);
        gt_compare("flash v4 lse vs v3", v4.lse, v3.lse, (size_t)s.B * s.NH * s.T, TOL_FLASH_LSE);
        compare_gradients("v4", "v3", v4.dqkv, v3.dqkv, s, TOL_FLASH_GRADS_BF16);
    }
}

// The kernel lab's steps from v3 to v4's forward pass (attention_flash.h).
// Steps 1 to ATTENTION_V4_STEPS_V3_BITS make v3's values by v3's
// operations: v3's bits. The steps past them (tiles of 128 keys) make
// the first of them's bits, one another's, and v3's values within chapter
// 05's tolerance. Step ATTENTION_V4_FORWARD is attention_forward_v4. T =
// 130 gives a block whose last tile is 2 keys, T = 37 one of 37 keys alone.
Test(kernels_attention_flash, v4_steps_match_v3) {
    skip_without_v4();
    const Shape shapes[] = {{2, 200, 192, 3}, {3, 37, 192, 3}, {1, 130, 64, 1}, {2, 1024, 768, 12}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const Shape s = shapes[k];
        const size_t N = (size_t)s.B * s.T * s.C, rows = (size_t)s.B * s.NH * s.T;
        Rng rng;
        rng_seed(&rng, 10 + k);
        floatX *d_qkv = gt_upload_x(gt_random_x(3 * N, -1, 1, &rng), 3 * N);
        floatX *d_out = gt_device_poisoned_x(N);
        float *d_lse = gt_device_poisoned(rows);
        attention_forward_v3(&gt_ctx, d_out, d_lse, d_qkv, s.B, s.T, s.C, s.NH);
        float *v3_out = gt_download_x(d_out, N), *v3_lse = gt_download(d_lse, rows);
        attention_forward_v4(&gt_ctx, d_out, d_lse, d_qkv, s.B, s.T, s.C, s.NH);
        float *v4_out = gt_download_x(d_out, N), *v4_lse = gt_download(d_lse, rows);
        float *wide_out = NULL, *wide_lse = NULL;  // the first step of 128 keys
        for (int step = 1; step <= ATTENTION_V4_STEPS; step++) {
            floatX *out = gt_device_poisoned_x(N);
            float *lse = gt_device_poisoned(rows);
            attention_forward_v4_step(&gt_ctx, step, out, lse, d_qkv, s.B, s.T, s.C, s.NH);
            float *got_out = gt_download_x(out, N), *got_lse = gt_download(lse, rows);
            char what[64];
            snprintf(what, sizeof what, "v4 step %d out vs v3 (T=%d)", step, s.T);
            if (step <= ATTENTION_V4_STEPS_V3_BITS) {
                gt_assert_identical(what, got_out, v3_out, N);
                snprintf(what, sizeof what, "v4 step %d lse vs v3 (T=%d)", step, s.T);
                gt_assert_identical(what, got_lse, v3_lse, rows);
            } else {
                gt_compare(what, got_out, v3_out, N, TOL_FLASH_OUT_BF16);
                snprintf(what, sizeof what, "v4 step %d lse vs v3 (T=%d)", step, s.T);
                gt_compare(what, got_lse, v3_lse, rows, TOL_FLASH_LSE);
                if (wide_out) {
                    snprintf(what, sizeof what, "v4 step %d out vs step %d (T=%d)", step,
                             ATTENTION_V4_STEPS_V3_BITS + 1, s.T);
                    gt_assert_identical(what, got_out, wide_out, N);
                    snprintf(what, sizeof what, "v4 step %d lse vs step %d (T=%d)", step,
                             ATTENTION_V4_STEPS_V3_BITS + 1, s.T);
                    gt_assert_identical(what, got_lse, wide_lse, rows);
                }
            }
            if (step == ATTENTION_V4_FORWARD) {
                gt_assert_identical("the step's out vs attention_forward_v4", got_out, v4_out, N);
                gt_assert_identical("the step's lse vs attention_forward_v4", got_lse, v4_lse,
                                    rows);
            }
            if (step > ATTENTION_V4_STEPS_V3_BITS && !wide_out)
                wide_out = got_out, wide_lse = got_lse;  // kept for the steps after it
            else
                free(got_out), free(got_lse);
        }
        free(v3_out), free(v3_lse), free(v4_out), free(v4_lse), free(wide_out), free(wide_lse);
    }
}

// The backward pass's variants (attention_flash.h). 1 and 2 are v3's
// kernels in another order: v3's bits. 3 and 4 compute dK and dV as v3
// does, tile for tile (v3's bits), and dQ from the same dS, summed over
// the keys in another order: within v3's tolerance against v2. 3 adds in a
// fixed order, so two runs give the same bits; 4 (atomics) need not. 5 to
// 8 are v3's kernels with D computed in the dQ kernel, the exponentials
// beside dP's product, the tiles copied by the TMA: v3's operations, so
// v3's bits, on both runs.
Test(kernels_attention_flash, v4_backward_variants_match_v3) {
    skip_without_v4();
    const Shape shapes[] = {{3, 300, 192, 3}, {2, 1024, 768, 12}, {2, 37, 128, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const Shape s = shapes[k];
        const size_t N = (size_t)s.B * s.T * s.C, rows = (size_t)s.B * s.NH * s.T;
        Rng rng;
        rng_seed(&rng, 20 + k);
        floatX *d_qkv = gt_upload_x(gt_random_x(3 * N, -1, 1, &rng), 3 * N);
        floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
        Results v3 = run_flash(&VERSIONS[1], s, d_qkv, d_dout);
        floatX *d_out = gt_upload_x(v3.out, N);
        float *d_lse = gt_upload(v3.lse, rows);
        for (int v = 1; v <= ATTENTION_V4_BACKWARD_VARIANTS; v++) {
            float *runs[2];
            for (int r = 0; r < 2; r++) {
                floatX *d_dqkv = gt_device_poisoned_x(3 * N);
                float *d_scratch =
                    gt_device_poisoned(attention_backward_v4_variant_scratch_floats(v, s.B, s.T,
                                                                                    s.NH));
                attention_backward_v4_variant(&gt_ctx, v, d_dqkv, d_scratch, d_dout, d_out, d_qkv,
                                              d_lse, s.B, s.T, s.C, s.NH);
                runs[r] = gt_download_x(d_dqkv, 3 * N);
            }
            char what[64];
            snprintf(what, sizeof what, "backward variant %d (T=%d)", v, s.T);
            if (v != 3 && v != 4) {
                gt_assert_identical(what, runs[0], v3.dqkv, 3 * N);
                gt_assert_identical(what, runs[1], v3.dqkv, 3 * N);
            } else {
                for (int which = 1; which <= 2; which++) {  // dk, dv: v3's bits
                    float *g = part_of(runs[0], s, which), *ref = part_of(v3.dqkv, s, which);
                    gt_assert_identical(what, g, ref, N);
                    free(g), free(ref);
                }
                compare_gradients(what, "v3", runs[0], v3.dqkv, s, TOL_FLASH_GRADS_BF16);
            }
            if (v == 3) gt_assert_identical("variant 3, two runs", runs[1], runs[0], 3 * N);
            free(runs[0]), free(runs[1]);
        }
    }
}

// ---- the backward candidates past v4 (variants 5 to 8) ------------------------------
// Each with v4's forward pass, as a Version: against the CPU at v4's
// shapes, and D (the scratch, which the dQ kernel now writes) against the
// delta kernel's, bit for bit.
#define SPLIT_VARIANT(n)                                                                       \
    static void backward_variant_##n(const GpuContext *ctx, floatX *dqkv, float *scratch,     \
                                     const floatX *dout, const floatX *out, const floatX *qkv, \
                                     const float *lse, int B, int T, int C, int NH) {          \
        attention_backward_v4_variant(ctx, n, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH); \
    }
SPLIT_VARIANT(5)
SPLIT_VARIANT(6)
SPLIT_VARIANT(7)
SPLIT_VARIANT(8)

static const Version SPLIT_VARIANTS[] = {
    {"v4 backward 5", attention_forward_v4, backward_variant_5, 0, 1,
     attention_backward_v2_scratch_floats},
    {"v4 backward 6", attention_forward_v4, backward_variant_6, 0, 1,
     attention_backward_v2_scratch_floats},
    {"v4 backward 7", attention_forward_v4, backward_variant_7, 0, 1,
     attention_backward_v2_scratch_floats},
    {"v4 backward 8", attention_forward_v4, backward_variant_8, 0, 1,
     attention_backward_v2_scratch_floats},
};
#define NUM_SPLIT_VARIANTS ((int)(sizeof SPLIT_VARIANTS / sizeof SPLIT_VARIANTS[0]))
_Static_assert(NUM_SPLIT_VARIANTS == ATTENTION_V4_BACKWARD_VARIANTS - 4,
               "a Version per backward variant past the fused ones");

Test(kernels_attention_flash, v4_backward_candidates_match_cpu) {
    skip_without_v4();
    check_versions_against_cpu(SPLIT_VARIANTS, NUM_SPLIT_VARIANTS, (Shape){2, 256, 128, 2}, 1);
    check_versions_against_cpu(SPLIT_VARIANTS, NUM_SPLIT_VARIANTS, (Shape){2, 200, 192, 3}, 2);
    check_versions_against_cpu(SPLIT_VARIANTS, NUM_SPLIT_VARIANTS, (Shape){5, 150, 192, 3}, 5);
    check_versions_against_cpu(SPLIT_VARIANTS, NUM_SPLIT_VARIANTS, (Shape){5, 37, 192, 3}, 3);
}

// The D that variants 5 to 8 leave in the scratch is the delta kernel's
// (v3 leaves it there too), bit for bit: the dK/dV kernel reads it.
Test(kernels_attention_flash, v4_backward_candidates_write_v3s_delta) {
    skip_without_v4();
    const Shape shapes[] = {{3, 300, 192, 3}, {2, 1024, 768, 12}, {2, 37, 128, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const Shape s = shapes[k];
        const size_t N = (size_t)s.B * s.T * s.C, rows = (size_t)s.B * s.NH * s.T;
        Rng rng;
        rng_seed(&rng, 30 + k);
        floatX *d_qkv = gt_upload_x(gt_random_x(3 * N, -1, 1, &rng), 3 * N);
        floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
        floatX *d_out = gt_device_poisoned_x(N), *d_dqkv = gt_device_poisoned_x(3 * N);
        float *d_lse = gt_device_poisoned(rows), *d_scratch = gt_device_poisoned(rows);
        attention_forward_v3(&gt_ctx, d_out, d_lse, d_qkv, s.B, s.T, s.C, s.NH);
        attention_backward_v3(&gt_ctx, d_dqkv, d_scratch, d_dout, d_out, d_qkv, d_lse, s.B, s.T,
                              s.C, s.NH);
        float *v3_delta = gt_download(d_scratch, rows);
        for (int v = 5; v <= ATTENTION_V4_BACKWARD_VARIANTS; v++) {
            float *scratch = gt_device_poisoned(rows);
            attention_backward_v4_variant(&gt_ctx, v, d_dqkv, scratch, d_dout, d_out, d_qkv,
                                          d_lse, s.B, s.T, s.C, s.NH);
            float *got = gt_download(scratch, rows);
            char what[64];
            snprintf(what, sizeof what, "backward variant %d's D vs v3's (T=%d)", v, s.T);
            gt_assert_identical(what, got, v3_delta, rows);
            free(got);
        }
        free(v3_delta);
    }
}

// A head size the kernels are not built for stops the program, naming it,
// before anything reaches the device: these run, and pass, without a GPU.
// The message they print on their way out is expected: it goes to a pipe
// (cr_redirect_stderr), not into `make test`'s output, where an "error:"
// line from a passing test would read as a failure.
TestSuite(kernels_attention_flash_host, .init = cr_redirect_stderr);

Test(kernels_attention_flash_host, refuses_other_head_sizes, .exit_code = 1) {
    GpuContext ctx = {0};
    attention_forward_v2(&ctx, NULL, NULL, NULL, 1, 16, 96, 1);
}

Test(kernels_attention_flash_host, v3_refuses_heads_other_than_64, .exit_code = 1) {
    GpuContext ctx = {0};
    attention_forward_v3(&ctx, NULL, NULL, NULL, 1, 16, 128, 4);
}

Test(kernels_attention_flash_host, v4_refuses_heads_other_than_64, .exit_code = 1) {
    GpuContext ctx = {0};
    attention_forward_v4(&ctx, NULL, NULL, NULL, 1, 16, 128, 4);
}

Test(kernels_attention_flash_host, v4_backward_refuses_heads_other_than_64, .exit_code = 1) {
    GpuContext ctx = {0};
    attention_backward_v4(&ctx, NULL, NULL, NULL, NULL, NULL, NULL, 1, 16, 128, 4);
}

Test(kernels_attention_flash_host, v4_backward_candidates_refuse_heads_other_than_64,
     .exit_code = 1) {
    GpuContext ctx = {0};
    attention_backward_v4_variant(&ctx, 5, NULL, NULL, NULL, NULL, NULL, NULL, 1, 16, 128, 4);
}

// The trainer's choice of variant from the environment takes only those
// with v3's scratch, which the model plans: not the fused ones.
Test(kernels_attention_flash_host, v4_backward_from_the_environment_refuses_fused,
     .exit_code = 1) {
    setenv("GPT2_ATTENTION_V4_BACKWARD", "3", 1);
    attention_backward_v4_scratch_floats(1, 16, 1);
}

// The lab's steps are 1 to ATTENTION_V4_STEPS; another stops the program.
Test(kernels_attention_flash_host, v4_refuses_a_step_out_of_range, .exit_code = 1) {
    GpuContext ctx = {0};
    attention_forward_v4_step(&ctx, ATTENTION_V4_STEPS + 1, NULL, NULL, NULL, 1, 16, 64, 1);
}
