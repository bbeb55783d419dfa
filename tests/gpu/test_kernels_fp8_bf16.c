// test_kernels_fp8_bf16.c: chapter 13's casts to FP8 (fp8.h) and the FP8
// GEMMs (matmul_lt.h) against the CPU. The bf16 build only: the casts read
// bf16.
//
// The casts are checked byte for byte against the host's encoder
// (fp8_codec.h, chapter 13's exercise, itself checked against a search over
// every code by tests/cpu/test_fp8_codec.c): the copy exactly; GELU and its gradient, whose tanh may
// differ from the CPU's by an ulp, within one FP8 step of the CPU's code.
// The transpose must be the rows' bytes transposed, exactly.
//
// The GEMMs, twice: against the product of the dequantized FP8 operands
// (what the tensor cores are given), within the bf16 rounding of the output
// and fp32's order of sums; and against the exact product of the bf16
// operands, within the bound the formats give. An e4m3 value is within
// 2^-4 of the value it was cast from (3 mantissa bits: a step of 2^-3 of the
// binade, half of it by rounding), an e5m2 value within 2^-3, so each term
// a*b of a sum is within (1 + ea)(1 + eb) - 1 of itself, and the sum within
// that much of the sum of |a*b|, plus the output's rounding to bf16 (2^-9).
// Subnormals lose more, so the test's values stay in the normal range.
#include <math.h>

#include "fp8.h"
#include "gpu/fp8_codec.h"
#include "gemm_operands.h"
#include "gpu_test.h"
#include "layernorm.h"
#include "layernorm_fp8.h"
#include "matmul_lt.h"
#include "model/gpt2_cpu.h"

#ifdef PRECISION_BF16

TestSuite(kernels_fp8, .init = gpu_test_init, .fini = gpu_test_fini);

// ---- the casts --------------------------------------------------------------------

typedef struct {
    int rows, cols;
    Fp8CastOp op;
    GemmPrecision format;
    Fp8ScaleMode mode;
    int with_bias;
} CastCase;

static Fp8Meta *device_meta(float scale) {
    Fp8Meta m;
    memset(&m, 0, sizeof m);
    m.scale = scale;
    Fp8Meta *d = gt_device_alloc(sizeof m, "an fp8 meta");
    CUDA_CHECK(cudaMemcpy(d, &m, sizeof m, cudaMemcpyHostToDevice));
    return d;
}

static Fp8Meta host_meta(const Fp8Meta *d) {
    Fp8Meta m;
    CUDA_CHECK(cudaMemcpy(&m, d, sizeof m, cudaMemcpyDeviceToHost));
    return m;
}

static uint8_t *download_bytes(const void *d, size_t n) {
    uint8_t *h = xmalloc(n);
    CUDA_CHECK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    return h;
}

static void check_cast(CastCase k, uint64_t seed) {
    const size_t n = (size_t)k.rows * k.cols;
    Rng rng;
    rng_seed(&rng, seed);
    // Values over several binades; gradients small, as a loss's are.
    const float span = k.format == GEMM_E5M2 ? 1e-3f : 4.0f;
    float *in = gt_random_x(n, -span, span, &rng), *pre = gt_random_x(n, -3, 3, &rng);
    // The values the cast takes, by the CPU reference's GELU (the device's,
    // written another way, may differ in the last ulps).
    float *v = xcalloc(n, sizeof(float));
    if (k.op == FP8_COPY) memcpy(v, in, n * sizeof(float));
    else if (k.op == FP8_GELU) cpu_gelu_forward(v, in, n);
    else cpu_gelu_backward(v, pre, in, n);  // v (from 0) += gelu'(pre) * in
    float amax = 0;
    for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(v[i]));
    // Delayed: a scale from an amax half the tensor's, so that the largest
    // values saturate; current: the cast's own.
    const float scale = k.mode == FP8_CURRENT ? fp8_scale_for_amax(amax, k.format)
                                              : fp8_scale_for_amax(amax / 2, k.format);
    Fp8Meta *meta = device_meta(k.mode == FP8_CURRENT ? 1.0f : scale);
    uint8_t *d_out = gt_device_alloc(n, "fp8 rows"), *d_out_t = gt_device_alloc(n, "fp8 cols");
    float *db0 = gt_random_x(k.cols, -1, 1, &rng);
    floatX *d_dbias = k.with_bias ? gt_upload_x(db0, k.cols) : NULL;
    float *partials = k.with_bias ? gt_device_alloc(fp8_cast_partials_floats(k.rows, k.cols) *
                                                        sizeof(float), "partials")
                                  : NULL;
    Fp8Cast cast = {.op = k.op, .in = gt_upload_x(in, n),
                    .pre = k.op == FP8_DGELU ? gt_upload_x(pre, n) : NULL, .rows = k.rows,
                    .cols = k.cols, .format = k.format, .meta = meta, .out = d_out,
                    .out_t = d_out_t, .col_partials = partials, .dbias = d_dbias};
    fp8_cast(&gt_ctx, &cast, k.mode);
    const Fp8Meta m = host_meta(meta);
    cr_assert(m.scale == scale, "scale %g, expected %g", m.scale, scale);
    // The copy's amax exactly; GELU's through the device's exponential, within ulps.
    const float amax_tol = k.op == FP8_COPY ? 0.0f : 1e-5f * amax;
    cr_assert(fabsf(m.amax - amax) <= amax_tol, "amax %g, expected %g", m.amax, amax);
    uint8_t *got = download_bytes(d_out, n), *got_t = download_bytes(d_out_t, n);
    size_t off_by_one = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t want = fp8_encode(v[i] / scale, k.format);
        const int apart = abs((int)got[i] - (int)want);
        cr_assert(apart == 0 || (k.op != FP8_COPY && apart == 1),
                  "[%zu]: code 0x%02x (%g), expected 0x%02x (%g) for %g", i, got[i],
                  fp8_decode(got[i], k.format) * scale, want, fp8_decode(want, k.format) * scale, v[i]);
        off_by_one += apart;
    }
    cr_assert(off_by_one <= n / 100, "%zu codes one step off the CPU's", off_by_one);
    for (int r = 0; r < k.rows; r++)
        for (int c = 0; c < k.cols; c++)
            cr_assert(got_t[(size_t)c * k.rows + r] == got[(size_t)r * k.cols + c],
                      "the transpose at (%d, %d)", c, r);
    if (!k.with_bias) return;
    float *db = gt_copy(db0, k.cols);
    for (int c = 0; c < k.cols; c++) {
        double s = 0;
        for (int r = 0; r < k.rows; r++) s += v[(size_t)r * k.cols + c];
        db[c] += (float)s;
    }
    gt_compare("fp8 cast's bias gradient", gt_download_x(d_dbias, k.cols), db, k.cols, 1e-2);
}

// Shapes: one tile, a part of one, and tiles cut at both edges.
static const int SHAPES[][2] = {{64, 64}, {16, 48}, {208, 176}, {128, 3 * 64}};

Test(kernels_fp8, casts_match_cpu) {
    const Fp8CastOp ops[] = {FP8_COPY, FP8_GELU, FP8_DGELU};
    const GemmPrecision formats[] = {GEMM_E4M3, GEMM_E5M2};
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
        for (int o = 0; o < 3; o++)
            for (int f = 0; f < 2; f++)
                for (int mode = 0; mode < 2; mode++) {
                    CastCase k = {SHAPES[s][0], SHAPES[s][1], ops[o], formats[f],
                                  mode ? FP8_CURRENT : FP8_DELAYED, (int)(seed % 2)};
                    check_cast(k, seed++);
                    gt_device_free_all();
                }
}

Test(kernels_fp8, scale_is_the_power_of_two_that_fits) {
    cr_assert(fp8_scale_for_amax(448.0f, GEMM_E4M3) == 1.0f);
    cr_assert(fp8_scale_for_amax(449.0f, GEMM_E4M3) == 2.0f);
    cr_assert(fp8_scale_for_amax(224.0f, GEMM_E4M3) == 0.5f);
    cr_assert(fp8_scale_for_amax(1.0f, GEMM_E4M3) == ldexpf(1.0f, -8));
    cr_assert(fp8_scale_for_amax(57344.0f, GEMM_E5M2) == 1.0f);
    cr_assert(fp8_scale_for_amax(1e-4f, GEMM_E5M2) == ldexpf(1.0f, -29));
}

// The history: a scale from the largest of the last FP8_HISTORY amaxes; an
// amax leaves it after FP8_HISTORY more steps; a step with none keeps it.
Test(kernels_fp8, scales_advance_through_the_history) {
    Fp8Meta *meta = device_meta(1.0f);
    uint8_t fmt = GEMM_E4M3, *d_fmt = gt_device_alloc(1, "format");
    CUDA_CHECK(cudaMemcpy(d_fmt, &fmt, 1, cudaMemcpyHostToDevice));
    for (int step = 0; step <= FP8_HISTORY; step++) {
        Fp8Meta m = host_meta(meta);
        m.amax = step == 0 ? 1000.0f : 10.0f;
        CUDA_CHECK(cudaMemcpy(meta, &m, sizeof m, cudaMemcpyHostToDevice));
        fp8_scales_advance(&gt_ctx, meta, d_fmt, 1);
        m = host_meta(meta);
        const float want = fp8_scale_for_amax(step < FP8_HISTORY ? 1000.0f : 10.0f, GEMM_E4M3);
        cr_assert(m.scale == want, "step %d: scale %g, expected %g", step, m.scale, want);
        cr_assert(m.amax == 0.0f, "step %d: amax not reset", step);
    }
    Fp8Meta zero;
    memset(&zero, 0, sizeof zero);
    zero.scale = 4.0f;
    CUDA_CHECK(cudaMemcpy(meta, &zero, sizeof zero, cudaMemcpyHostToDevice));
    fp8_scales_advance(&gt_ctx, meta, d_fmt, 1);
    cr_assert(host_meta(meta).scale == 4.0f, "an empty history changed the scale");
}

// ---- the layernorm that writes FP8 -------------------------------------------------
// residual_layernorm_forward_fp8 against the pair it replaces, chapter 04's
// residual + layernorm and then the copy cast: the same bits everywhere (the
// residual stream, the statistics, both FP8 outputs, the amax).
static void check_fused_layernorm(int BT, int C, int with_residual, uint64_t seed) {
    const size_t n = (size_t)BT * C;
    Rng rng;
    rng_seed(&rng, seed);
    floatX *a = gt_upload_x(gt_random_x(n, -3, 3, &rng), n);
    floatX *b = with_residual ? gt_upload_x(gt_random_x(n, -3, 3, &rng), n) : NULL;
    floatX *w = gt_upload_x(gt_random_x(C, 0.5f, 1.5f, &rng), C);
    floatX *bias = gt_upload_x(gt_random_x(C, -0.5f, 0.5f, &rng), C);
    const float scale = 1.0f / 64;  // a delayed scale: some values saturate at 448
    // The pair.
    floatX *res1 = gt_device_poisoned_x(n), *ln = gt_device_poisoned_x(n);
    float *mean1 = gt_device_poisoned(BT), *rstd1 = gt_device_poisoned(BT);
    if (b) residual_layernorm_forward_v2(&gt_ctx, res1, ln, mean1, rstd1, a, b, w, bias, 1, BT, C);
    else layernorm_forward_v2(&gt_ctx, ln, mean1, rstd1, a, w, bias, 1, BT, C);
    Fp8Meta *meta1 = device_meta(scale);
    uint8_t *rows1 = gt_device_alloc(n, "rows"), *cols1 = gt_device_alloc(n, "cols");
    Fp8Cast cast = {.op = FP8_COPY, .in = ln, .rows = BT, .cols = C, .format = GEMM_E4M3,
                    .meta = meta1, .out = rows1, .out_t = cols1};
    fp8_cast(&gt_ctx, &cast, FP8_DELAYED);
    // The fused kernel.
    floatX *res2 = gt_device_poisoned_x(n);
    float *mean2 = gt_device_poisoned(BT), *rstd2 = gt_device_poisoned(BT);
    Fp8Meta *meta2 = device_meta(scale);
    uint8_t *rows2 = gt_device_alloc(n, "rows"), *cols2 = gt_device_alloc(n, "cols");
    residual_layernorm_forward_fp8(&gt_ctx, res2, mean2, rstd2, a, b, w, bias, BT, C, meta2, rows2,
                                   cols2);
    char what[96];
    snprintf(what, sizeof what, "fused FP8 layernorm %dx%d%s", BT, C, b ? " + residual" : "");
    if (b) gt_assert_identical(what, gt_download_x(res2, n), gt_download_x(res1, n), n);
    gt_assert_identical(what, gt_download(mean2, BT), gt_download(mean1, BT), BT);
    gt_assert_identical(what, gt_download(rstd2, BT), gt_download(rstd1, BT), BT);
    cr_assert(memcmp(download_bytes(rows2, n), download_bytes(rows1, n), n) == 0, "%s: rows", what);
    cr_assert(memcmp(download_bytes(cols2, n), download_bytes(cols1, n), n) == 0, "%s: cols", what);
    const float amax1 = host_meta(meta1).amax, amax2 = host_meta(meta2).amax;
    cr_assert(amax1 == amax2, "%s: amax %g, the pair's %g", what, amax2, amax1);
}

Test(kernels_fp8, fused_layernorm_is_layernorm_then_cast) {
    const int shapes[][2] = {{64, 64}, {48, 128}, {208, 768}};
    for (int s = 0; s < 3; s++)
        for (int r = 0; r < 2; r++) {
            check_fused_layernorm(shapes[s][0], shapes[s][1], r, 10 + s * 2 + r);
            gt_device_free_all();
        }
}

// ---- the GEMMs --------------------------------------------------------------------

// A (rows, cols) bf16 matrix cast to FP8 on the device (current scaling):
// the operand, and its values as the tensor cores see them.
typedef struct {
    GemmOperand op;
    float *dequantized;  // host (rows, cols)
} Cast8;

static Cast8 cast_operand(const float *x, int rows, int cols, GemmPrecision format) {
    const size_t n = (size_t)rows * cols;
    Fp8Meta *meta = device_meta(1.0f);
    uint8_t *d_rows = gt_device_alloc(n, "rows"), *d_cols = gt_device_alloc(n, "cols");
    Fp8Cast cast = {.op = FP8_COPY, .in = gt_upload_x(x, n), .rows = rows, .cols = cols,
                    .format = format, .meta = meta, .out = d_rows, .out_t = d_cols};
    fp8_cast(&gt_ctx, &cast, FP8_CURRENT);
    const float scale = host_meta(meta).scale;
    uint8_t *codes = download_bytes(d_rows, n);
    Cast8 c = {{format, d_rows, d_cols, &meta->scale}, xmalloc(n * sizeof(float))};
    for (size_t i = 0; i < n; i++) c.dequantized[i] = fp8_decode(codes[i], format) * scale;
    free(codes);
    return c;
}

// out (M, N) = a (M, K) @ b (N, K)^T in double; and sum |a||b| per output.
static void product(double *out, double *magnitude, const float *a, const float *b, int M, int N,
                    int K, int a_t, int b_t) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < K; k++) {
                const double x = a_t ? a[(size_t)k * M + i] : a[(size_t)i * K + k];
                const double y = b_t ? b[(size_t)k * N + j] : b[(size_t)j * K + k];
                s += x * y, m += fabs(x * y);
            }
            out[(size_t)i * N + j] = s;
            if (magnitude) magnitude[(size_t)i * N + j] = m;
        }
}

// got against the exact product: within bound * sum|a b| + bf16's rounding.
static void assert_within_format_bound(const char *what, const float *got, const double *exact,
                                       const double *magnitude, size_t n, double bound) {
    for (size_t i = 0; i < n; i++) {
        const double allowed = bound * magnitude[i] + ldexp(fabs(exact[i]), -8) + 1e-12;
        cr_assert(fabs(got[i] - exact[i]) <= allowed, "%s [%zu]: %g against %g (allowed %g)", what,
                  i, got[i], exact[i], allowed);
    }
}

static float *to_float(const double *x, size_t n) {
    float *y = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
    return y;
}

#define E4M3_ERR 0.0625  // 2^-4
#define E5M2_ERR 0.125   // 2^-3
// The tensor cores' sums of the dequantized values, against double: fp32
// order of sums, and the bf16 output's rounding (2^-9 of the largest).
#define FP8_GEMM_TOL 1e-2

static void check_gemms(void);

// Twice: the heuristic's kernels, and chapter 11's autotuned ones.
Test(kernels_fp8, gemms_match_cpu) {
    check_gemms();
    gt_ctx.gemm_autotune = 1;
    check_gemms();
}

static void check_gemms(void) {
    const int BT = 96, C = 64, OC = 3 * 64;
    Rng rng;
    rng_seed(&rng, 42);
    // Magnitudes in FP8's normal range after scaling: [0.25, 2] with a sign.
    float *x = gt_random_x((size_t)BT * C, 0.25f, 2.0f, &rng);
    float *w = gt_random_x((size_t)OC * C, 0.25f, 2.0f, &rng);
    float *g = gt_random_x((size_t)BT * OC, 0.25e-4f, 2e-4f, &rng);
    for (size_t i = 0; i < (size_t)BT * C; i += 3) x[i] = -x[i];
    for (size_t i = 0; i < (size_t)OC * C; i += 2) w[i] = -w[i];
    for (size_t i = 0; i < (size_t)BT * OC; i += 5) g[i] = -g[i];
    Cast8 x8 = cast_operand(x, BT, C, GEMM_E4M3), w8 = cast_operand(w, OC, C, GEMM_E4M3);
    Cast8 g8 = cast_operand(g, BT, OC, GEMM_E5M2);
    GemmOperands ops = {w8.op, x8.op, g8.op, 0};
    float *bias = gt_random_x(OC, -1, 1, &rng);

    // Forward: out (BT, OC) = x w^T + bias.
    floatX *d_out = gt_device_poisoned_x((size_t)BT * OC);
    matmul_forward_v2(&gt_ctx, d_out, NULL, NULL, NULL, gt_upload_x(bias, OC), 1, BT, C, OC, OC,
                      &ops);
    float *out = gt_download_x(d_out, (size_t)BT * OC);
    double *ref = xmalloc((size_t)BT * OC * sizeof(double)), *mag = xmalloc(sizeof(double) * BT * OC);
    product(ref, NULL, x8.dequantized, w8.dequantized, BT, OC, C, 0, 0);
    for (int i = 0; i < BT; i++)
        for (int j = 0; j < OC; j++) ref[(size_t)i * OC + j] += bias[j];
    gt_compare("fp8 forward vs dequantized operands", out, to_float(ref, (size_t)BT * OC),
               (size_t)BT * OC, FP8_GEMM_TOL);
    product(ref, mag, x, w, BT, OC, C, 0, 0);
    for (int i = 0; i < BT; i++)
        for (int j = 0; j < OC; j++) ref[(size_t)i * OC + j] += bias[j];
    assert_within_format_bound("fp8 forward vs exact", out, ref, mag, (size_t)BT * OC,
                               2 * E4M3_ERR + E4M3_ERR * E4M3_ERR);

    // Backward: dinp (BT, C) = g w, overwritten; dweight (OC, C) += g^T x.
    floatX *d_dinp = gt_device_poisoned_x((size_t)BT * C);
    float *dw0 = gt_random_x((size_t)OC * C, -1e-3f, 1e-3f, &rng);
    floatX *d_dw = gt_upload_x(dw0, (size_t)OC * C);
    matmul_backward_v2(&gt_ctx, d_dinp, d_dw, NULL, NULL, NULL, NULL, NULL, NULL, 1, BT, C, OC,
                       OC, &ops);
    float *dinp = gt_download_x(d_dinp, (size_t)BT * C), *dw = gt_download_x(d_dw, (size_t)OC * C);
    double *rdx = xmalloc(sizeof(double) * BT * C), *mdx = xmalloc(sizeof(double) * BT * C);
    // dinp[i][c] = sum_o g[i][o] w[o][c]: a = g (BT, OC) rows, b = w read as (C, OC)^T
    product(rdx, NULL, g8.dequantized, w8.dequantized, BT, C, OC, 0, 1);
    gt_compare("fp8 dinp vs dequantized operands", dinp, to_float(rdx, (size_t)BT * C),
               (size_t)BT * C, FP8_GEMM_TOL);
    product(rdx, mdx, g, w, BT, C, OC, 0, 1);
    const double mixed = E4M3_ERR + E5M2_ERR + E4M3_ERR * E5M2_ERR;
    assert_within_format_bound("fp8 dinp vs exact", dinp, rdx, mdx, (size_t)BT * C, mixed);
    double *rdw = xmalloc(sizeof(double) * OC * C), *mdw = xmalloc(sizeof(double) * OC * C);
    // dweight[o][c] = sum_i g[i][o] x[i][c]: both read transposed
    product(rdw, NULL, g8.dequantized, x8.dequantized, OC, C, BT, 1, 1);
    for (size_t i = 0; i < (size_t)OC * C; i++) rdw[i] += dw0[i];
    gt_compare("fp8 dweight vs dequantized operands", dw, to_float(rdw, (size_t)OC * C),
               (size_t)OC * C, FP8_GEMM_TOL);
    product(rdw, mdw, g, x, OC, C, BT, 1, 1);
    for (size_t i = 0; i < (size_t)OC * C; i++) rdw[i] += dw0[i];
    assert_within_format_bound("fp8 dweight vs exact", dw, rdw, mdw, (size_t)OC * C, mixed);
}


// Fast accumulation (gemm_operands.h), at the model's longest width: the
// tensor cores keep each product's partial sums at their own precision, some
// 14 bits of mantissa (what DeepSeek-V3's report measured on Hopper), not
// fp32's 24. Each add may then drop up to 2^-14 of the running sum, and the
// drops are rounding errors of either sign: over K = 3072 adds they grow
// like sqrt(K) 2^-14 = 0.34% of the sum of |a b|, in the worst direction.
// The test allows 2^-8 (0.39%) and prints what it saw.
#define FAST_ACCUM_TOL 0.00390625  // 2^-8
#define WIDE 3072

static double worst_fraction(const float *got, const double *exact, const double *magnitude,
                             size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double f = (fabs(got[i] - exact[i]) - ldexp(fabs(exact[i]), -8)) / magnitude[i];
        if (f > worst) worst = f;
    }
    return worst;
}

Test(kernels_fp8, fast_accumulation_within_its_bound) {
    const int BT = 64, N = 64;
    Rng rng;
    rng_seed(&rng, 7);
    float *x = gt_random_x((size_t)BT * WIDE, 0.25f, 2.0f, &rng);
    float *w = gt_random_x((size_t)N * WIDE, 0.25f, 2.0f, &rng);
    for (size_t i = 0; i < (size_t)BT * WIDE; i += 3) x[i] = -x[i];
    for (size_t i = 0; i < (size_t)N * WIDE; i += 2) w[i] = -w[i];
    Cast8 x8 = cast_operand(x, BT, WIDE, GEMM_E4M3), w8 = cast_operand(w, N, WIDE, GEMM_E4M3);
    double *ref = xmalloc(sizeof(double) * BT * N), *mag = xmalloc(sizeof(double) * BT * N);
    product(ref, mag, x8.dequantized, w8.dequantized, BT, N, WIDE, 0, 0);
    // Forward, K = WIDE: out (BT, N) = x w^T.
    GemmOperands ops = {w8.op, x8.op, {GEMM_FLOATX, NULL, NULL, NULL}, 1};
    floatX *d_out = gt_device_poisoned_x((size_t)BT * N);
    matmul_forward_v2(&gt_ctx, d_out, NULL, NULL, NULL, NULL, 1, BT, WIDE, N, N, &ops);
    float *out = gt_download_x(d_out, (size_t)BT * N);
    const double fwd = worst_fraction(out, ref, mag, (size_t)BT * N);
    assert_within_format_bound("fast forward vs dequantized operands", out, ref, mag,
                               (size_t)BT * N, FAST_ACCUM_TOL);
    // dinp, K = WIDE: dinp (BT, N) = g (BT, WIDE) @ W, W (WIDE, N) as a layer
    // of C = N inputs and OC = WIDE outputs stores it (dweight's product runs
    // too, on an input of its own, unchecked here).
    Cast8 g8 = cast_operand(x, BT, WIDE, GEMM_E5M2);
    float *w_layer = xmalloc(sizeof(float) * N * WIDE);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < WIDE; k++) w_layer[(size_t)k * N + n] = w[(size_t)n * WIDE + k];
    Cast8 w8l = cast_operand(w_layer, WIDE, N, GEMM_E4M3);
    Cast8 in8 = cast_operand(x, BT, N, GEMM_E4M3);  // x's first BT*N values, any will do
    product(ref, mag, g8.dequantized, w8l.dequantized, BT, N, WIDE, 0, 1);
    GemmOperands back = {w8l.op, in8.op, g8.op, 1};
    floatX *d_dinp = gt_device_poisoned_x((size_t)BT * N);
    floatX *d_dw = gt_upload_x(w_layer, (size_t)WIDE * N);
    matmul_backward_v2(&gt_ctx, d_dinp, d_dw, NULL, NULL, NULL, NULL, NULL, NULL, 1, BT, N, WIDE,
                       WIDE, &back);
    float *dinp = gt_download_x(d_dinp, (size_t)BT * N);
    const double bwd = worst_fraction(dinp, ref, mag, (size_t)BT * N);
    assert_within_format_bound("fast dinp vs dequantized operands", dinp, ref, mag,
                               (size_t)BT * N, FAST_ACCUM_TOL);
    cr_log_info("fast accumulation at K = %d: worst error %.2e (forward), %.2e (dinp) of sum|ab|",
                WIDE, fwd, bwd);
    free(x), free(w), free(w_layer), free(ref), free(mag), free(out), free(dinp);
}

#endif
