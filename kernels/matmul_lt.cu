// matmul_lt.cu: see matmul_lt.h.
#include <cublasLt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "matmul_lt.h"
#include "reduce.cuh"
#include "util/util.h"

#define WORKSPACE_BYTES (32u << 20)
// Plans kept at once. A model runs a few dozen shapes; a full cache evicts
// the plan used longest ago (a test's hundreds of shapes, or a caller that
// varies its batch), so no run ever ends for having seen many shapes.
#define MAX_PLANS 128
// Chapter 11: how many of the heuristic's kernels a shape's first call
// considers, and how often each one admitted is timed.
#define AUTOTUNE_CANDIDATES 8
#define AUTOTUNE_TIMED_RUNS 9
// Whether each timed run starts from a flushed L2 cache (see autotune).
#ifndef AUTOTUNE_FLUSH_L2
#define AUTOTUNE_FLUSH_L2 1
#endif
// Widths padded to a multiple of 8 (see pad_weight): the distinct (OC, C)
// seen in a run. GPT-2 has one, the lm_head's.
#define MAX_PADDED_SHAPES 8

// Everything that selects a plan. Pointers are not part of it, only their
// alignments: the bias and aux pointers are set on the descriptor per call.
typedef struct {
    int m, n, k, lda, ldb, ldc;
    int trans_a, trans_b;
    int epilogue;         // cublasLtEpilogue_t
    int aux_ld;           // GELU's saved input, its leading dimension (0: none)
    int align_a, align_b, align_c;  // bytes, a power of two up to 256
    int type_a, type_b;   // cudaDataType of A and B: floatX's, or FP8 (chapter 13)
    int fast_accum;       // FP8 only: no promotion of the tensor cores' partial sums
    cublasComputeType_t compute;
    int autotune;         // ctx->gemm_autotune when the plan was made
} PlanKey;

typedef struct {
    PlanKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;  // the one every call runs
    // The heuristic's first choice, then its other candidates whose
    // attributes say they add in the same order (adds_like_first), to be
    // checked and timed by the first call when key.autotune is set.
    cublasLtMatmulAlgo_t candidates[AUTOTUNE_CANDIDATES];
    int num_candidates;
    int tuned;
    unsigned long long last_use;  // lt->uses when last called: the eviction's order
} Plan;

// A zero-padded copy of one weight shape, and room for its gradient. Made
// once per shape and kept until matmul_lt_free: a captured CUDA graph
// holds these pointers, so they may never move.
typedef struct {
    int OC, C;
    floatX *weight, *dweight;  // (OCp, C) each
} PaddedWeight;

struct MatmulLt {
    cublasLtHandle_t handle;
    void *workspace;
    PaddedWeight padded[MAX_PADDED_SHAPES];
    int num_padded;
    Plan plans[MAX_PLANS];
    int num_plans;
    unsigned long long uses;
    MatmulLtStats stats;
};

// The largest power of two (up to 256) that divides the address: what
// cuBLASLt may assume about the pointer (its default assumption is 256).
static int alignment_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int align = 1;
    while (align < 256 && a % (uintptr_t)(2 * align) == 0) align *= 2;
    return align;
}

static void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                     const void *value, size_t size) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, value, size));
}

template <typename V>
static V algo_config(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    V value = 0;
    size_t written = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &value, sizeof value, &written));
    return value;
}

static uint64_t numerical_flags(const cublasLtMatmulAlgo_t *algo) {
    uint64_t flags = 0;
    size_t written = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoCapGetAttribute(algo, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS,
                                                   &flags, sizeof flags, &written));
    return flags;
}

// ANCHOR: adds_in_order
// What an algorithm's attributes say about the order of its sums. One that
// neither splits K nor reduces partial results afterwards adds each
// output's products in one chain, k ascending, 16 at a time on the tensor
// cores, whatever its tile's M and N; with the same kind of instruction and
// accumulator as the first (its numerical flags), it should compute the
// first's bits. "Should": cuBLASLt does not promise it, and a kernel may
// order its work in ways no attribute reports, so autotune also checks the
// bits on the first call's operands before it admits a candidate.
static int adds_in_order(const cublasLtMatmulAlgo_t *algo) {
    return algo_config<int>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) <= 1 &&
           algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) ==
               CUBLASLT_REDUCTION_SCHEME_NONE;
}

static int adds_like_first(const cublasLtMatmulAlgo_t *algo, const cublasLtMatmulAlgo_t *first) {
    return adds_in_order(algo) && numerical_flags(algo) == numerical_flags(first);
}
// ANCHOR_END: adds_in_order

static void destroy_plan(Plan *p) {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->a));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->b));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->c));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->desc));
}

static void make_plan(MatmulLt *lt, Plan *plan, const PlanKey *k) {
    memset(plan, 0, sizeof *plan);
    plan->key = *k;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, k->compute, CUDA_R_32F));
    cublasOperation_t ta = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtEpilogue_t epilogue = (cublasLtEpilogue_t)k->epilogue;
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    if (k->fast_accum) {
        const int8_t on = 1;
        set_desc(plan->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof on);
    }
    if (k->aux_ld) {
        int64_t ld = k->aux_ld;
        set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    }
    // Column-major layouts of the stored matrices (rows, cols, ld), before op().
    const int a_rows = k->trans_a ? k->k : k->m, a_cols = k->trans_a ? k->m : k->k;
    const int b_rows = k->trans_b ? k->n : k->k, b_cols = k->trans_b ? k->k : k->n;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, (cudaDataType)k->type_a, a_rows, a_cols,
                                            k->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, (cudaDataType)k->type_b, b_rows, b_cols,
                                            k->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, FLOATX_CUDA_TYPE, k->m, k->n, k->ldc));

    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t workspace = WORKSPACE_BYTES;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    const uint32_t align[4] = {(uint32_t)k->align_a, (uint32_t)k->align_b, (uint32_t)k->align_c,
                               (uint32_t)k->align_c};
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i],
                                                          sizeof align[i]));
    cublasLtMatmulHeuristicResult_t results[AUTOTUNE_CANDIDATES];
    int found = 0;
    const int wanted = k->autotune ? AUTOTUNE_CANDIDATES : 1;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt->handle, plan->desc, plan->a, plan->b, plan->c,
                                                plan->c, pref, wanted, results, &found));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (found == 0)
        die("matmul_v2: cuBLASLt has no algorithm for m=%d n=%d k=%d (ld %d %d %d, epilogue %d, "
            "alignments %d %d %d)",
            k->m, k->n, k->k, k->lda, k->ldb, k->ldc, k->epilogue, k->align_a, k->align_b,
            k->align_c);
    plan->algo = results[0].algo;
    if (!adds_in_order(&results[0].algo)) return;  // nothing to pick that keeps its bits
    for (int i = 0; i < found; i++)
        if (adds_like_first(&results[i].algo, &results[0].algo))
            plan->candidates[plan->num_candidates++] = results[i].algo;
}

// A key for D (m x n) = op(A) (m x k) op(B) (k x n), column-major, with no
// epilogue yet; memset so that memcmp sees no stray padding bytes.
static PlanKey gemm_key(int m, int n, int k, int lda, int ldb, int ldc, int trans_a,
                        int trans_b) {
    PlanKey key;
    memset(&key, 0, sizeof key);
    key.m = m, key.n = n, key.k = k;
    key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.trans_a = trans_a, key.trans_b = trans_b;
    key.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    key.type_a = key.type_b = FLOATX_CUDA_TYPE;
    return key;
}

// The slot for a new plan: a free one, or the one used longest ago. Its
// descriptors can go at once: a queued or captured matmul took what it
// needed from them when it was launched.
static Plan *free_plan_slot(MatmulLt *lt) {
    if (lt->num_plans < MAX_PLANS) return &lt->plans[lt->num_plans++];
    Plan *oldest = &lt->plans[0];
    for (int i = 1; i < MAX_PLANS; i++)
        if (lt->plans[i].last_use < oldest->last_use) oldest = &lt->plans[i];
    destroy_plan(oldest);
    lt->stats.evictions++;
    return oldest;
}

// The cached plan for this key, made on first use.
static Plan *plan_for(MatmulLt *lt, const PlanKey *k) {
    if (!lt->handle) {
        CUBLAS_CHECK(cublasLtCreate(&lt->handle));
        lt->workspace = gpu_malloc(WORKSPACE_BYTES, "the cuBLASLt workspace");
    }
    Plan *plan = NULL;
    for (int i = 0; i < lt->num_plans && !plan; i++)
        if (memcmp(&lt->plans[i].key, k, sizeof *k) == 0) plan = &lt->plans[i];
    if (!plan) {
        plan = free_plan_slot(lt);
        make_plan(lt, plan, k);
        lt->stats.plans_made++;
    }
    plan->last_use = ++lt->uses;
    return plan;
}

// ---- chapter 11: the kernel picked by the clock -------------------------------------
// ANCHOR: autotune
// cuBLASLt's heuristic ranks its kernels for a shape from a model of the GPU,
// without running them. Its first choice is good, not always the fastest: on
// the H100 another of its first eight is up to 5% faster for some of GPT-2's
// GEMMs (the kernel lab's autotuned rows). So the first call of a shape tries
// the candidates whose attributes promise the first's order of sums
// (adds_like_first), on the call's own operands, in two rounds:
//   1. bits: each runs once, and what it wrote (D, and the epilogue's GELU
//      input or bias gradient) must hash to what the first wrote, or it is
//      dropped;
//   2. time: each left runs AUTOTUNE_TIMED_RUNS times, every run timed alone
//      after the L2 cache is flushed (as in the step, where the operands
//      arrive from memory), and the one of the least median is kept for good.
// A GEMM that accumulates into D (beta = 1) has D saved first and put back
// before each checked run and at the end. The trials wait for the device:
// once per shape, in the first step, never inside a CUDA graph's capture
// (the heuristic's first choice stays then).
//
// The promise is as wide as the check: the same bits as the heuristic's first
// choice on the operands of the first call, by kernels that declare no split
// of K and no reduction. Sums in the same order give the same bits on any
// operands; a kernel whose order the attributes do not show and that agreed
// on this call by chance would be caught only by the tests.

// The bits of n values of 2 bytes (any floatX is a whole number of them),
// hashed into *h: each value mixed with its index, the mixes summed as
// integers, an order-free sum whose atomics give the same total every time.
__global__ void hash_values_kernel(const uint16_t *x, size_t n, unsigned long long *h) {
    unsigned long long sum = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = (i << 16 | x[i]) + 0x9E3779B97F4A7C15ull;  // splitmix64
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        sum += z ^ (z >> 31);
    }
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        sum += __shfl_xor_sync(FULL_MASK, sum, offset);
    if (threadIdx.x % WARP_SIZE == 0) atomicAdd(h, sum);
}

// What a run of the plan writes, as device buffers and their bytes.
typedef struct {
    void *out[3];
    size_t bytes[3];
    int count;
} GemmOutputs;

static GemmOutputs outputs_of(const Plan *plan, floatX *D, const void *bias, const void *aux) {
    const PlanKey *k = &plan->key;
    GemmOutputs o = {{D}, {(size_t)k->ldc * k->n * sizeof(floatX)}, 1};
    if (k->epilogue == CUBLASLT_EPILOGUE_GELU_AUX || k->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
        o.out[o.count] = (void *)aux,
        o.bytes[o.count++] = (size_t)k->aux_ld * k->n * sizeof(floatX);
    if (k->epilogue == CUBLASLT_EPILOGUE_BGRADB)
        o.out[o.count] = (void *)bias, o.bytes[o.count++] = (size_t)k->n * sizeof(floatX);
    return o;
}

// The hash of everything the last run wrote (waits for the device).
static unsigned long long hash_outputs(const GpuContext *ctx, const GemmOutputs *o,
                                       unsigned long long *d_hash) {
    gpu_zero(ctx, d_hash, sizeof *d_hash, "memset (a GEMM candidate's hash)");
    for (int i = 0; i < o->count; i++) {
        hash_values_kernel<<<4 * ctx->sm_count, 256, 0, ctx->stream>>>(
            (const uint16_t *)o->out[i], o->bytes[i] / sizeof(uint16_t), d_hash);
        gpu_check_launch(ctx, "hash_values_kernel");
    }
    unsigned long long h;
    CUDA_CHECK(cudaMemcpyAsync(&h, d_hash, sizeof h, cudaMemcpyDeviceToHost, ctx->stream));
    gpu_stream_sync(ctx, "a GEMM candidate's hash");
    return h;
}

static cublasStatus_t try_algo(const GpuContext *ctx, const Plan *plan,
                               const cublasLtMatmulAlgo_t *algo, const void *A, const void *B,
                               float beta, floatX *D) {
    const float alpha = 1.0f;
    const MatmulLt *lt = ctx->lt;
    return cublasLtMatmul(lt->handle, plan->desc, &alpha, A, plan->a, B, plan->b, &beta, D,
                          plan->c, D, plan->c, algo, lt->workspace, WORKSPACE_BYTES, ctx->stream);
}

static void run_algo(const GpuContext *ctx, const Plan *plan, const cublasLtMatmulAlgo_t *algo,
                     const void *A, const void *B, float beta, floatX *D) {
    const cublasStatus_t status = try_algo(ctx, plan, algo, A, B, beta, D);
    const PlanKey *k = &plan->key;
    if (status != CUBLAS_STATUS_SUCCESS)
        die("matmul_v2: cuBLASLt refused m=%d n=%d k=%d (ld %d %d %d, types %d %d, epilogue %d, "
            "alignments %d %d %d): %s",
            k->m, k->n, k->k, k->lda, k->ldb, k->ldc, k->type_a, k->type_b, k->epilogue,
            k->align_a, k->align_b, k->align_c, cublasGetStatusString(status));
}

static int compare_floats(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// The median time of one run of the algorithm, each run after a write that
// flushes the L2 cache (gpu_context.h).
static float median_ms(const GpuContext *ctx, const Plan *plan, const cublasLtMatmulAlgo_t *algo,
                       const void *A, const void *B, float beta, floatX *D,
                       const GpuL2Flush *flush) {
    cudaEvent_t start[AUTOTUNE_TIMED_RUNS], stop[AUTOTUNE_TIMED_RUNS];
    run_algo(ctx, plan, algo, A, B, beta, D);  // warm-up
    for (int r = 0; r < AUTOTUNE_TIMED_RUNS; r++) {
        CUDA_CHECK(cudaEventCreate(&start[r]));
        CUDA_CHECK(cudaEventCreate(&stop[r]));
        if (AUTOTUNE_FLUSH_L2) gpu_l2_flush(ctx, flush, r);
        CUDA_CHECK(cudaEventRecord(start[r], ctx->stream));
        run_algo(ctx, plan, algo, A, B, beta, D);
        CUDA_CHECK(cudaEventRecord(stop[r], ctx->stream));
    }
    gpu_stream_sync(ctx, "a GEMM candidate's timed runs");
    float ms[AUTOTUNE_TIMED_RUNS];
    for (int r = 0; r < AUTOTUNE_TIMED_RUNS; r++) {
        CUDA_CHECK(cudaEventElapsedTime(&ms[r], start[r], stop[r]));
        CUDA_CHECK(cudaEventDestroy(start[r]));
        CUDA_CHECK(cudaEventDestroy(stop[r]));
    }
    qsort(ms, AUTOTUNE_TIMED_RUNS, sizeof ms[0], compare_floats);
    return ms[AUTOTUNE_TIMED_RUNS / 2];
}

// Round 1: the candidates that run and whose outputs hash to the first's, in order (the
// first among them); returns how many.
static int keep_same_bits(const GpuContext *ctx, Plan *plan, const void *A, const void *B,
                          float beta, floatX *D, const floatX *saved, const GemmOutputs *outs) {
    unsigned long long *d_hash = (unsigned long long *)gpu_malloc(sizeof *d_hash, "a hash");
    const size_t d_bytes = outs->bytes[0];
    unsigned long long first = 0;
    int kept = 0;
    for (int i = 0; i < plan->num_candidates; i++) {
        if (saved)
            gpu_memcpy_async(ctx, D, saved, d_bytes, cudaMemcpyDeviceToDevice,
                             "copy (a GEMM's output put back for a trial)");
        // A candidate the heuristic offered may still refuse these operands
        // (some FP8 kernels of cuBLASLt 13 do, with scale pointers set): dropped.
        if (i > 0 && try_algo(ctx, plan, &plan->candidates[i], A, B, beta, D) !=
                         CUBLAS_STATUS_SUCCESS) {
            ctx->lt->stats.candidates_rejected++;
            continue;
        }
        if (i == 0) run_algo(ctx, plan, &plan->candidates[i], A, B, beta, D);
        const unsigned long long h = hash_outputs(ctx, outs, d_hash);
        if (i == 0) first = h;
        if (h == first) plan->candidates[kept++] = plan->candidates[i];
        else ctx->lt->stats.candidates_rejected++;
    }
    gpu_free(d_hash);
    return kept;
}

static void autotune(const GpuContext *ctx, Plan *plan, const void *A, const void *B,
                     float beta, floatX *D, const void *bias, const void *aux) {
    plan->tuned = 1;
    cudaStreamCaptureStatus capturing;
    CUDA_CHECK(cudaStreamIsCapturing(ctx->stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone || plan->num_candidates < 2) return;
    const GemmOutputs outs = outputs_of(plan, D, bias, aux);
    floatX *saved = NULL;
    if (beta != 0.0f) {
        saved = (floatX *)gpu_malloc(outs.bytes[0],
                                     "a GEMM's output, kept while its kernels are tried");
        gpu_memcpy_async(ctx, saved, D, outs.bytes[0], cudaMemcpyDeviceToDevice,
                         "copy (a GEMM's output kept for its trials)");
    }
    plan->num_candidates = keep_same_bits(ctx, plan, A, B, beta, D, saved, &outs);
    GpuL2Flush flush;
    gpu_l2_flush_init(ctx, &flush);
    float best = INFINITY;
    for (int i = 0; plan->num_candidates > 1 && i < plan->num_candidates; i++) {
        const float ms = median_ms(ctx, plan, &plan->candidates[i], A, B, beta, D, &flush);
        if (ms < best) best = ms, plan->algo = plan->candidates[i];
    }
    gpu_l2_flush_free(&flush);
    ctx->lt->stats.plans_tuned++;
    if (saved) {
        gpu_memcpy_async(ctx, D, saved, outs.bytes[0], cudaMemcpyDeviceToDevice,
                         "copy (a GEMM's output put back after its trials)");
        gpu_stream_sync(ctx, "a GEMM's output put back after its trials");
        gpu_free(saved);
    }
}
// ANCHOR_END: autotune

extern "C" size_t matmul_lt_workspace_bytes(void) { return WORKSPACE_BYTES; }

extern "C" MatmulLtStats matmul_lt_stats(const GpuContext *ctx) {
    MatmulLtStats s = ctx->lt->stats;
    s.plans_cached = ctx->lt->num_plans;
    return s;
}

// The scales of FP8 operands A and B (chapter 13): device pointers, one float
// each, real = stored * scale; NULL for floatX operands.
typedef struct {
    const float *a, *b;
} OperandScales;

// D = op(A) op(B) (+ beta D), column-major, with the epilogue of the key;
// bias and aux are the epilogue's vectors (or NULL).
static void lt_gemm_scaled(const GpuContext *ctx, PlanKey key, const void *A, const void *B,
                           OperandScales scales, float beta, floatX *D, const void *bias,
                           const void *aux, const char *what) {
    key.align_a = alignment_of(A), key.align_b = alignment_of(B), key.align_c = alignment_of(D);
    key.compute = gpu_gemm_compute_type(ctx);
    key.autotune = ctx->gemm_autotune;
    Plan *plan = plan_for(ctx->lt, &key);
    if (bias) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (aux) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    if (scales.a) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scales.a, sizeof scales.a);
    if (scales.b) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scales.b, sizeof scales.b);
    if (key.autotune && !plan->tuned) autotune(ctx, plan, A, B, beta, D, bias, aux);
    run_algo(ctx, plan, &plan->algo, A, B, beta, D);
    char name[160];  // the shape too: each GEMM's own line in a profile
    snprintf(name, sizeof name, "%s %dx%dx%d", what, key.m, key.n, key.k);
    gpu_check_launch(ctx, name);
}

static void lt_gemm(const GpuContext *ctx, PlanKey key, const floatX *A, const floatX *B,
                    float beta, floatX *D, const void *bias, const void *aux, const char *what) {
    const OperandScales none = {NULL, NULL};
    lt_gemm_scaled(ctx, key, A, B, none, beta, D, bias, aux, what);
}

// ---- widths that are not a multiple of 8 --------------------------------------------
// cuBLASLt's fast Hopper kernels want every dimension of a bf16 GEMM to be a
// multiple of 8 (16 bytes); at OC = 50257 (the lm_head) it falls back to
// kernels several times slower (the kernel lab's lm_head rows). So, as
// torch.compile's pad_mm pass does, such a GEMM runs at OCp = OC rounded up
// to 8 on a copy of the weight with OCp - OC zero rows: the extra outputs
// are zeros, in the padding columns of out's rows (ld >= OCp). The copy
// costs OC*C*2 bytes each way (0.15 GB at 124M: 0.05 ms); chapter 06 pads
// the vocabulary itself and needs no copy.
#define PAD_TO 8

static int padded_width(int OC) { return (OC + PAD_TO - 1) / PAD_TO * PAD_TO; }

extern "C" size_t matmul_lt_padded_weight_bytes(int OC, int C) {
    return OC % PAD_TO == 0 ? 0 : (size_t)padded_width(OC) * C * sizeof(floatX);
}

// The buffers of the shape (OC, C), made on its first use and kept (see
// PaddedWeight): the padding rows of neither are ever written but here.
static PaddedWeight *padded_buffers(MatmulLt *lt, int OC, int C) {
    for (int i = 0; i < lt->num_padded; i++)
        if (lt->padded[i].OC == OC && lt->padded[i].C == C) return &lt->padded[i];
    if (lt->num_padded == MAX_PADDED_SHAPES)
        die("matmul_v2: more than %d weight shapes need padding to a multiple of %d",
            MAX_PADDED_SHAPES, PAD_TO);
    PaddedWeight *p = &lt->padded[lt->num_padded++];
    const size_t bytes = (size_t)padded_width(OC) * C * sizeof(floatX);
    p->OC = OC, p->C = C;
    p->weight = (floatX *)gpu_malloc(bytes, "a padded GEMM weight");
    p->dweight = (floatX *)gpu_malloc(bytes, "a padded GEMM dweight");
    return p;
}

// The weight (OC, C) copied into the first OC rows of its shape's (OCp, C)
// buffer, whose other rows are zero.
static PaddedWeight *pad_weight(const GpuContext *ctx, const floatX *weight, int OC, int C) {
    PaddedWeight *p = padded_buffers(ctx->lt, OC, C);
    const size_t real = (size_t)OC * C * sizeof(floatX);
    const size_t all = (size_t)padded_width(OC) * C * sizeof(floatX);
    gpu_memcpy_async(ctx, p->weight, weight, real, cudaMemcpyDeviceToDevice,
                     "copy (weight into padded rows)");
    gpu_zero(ctx, (char *)p->weight + real, all - real, "memset (padding rows of a weight)");
    return p;
}

// dweight (OC, C) += the first OC rows of the padded gradient.
__global__ void add_unpadded_rows_kernel_v2(floatX *dweight, const floatX *padded, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dweight[i] = f2x(x2f(dweight[i]) + x2f(padded[i]));
}

// ---- chapter 13: FP8 operands ---------------------------------------------------------
// ANCHOR: matmul_fp8
// cuBLASLt's FP8 GEMMs on Hopper take A transposed and B not ("TN"): both
// stored K-major, the sum's dimension contiguous. Each product below is
// written so that it is, from the rows or the transposes the casts made
// (gemm_operands.h). Hopper's FP8 instructions keep their partial sums at
// less than fp32's precision; cuBLASLt promotes them to full fp32 every few
// steps of K unless told not to (fast accumulation). The products whose K is
// a layer's width (forward: C or 4C; dinp: OC) skip the promotions when the
// operands ask (o->fast_accum); dweight's, whose K is B*T (65,536 at B=64),
// always promotes. The output is floatX, scaled by the product of the two
// scales, exactly (powers of two).
static int fp8_cuda_type(GemmPrecision p) {
    return p == GEMM_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}

static void check_fp8_dims(const char *who, int BT, int C, int OC) {
    if (BT % 16 || C % 16 || OC % 16)
        die("%s: FP8 GEMMs need B*T (%d), C (%d) and OC (%d) to be multiples of 16", who, BT, C,
            OC);
}

// out^T (OC x BT) = W (OC x C) @ X^T: A = W's rows (C-major), B = X's rows.
static void matmul_forward_fp8(const GpuContext *ctx, floatX *out, const floatX *bias, int BT,
                               int C, int OC, int ld, const GemmOperands *o) {
    check_fp8_dims("matmul_forward_v2", BT, C, OC);
    PlanKey key = gemm_key(OC, BT, C, C, C, ld, 1, 0);
    key.type_a = fp8_cuda_type(o->weight.format), key.type_b = fp8_cuda_type(o->input.format);
    key.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    key.fast_accum = o->fast_accum;
    const OperandScales s = {o->weight.scale, o->input.scale};
    lt_gemm_scaled(ctx, key, o->weight.rows, o->input.rows, s, 0.0f, out, bias, NULL,
                   "matmul_forward_v2: fp8");
}

static void matmul_backward_fp8(const GpuContext *ctx, floatX *dinp, floatX *dweight, int BT,
                                int C, int OC, const GemmOperands *o) {
    check_fp8_dims("matmul_backward_v2", BT, C, OC);
    // dinp^T (C x BT) = W^T (C x OC) @ dout^T: A = W's transpose (C rows of
    // OC), B = dout's rows (BT rows of OC). beta = 0.
    PlanKey dx = gemm_key(C, BT, OC, OC, OC, C, 1, 0);
    dx.type_a = fp8_cuda_type(o->weight.format), dx.type_b = fp8_cuda_type(o->grad.format);
    dx.fast_accum = o->fast_accum;
    const OperandScales sx = {o->weight.scale, o->grad.scale};
    lt_gemm_scaled(ctx, dx, o->weight.cols, o->grad.rows, sx, 0.0f, dinp, NULL, NULL,
                   "matmul_backward_v2: fp8 (dinp)");
    // dweight^T (C x OC) += X^T (C x BT) @ dout (BT x OC): A = X's transpose
    // (C rows of BT), B = dout's transpose (OC rows of BT). beta = 1.
    PlanKey dw = gemm_key(C, OC, BT, BT, BT, C, 1, 0);
    dw.type_a = fp8_cuda_type(o->input.format), dw.type_b = fp8_cuda_type(o->grad.format);
    const OperandScales sw = {o->input.scale, o->grad.scale};
    lt_gemm_scaled(ctx, dw, o->input.cols, o->grad.cols, sw, 1.0f, dweight, NULL, NULL,
                   "matmul_backward_v2: fp8 (dweight)");
}
// ANCHOR_END: matmul_fp8

// ANCHOR: matmul_forward_v2
extern "C" void matmul_forward_v2(const GpuContext *ctx, floatX *out, floatX *pre_gelu,
                                  const floatX *inp, const floatX *weight, const floatX *bias,
                                  int B, int T, int C, int OC, int ld,
                                  const GemmOperands *operands) {
    if (!gemm_operands_are_floatx(operands)) {
        if (pre_gelu) die("matmul_forward_v2: FP8 operands take no GELU epilogue (fp8.h: FP8_GELU)");
        matmul_forward_fp8(ctx, out, bias, B * T, C, OC, ld, operands);
        return;
    }
    if (pre_gelu && ld != OC) die("matmul_forward_v2: GELU's output needs ld == OC");
    if (OC % PAD_TO != 0) {  // the lm_head at V = 50257: see pad_weight
        if (bias || ld < padded_width(OC))
            die("matmul_forward_v2: OC = %d needs padding: no bias, and ld >= %d", OC,
                padded_width(OC));
        weight = pad_weight(ctx, weight, OC, C)->weight;
        OC = padded_width(OC);
    }
    // out^T (OC x BT) = weight (OC x C) @ inp^T (C x BT), as matmul_forward_v1.
    PlanKey key = gemm_key(OC, B * T, C, C, C, ld, 1, 0);
    if (pre_gelu) {
        // The epilogue adds the bias, stores the sum to pre_gelu ("aux"),
        // and writes gelu(sum) to out.
        key.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        key.aux_ld = OC;
        lt_gemm(ctx, key, weight, inp, 0.0f, out, bias, pre_gelu, "matmul_forward_v2: gelu");
    } else {
        key.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
        lt_gemm(ctx, key, weight, inp, 0.0f, out, bias, NULL, "matmul_forward_v2:");
    }
}
// ANCHOR_END: matmul_forward_v2

// The epilogue's bias gradient has D's type, floatX (cuBLASLt takes no fp32
// bias gradient with bf16 operands): OC of them, in the scratch floats.
extern "C" size_t matmul_backward_v2_scratch_floats(int OC) {
    return ((size_t)OC * sizeof(floatX) + sizeof(float) - 1) / sizeof(float);
}

// dbias += the column sums the GEMM's epilogue left in `sums`. The epilogue
// adds them in fp32 and rounds once. In a step of one batch the model's
// dbias is zero when this runs (the gradients are zeroed once a step and
// each bias has one use), so the add is exact and the gradient is rounded
// once, as v1's; under chapter 11's --grad-accum each micro-batch after the
// first adds to a bf16 sum and rounds again, as every other gradient does
// (the chapter measures what that costs).
__global__ void bias_accumulate_kernel_v2(floatX *dbias, const floatX *sums, int OC) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < OC) dbias[i] = f2x(x2f(dbias[i]) + x2f(sums[i]));
}

// ANCHOR: matmul_backward_v2
extern "C" void matmul_backward_v2(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                                   floatX *dbias, float *scratch, const floatX *dout,
                                   const floatX *inp, const floatX *weight,
                                   const floatX *pre_gelu, int B, int T, int C, int OC, int ld,
                                   const GemmOperands *operands) {
    if (!gemm_operands_are_floatx(operands)) {
        if (dbias || pre_gelu)
            die("matmul_backward_v2: FP8 operands take no epilogue: the casts of dout take the "
                "bias gradient and GELU's (fp8.h)");
        matmul_backward_fp8(ctx, dinp, dweight, B * T, C, OC, operands);
        return;
    }
    const int BT = B * T;
    // An OC that is not a multiple of 8: both GEMMs at OCp on padded copies
    // (see pad_weight); dout's padding columns [OC, ld) are zero (the
    // classifier writes them so), so the zero rows add nothing.
    const int real_OC = OC;
    floatX *real_dweight = dweight;
    if (OC % PAD_TO != 0) {
        if (dbias || pre_gelu || ld < padded_width(OC))
            die("matmul_backward_v2: OC = %d needs padding: no bias, no GELU, ld >= %d", OC,
                padded_width(OC));
        PaddedWeight *padded = pad_weight(ctx, weight, OC, C);
        weight = padded->weight;
        dweight = padded->dweight;
        OC = padded_width(OC);
    }
    // dinp^T (C x BT) = weight^T (C x OC) @ dout^T (OC x BT), beta = 0; with
    // pre_gelu, the epilogue multiplies by gelu'(pre_gelu) before storing.
    PlanKey dx = gemm_key(C, BT, OC, C, ld, C, 0, 0);
    dx.epilogue = pre_gelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT;
    dx.aux_ld = pre_gelu ? C : 0;
    lt_gemm(ctx, dx, weight, dout, 0.0f, dinp, NULL, pre_gelu,
            pre_gelu ? "matmul_backward_v2: (dinp, dgelu)" : "matmul_backward_v2: (dinp)");
    // dweight^T (C x OC) += inp^T (C x BT) @ dout (BT x OC), beta = 1; with a
    // bias, the epilogue also sums op(B) = dout over its BT rows: dbias.
    PlanKey dw = gemm_key(C, OC, BT, C, ld, C, 0, 1);
    dw.epilogue = dbias ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT;
    floatX *sums = (floatX *)scratch;
    const float beta = dweight == real_dweight ? 1.0f : 0.0f;  // padded: added below
    lt_gemm(ctx, dw, inp, dout, beta, dweight, dbias ? sums : NULL, NULL,
            dbias ? "matmul_backward_v2: (dweight, dbias)" : "matmul_backward_v2: (dweight)");
    const int threads = 256;
    if (dweight != real_dweight) {
        const size_t n = (size_t)real_OC * C;  // the first OC rows of (OCp, C)
        add_unpadded_rows_kernel_v2<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(
            real_dweight, dweight, n);
        gpu_check_launch(ctx, "add_unpadded_rows_kernel_v2");
    }
    if (!dbias) return;
    bias_accumulate_kernel_v2<<<blocks_for(OC, threads), threads, 0, ctx->stream>>>(dbias, sums, OC);
    gpu_check_launch(ctx, "bias_accumulate_kernel_v2");
}
// ANCHOR_END: matmul_backward_v2

extern "C" MatmulLt *matmul_lt_new(void) { return (MatmulLt *)xcalloc(1, sizeof(MatmulLt)); }

extern "C" void matmul_lt_free(MatmulLt *lt) {
    if (!lt) return;
    for (int i = 0; i < lt->num_plans; i++) destroy_plan(&lt->plans[i]);
    if (lt->handle) CUBLAS_CHECK(cublasLtDestroy(lt->handle));
    gpu_free(lt->workspace);
    for (int i = 0; i < lt->num_padded; i++)
        gpu_free(lt->padded[i].weight), gpu_free(lt->padded[i].dweight);
    free(lt);
}
