// test_kernels_attention_flash_bf16.c: chapter 05's flash attention, both
// versions (v2, mma.sync; v3, wgmma, heads of 64; bf16 build only), against
// the CPU reference, against chapter 04's eager attention (attention_*_v1),
// against each other, and against themselves run twice. The shapes are
// chosen to cross every edge of the kernels' tiles (128 queries forward, 64
// keys and 64 queries backward): T below one tile, T not a multiple of
// either, 3 heads, batches of 5, and the head sizes the kernels are built for.
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
} Version;

static const Version VERSIONS[] = {
    {"v2", attention_forward_v2, attention_backward_v2, 1, 0},
    {"v3", attention_forward_v3, attention_backward_v3, 0, 1},
};
#define NUM_VERSIONS ((int)(sizeof VERSIONS / sizeof VERSIONS[0]))

// v3 runs where the GPU and the build have it, and not under
// GPT2_PORTABLE_KERNELS=1 (gpu_context.h): there v2 alone is tested.
static int runs_shape(const Version *v, Shape s) {
    return (v->any_head_size || s.C == 64 * s.NH) && (!v->hopper || gt_ctx.hopper);
}

static Results run_flash(const Version *v, Shape s, const floatX *d_qkv, const floatX *d_dout) {
    const size_t N = (size_t)s.B * s.T * s.C, rows = (size_t)s.B * s.NH * s.T;
    floatX *d_out = gt_device_poisoned_x(N), *d_dqkv = gt_device_poisoned_x(3 * N);
    float *d_lse = gt_device_poisoned(rows);
    float *d_scratch = gt_device_poisoned(attention_backward_v2_scratch_floats(s.B, s.T, s.NH));
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

static void check_against_cpu(Shape s, uint64_t seed) {
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
    for (int i = 0; i < NUM_VERSIONS; i++) {
        const Version *v = &VERSIONS[i];
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
static void check_against_eager(Shape s, uint64_t seed) {
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

    for (int i = 0; i < NUM_VERSIONS; i++) {
        const Version *v = &VERSIONS[i];
        if (!runs_shape(v, s)) continue;
        Results r = run_flash(v, s, d_qkv, d_dout);
        char what[64];
        snprintf(what, sizeof what, "flash %s out vs eager", v->name);
        gt_compare(what, r.out, eager_out, N, TOL_GPU_MODEL_BF16);
        compare_gradients(v->name, "eager", r.dqkv, eager_dqkv, s, TOL_GPU_MODEL_BF16);
    }
}

Test(kernels_attention_flash, matches_eager_odd_shape) {
    check_against_eager((Shape){5, 150, 192, 3}, 5);
}

Test(kernels_attention_flash, matches_eager_gpt2_heads) {
    check_against_eager((Shape){2, 384, 768, 12}, 6);
}

// No atomics, every sum in a fixed order: two runs give the same bits.
Test(kernels_attention_flash, is_deterministic) {
    const Shape s = {3, 300, 192, 3};
    const size_t N = (size_t)s.B * s.T * s.C;
    Rng rng;
    rng_seed(&rng, 7);
    floatX *d_qkv = gt_upload_x(gt_random_x(3 * N, -1, 1, &rng), 3 * N);
    floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
    for (int i = 0; i < NUM_VERSIONS; i++) {
        const Version *v = &VERSIONS[i];
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
