// test_kernels_adamw8bit.c: chapter 10's 8-bit AdamW, adamw8bit_update_v1,
// against its CPU reference, adamw8bit_update (common/optim/quantize8.h), over
// several steps: tensors of whole blocks, with a short last block, of one
// value; with and without fp32 master weights; with and without weight
// decay; without clipping and with a clip factor below, at and above 1;
// aligned and unaligned. And the maps the kernel builds against the host's.
#include "adamw8bit.h"
#include "util/compare.h"
#include "gpu_test.h"
#include "optim/optimizer.h"
#include "optim/quantize8.h"
#include "util/tolerances.h"

// How far the GPU's state may be from the CPU's: nowhere. The kernel does
// the reference's float operations one for one, each correctly rounded on
// both sides: adamw_update's arithmetic with every rounding written out
// (adamw8bit.cu, adamw_value), the maps, the quantization and the
// dequantization by the very functions the CPU runs (quantize8.h), a block's
// maximum being exact in any order. So the bytes, the scales and the
// weights are the CPU's, bit for bit. (On the CPU side this needs a
// compiler that does not fuse a * b + c into one rounding: gcc compiling
// ISO C, -std=c11, does not; clang does by default where the machine has
// fused multiply-adds, an ARM host for one.)
// Were the kernel's m or v to differ from the CPU's in the last bit (as
// adamw_update_v1's do, whose multiply-adds nvcc fuses), a value lying
// within that bit of a decision boundary, the midpoint between two map
// values, would land on the neighbouring index, and a block's scale would
// be an ulp off. The checks below count such bytes, require each to be one
// index away, and allow MAX_INDEX_MISMATCHES of them (and scales
// MAX_ABSMAX_ULPS ulps apart): none.
#define MAX_INDEX_MISMATCHES 0
#define MAX_ABSMAX_ULPS 0

TestSuite(kernels_adamw8bit, .init = gpu_test_init, .fini = gpu_test_fini);

static uint8_t *upload_bytes(const uint8_t *host, size_t n) {
    uint8_t *d = gt_device_alloc(n, "test bytes");
    CUDA_CHECK(cudaMemcpy(d, host, n, cudaMemcpyHostToDevice));
    return d;
}

static uint8_t *download_bytes(const uint8_t *d, size_t n) {
    CUDA_CHECK(cudaStreamSynchronize(gt_ctx.stream));
    uint8_t *host = xmalloc(n);
    CUDA_CHECK(cudaMemcpy(host, d, n, cudaMemcpyDeviceToHost));
    return host;
}

// The kernel's maps (built in shared memory by quantize8.h's q8_map_value,
// in double on the device) are the host's, bit for bit.
Test(kernels_adamw8bit, maps_are_the_hosts) {
    float *d_maps = gt_device_poisoned(2 * Q8_MAP_SIZE);
    quantize8_maps_v1(&gt_ctx, d_maps);
    float *got = gt_download(d_maps, 2 * Q8_MAP_SIZE), want[2 * Q8_MAP_SIZE];
    q8_map(Q8_SIGNED, want);
    q8_map(Q8_UNSIGNED, want + Q8_MAP_SIZE);
    gt_assert_identical("the signed map", got, want, Q8_MAP_SIZE);
    gt_assert_identical("the unsigned map", got + Q8_MAP_SIZE, want + Q8_MAP_SIZE, Q8_MAP_SIZE);
    free(got);
}

// The indices of the GPU against the CPU's: each mismatch one index away,
// and at most MAX_INDEX_MISMATCHES of them.
static void assert_indices(const char *what, const uint8_t *got, const uint8_t *want, size_t n) {
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] == want[i]) continue;
        if (mismatches++ == 0) first = i;
        cr_assert(abs((int)got[i] - (int)want[i]) == 1, "%s [%zu]: gpu index %d, cpu %d", what,
                  i, got[i], want[i]);
    }
    if (getenv("GPU_TEST_VERBOSE"))
        fprintf(stderr, "  %-40s %zu of %zu indices differ\n", what, mismatches, n);
    cr_assert(mismatches <= MAX_INDEX_MISMATCHES,
              "%s: %zu of %zu indices differ from the cpu's (the first at [%zu]: gpu %d, cpu %d)",
              what, mismatches, n, first, got[first], want[first]);
}

// Distance in ulps between two finite non-negative floats (scales are).
static uint32_t ulps_apart(float a, float b) {
    uint32_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x > y ? x - y : y - x;
}

static void assert_scales(const char *what, const float *got, const float *want, size_t n) {
    for (size_t b = 0; b < n; b++)
        cr_assert(ulps_apart(got[b], want[b]) <= MAX_ABSMAX_ULPS,
                  "%s of block %zu: gpu %.9g, cpu %.9g", what, b, (double)got[b],
                  (double)want[b]);
}

typedef enum { CLIP_NONE, CLIP_BELOW_ONE, CLIP_ONE, CLIP_ABOVE_ONE, CLIP_NAN } Clip;
static const float CLIP_FACTORS[] = {0.0f /* unused: NULL */, 0.37f, 1.0f, 2.5f, NAN};
static const char *const CLIP_NAMES[] = {"no clip factor", "clip factor 0.37", "clip factor 1",
                                         "clip factor 2.5", "clip factor NaN"};

typedef struct {
    size_t n;
    int master;  // 1: fp32 master weights
    int decay;
    Clip clip;
    size_t offset;  // the tensor starts this many values into its buffers (unaligned when odd)
} Case;

#define STEPS 4

// STEPS steps of fresh gradients on the GPU and on the CPU, from a random
// quantized state (block 1, where there is one, starts at zero and gets
// zero gradients at step 1: a block of zeros, absmax 0). The gradients are
// uniform, their range changing from step to step. Then: the indices, the
// scales and the weights of record identical; params the master weights
// rounded; the gradients untouched; and, with fp32 weights of record and
// enough values, the weights' change within TOL_ADAMW8BIT_* of fp32
// AdamW's (tolerances.h).
static void check_case(Case c, uint64_t seed) {
    const size_t n = c.n, blocks = q8_blocks(n), room = c.n + c.offset;
    Rng rng;
    rng_seed(&rng, seed);
    char what[160];
    snprintf(what, sizeof what, "n %zu, %s, decay %d, %s, offset %zu", n,
             c.master ? "master weights" : "no master weights", c.decay, CLIP_NAMES[c.clip],
             c.offset);
    // The state on the host: the weights (floatX values), m and v quantized.
    float *params = gt_random_x(n, -1, 1, &rng), *m = xmalloc(n * sizeof(float));
    float *v = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        const int zero = i / Q8_BLOCK == 1;
        m[i] = zero ? 0.0f : 0.01f * rng_normal(&rng);
        v[i] = zero ? 0.0f : m[i] * m[i] + 1e-6f * rng_uniform(&rng);
    }
    uint8_t *m_q = xcalloc(room, 1), *v_q = xcalloc(room, 1);
    float *m_absmax = xmalloc(blocks * sizeof(float)), *v_absmax = xmalloc(blocks * sizeof(float));
    q8_quantize(Q8_SIGNED, m, n, m_q + c.offset, m_absmax);
    q8_quantize(Q8_UNSIGNED, v, n, v_q + c.offset, v_absmax);
    // fp32 AdamW from the same (dequantized) moments, for the direction.
    float *p32 = gt_copy(params, n), *start = gt_copy(params, n);
    q8_dequantize(Q8_SIGNED, m_q + c.offset, m_absmax, n, m);
    q8_dequantize(Q8_UNSIGNED, v_q + c.offset, v_absmax, n, v);
    // The same on the device, each buffer `offset` values in.
    float *room_params = xcalloc(room, sizeof(float));
    memcpy(room_params + c.offset, params, n * sizeof(float));
    floatX *d_params = gt_upload_x(room_params, room) + c.offset;
    float *d_master = c.master ? gt_upload(room_params, room) + c.offset : NULL;
    uint8_t *d_m_q = upload_bytes(m_q, room) + c.offset;
    uint8_t *d_v_q = upload_bytes(v_q, room) + c.offset;
    float *d_m_absmax = gt_upload(m_absmax, blocks), *d_v_absmax = gt_upload(v_absmax, blocks);
    float *d_clip = NULL;
    if (c.clip != CLIP_NONE) d_clip = gt_upload(&CLIP_FACTORS[c.clip], 1);
    const AdamWConfig cfg = adamw_default_config();
    for (int t = 1; t <= STEPS; t++) {
        const float range = t % 2 ? 1e-2f : 1e-3f, lr = 6e-4f * (float)t;
        float *grads = gt_random_x(room, -range, range, &rng);
        if (t == 1)
            for (size_t i = 0; i < n; i++)
                if (i / Q8_BLOCK == 1) grads[c.offset + i] = 0.0f;
        floatX *d_grads = gt_upload_x(grads, room) + c.offset;
        // The CPU: the gradient as chapter 03's clipping leaves it.
        float *used = gt_copy(grads + c.offset, n);
        const float factor = CLIP_FACTORS[c.clip];
        if (c.clip != CLIP_NONE && factor < 1.0f)
            for (size_t i = 0; i < n; i++) used[i] = round_to_floatx(used[i] * factor);
        adamw8bit_update(params, used, m_q + c.offset, v_q + c.offset, m_absmax, v_absmax, n, lr,
                         &cfg, c.decay, t);
        adamw_update(p32, used, m, v, n, lr, &cfg, c.decay, t);
        // Without master weights the weights live in floatX, rounded at every step.
        if (!c.master)
            for (size_t i = 0; i < n; i++) {
                params[i] = round_to_floatx(params[i]);
                p32[i] = round_to_floatx(p32[i]);
            }
        adamw8bit_update_v1(&gt_ctx, d_params, d_master, d_grads, d_m_q, d_v_q, d_m_absmax,
                            d_v_absmax, n, lr, &cfg, c.decay, t, d_clip);
        float *left = gt_download_x(d_grads - c.offset, room);
        gt_assert_identical("the gradients, left as they were", left, grads, room);
        free(left), free(grads), free(used);
    }
    char name[256];
    uint8_t *got_m = download_bytes(d_m_q - c.offset, room);
    uint8_t *got_v = download_bytes(d_v_q - c.offset, room);
    snprintf(name, sizeof name, "%s: m", what);
    assert_indices(name, got_m, m_q, room);
    snprintf(name, sizeof name, "%s: v", what);
    assert_indices(name, got_v, v_q, room);
    float *got_m_absmax = gt_download(d_m_absmax, blocks);
    float *got_v_absmax = gt_download(d_v_absmax, blocks);
    snprintf(name, sizeof name, "%s: m's absmax", what);
    assert_scales(name, got_m_absmax, m_absmax, blocks);
    snprintf(name, sizeof name, "%s: v's absmax", what);
    assert_scales(name, got_v_absmax, v_absmax, blocks);
    float *record = c.master ? gt_download(d_master, n) : gt_download_x(d_params, n);
    snprintf(name, sizeof name, "%s: the weights of record", what);
    gt_assert_identical(name, record, params, n);
    if (c.master) {
        snprintf(name, sizeof name, "%s: params, the master weights rounded", what);
        gt_assert_identical(name, gt_download_x(d_params, n), gt_rounded_x(record, n), n);
    }
    // Against fp32 AdamW, by direction and size, where that means something:
    // weights kept in fp32 (bf16 weights round most of 4 steps of 6e-4
    // away) and enough values for the errors to average out.
    if ((c.master || sizeof(floatX) == sizeof(float)) && n >= 1024) {
        for (size_t i = 0; i < n; i++) record[i] -= start[i], p32[i] -= start[i];
        const double cosine = cosine_similarity(record, p32, n);
        const double ratio = norm_ratio(record, p32, n);
        if (getenv("GPU_TEST_VERBOSE"))
            fprintf(stderr, "  %s: against fp32 AdamW, 1 - cosine %.3g, norm ratio - 1 %.3g\n",
                    what, 1 - cosine, ratio - 1);
        cr_assert(cosine >= TOL_ADAMW8BIT_COSINE,
                  "%s: the weights' change against fp32 AdamW's: cosine %.6f", what, cosine);
        cr_assert(fabs(ratio - 1) <= TOL_ADAMW8BIT_NORM_RATIO,
                  "%s: the weights' change against fp32 AdamW's: norm ratio %.6f", what, ratio);
    }
    free(params), free(m), free(v), free(m_q), free(v_q), free(m_absmax), free(v_absmax);
    free(p32), free(start), free(room_params), free(got_m), free(got_v), free(got_m_absmax);
    free(got_v_absmax), free(record);
}

// Every combination of master weights and decay, at one size.
static void check_size(size_t n, Clip clip, uint64_t seed) {
    for (int master = 0; master <= 1; master++)
        for (int decay = 0; decay <= 1; decay++)
            check_case((Case){n, master, decay, clip, 0}, seed + 4 * master + 2 * decay);
}

Test(kernels_adamw8bit, whole_blocks) { check_size(37 * Q8_BLOCK, CLIP_NONE, 100); }
Test(kernels_adamw8bit, a_short_last_block) { check_size(20 * Q8_BLOCK + 77, CLIP_NONE, 200); }
Test(kernels_adamw8bit, one_value) { check_size(1, CLIP_NONE, 300); }
Test(kernels_adamw8bit, one_value_past_16_blocks) { check_size(4097, CLIP_NONE, 400); }

Test(kernels_adamw8bit, clip_factor_below_1_scales_the_gradients) {
    check_size(20 * Q8_BLOCK + 77, CLIP_BELOW_ONE, 500);
}

// At and above 1, and NaN: the gradients as they are, as without a factor.
Test(kernels_adamw8bit, clip_factor_of_1_or_more_leaves_the_gradients) {
    check_case((Case){20 * Q8_BLOCK + 77, 1, 1, CLIP_ONE, 0}, 600);
    check_case((Case){20 * Q8_BLOCK + 77, 0, 1, CLIP_ABOVE_ONE, 0}, 601);
    check_case((Case){20 * Q8_BLOCK + 77, 1, 0, CLIP_NAN, 0}, 602);
}

// A tensor that starts 1 or 3 values into its buffers: no address is
// aligned, every value takes the one-at-a-time path.
Test(kernels_adamw8bit, unaligned_tensors) {
    check_case((Case){4097, 1, 1, CLIP_BELOW_ONE, 1}, 700);
    check_case((Case){4097, 0, 0, CLIP_NONE, 3}, 701);
}

// More blocks than the launch has warps (at most 8 thread blocks of 8
// warps per SM): each warp takes several blocks, one after another.
Test(kernels_adamw8bit, more_blocks_than_warps) {
    const size_t warps = 64 * (size_t)gt_ctx.sm_count;
    check_case((Case){(2 * warps + 3) * Q8_BLOCK + 5, 1, 1, CLIP_BELOW_ONE, 0}, 800);
}

// Chapter 10's one launch over a table of tensors (adamw8bit_fused_v2)
// against adamw8bit_update_v1 once per tensor: the same block function, so
// the same bytes, scales and weights, bit for bit. Three tensors packed in
// the state as the model packs them (each starting on a block of 256), one
// with a short last block, one without decay; the step's values from
// adamw_begin_step_v2, with a clip factor below 1 at step 2.
Test(kernels_adamw8bit, fused_is_per_tensor) {
    enum { TENSORS = 3, STEPS_F = 3 };
    const size_t sizes[TENSORS] = {5 * Q8_BLOCK, 3 * Q8_BLOCK + 77, 2 * Q8_BLOCK};
    const int decay[TENSORS] = {1, 0, 1};
    size_t n = 0, state = 0, offset[TENSORS], state_offset[TENSORS];
    for (int k = 0; k < TENSORS; k++) {
        offset[k] = n, state_offset[k] = state;
        n += sizes[k], state += q8_blocks(sizes[k]) * Q8_BLOCK;
    }
    const size_t blocks = state / Q8_BLOCK;
    AdamWTensors table;
    adamw_table_build(&table, sizes, decay, TENSORS, Q8_BLOCK);
    for (int k = 0; k < TENSORS; k++) table.state_offset[k] = state_offset[k];
    Rng rng;
    rng_seed(&rng, 77);
    float *params = gt_random(n, -1, 1, &rng);
    floatX *fp = gt_upload_x(params, n), *tp = gt_upload_x(params, n);
    float *fmaster = gt_upload(params, n), *tmaster = gt_upload(params, n);
    uint8_t *zeros = xcalloc(state, 1);
    uint8_t *fm = upload_bytes(zeros, state), *fv = upload_bytes(zeros, state);
    uint8_t *tm = upload_bytes(zeros, state), *tv = upload_bytes(zeros, state);
    float *zero_scales = xcalloc(blocks, sizeof(float));
    float *fma = gt_upload(zero_scales, blocks), *fva = gt_upload(zero_scales, blocks);
    float *tma = gt_upload(zero_scales, blocks), *tva = gt_upload(zero_scales, blocks);
    AdamWStep *step = gt_device_alloc(sizeof(AdamWStep), "the step's values");
    float *norm = gt_device_alloc(sizeof(float), "norm");
    const AdamWConfig cfg = adamw_default_config();
    for (int t = 1; t <= STEPS_F; t++) {
        const float lr = 1e-3f, host_norm = t == 2 ? 4.0f : 0.5f;  // clips at step 2
        CUDA_CHECK(cudaMemcpy(norm, &host_norm, sizeof host_norm, cudaMemcpyHostToDevice));
        float *grads = gt_random(n, -0.01f, 0.01f, &rng);
        floatX *d_grads = gt_upload_x(grads, n);
        adamw_begin_step_v2(&gt_ctx, step, norm, 1.0f, t, lr, &cfg);
        adamw8bit_fused_v2(&gt_ctx, &table, fp, fmaster, d_grads, fm, fv, fma, fva, step, &cfg, 0);
        for (int k = 0; k < TENSORS; k++) {
            const size_t o = offset[k], s = state_offset[k];
            adamw8bit_update_v1(&gt_ctx, tp + o, tmaster + o, d_grads + o, tm + s, tv + s,
                                tma + s / Q8_BLOCK, tva + s / Q8_BLOCK, sizes[k], lr, &cfg,
                                decay[k], t, &step->clip_factor);
        }
        free(grads);
    }
    gt_assert_identical("fused vs per tensor: master weights", gt_download(fmaster, n),
                        gt_download(tmaster, n), n);
    gt_assert_identical("fused vs per tensor: params", gt_download_x(fp, n),
                        gt_download_x(tp, n), n);
    uint8_t *a = download_bytes(fm, state), *b = download_bytes(tm, state);
    cr_assert(memcmp(a, b, state) == 0, "fused vs per tensor: m's bytes differ");
    free(a), free(b);
    a = download_bytes(fv, state), b = download_bytes(tv, state);
    cr_assert(memcmp(a, b, state) == 0, "fused vs per tensor: v's bytes differ");
    free(a), free(b);
    gt_assert_identical("fused vs per tensor: m's scales", gt_download(fma, blocks),
                        gt_download(tma, blocks), blocks);
    gt_assert_identical("fused vs per tensor: v's scales", gt_download(fva, blocks),
                        gt_download(tva, blocks), blocks);
    free(params), free(zeros), free(zero_scales);
}
