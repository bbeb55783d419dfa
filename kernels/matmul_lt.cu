// matmul_lt.cu: see matmul_lt.h.
#include <cublasLt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "matmul_lt.h"
#include "reduce.cuh"
#include "util.h"

#define WORKSPACE_BYTES (32u << 20)
#define MAX_PLANS 128
// Chapter 11: how many of the heuristic's kernels a shape's first call times.
#define AUTOTUNE_CANDIDATES 8

// Everything that selects a plan. Pointers are not part of it, only their
// alignments: the bias and aux pointers are set on the descriptor per call.
typedef struct {
    int m, n, k, lda, ldb, ldc;
    int trans_a, trans_b;
    int epilogue;         // cublasLtEpilogue_t
    int aux_ld;           // GELU's saved input, its leading dimension (0: none)
    int align_a, align_b, align_c;  // bytes, a power of two up to 256
    cublasComputeType_t compute;
    int autotune;         // ctx->gemm_autotune when the plan was made
} PlanKey;

typedef struct {
    PlanKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;  // the one every call runs
    // The heuristic's candidates that add in the same order as its first
    // (adds_in_order), timed by the first call when key.autotune is set.
    cublasLtMatmulAlgo_t candidates[AUTOTUNE_CANDIDATES];
    int num_candidates;
    int tuned;
} Plan;

static struct {
    cublasLtHandle_t handle;
    void *workspace;
    floatX *padded_weight, *padded_dweight;  // see pad_weight
    size_t padded_elements;
    Plan plans[MAX_PLANS];
    int num_plans;
} lt;

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

// ANCHOR: adds_in_order
// A kernel that does not split the K dimension: each output's products are
// added in one chain, k ascending, 16 at a time by the tensor cores, whatever
// the tile's M and N. Every such kernel computes the same bits (the tests
// check it); one that splits K adds partial sums in another order.
static int adds_in_order(const cublasLtMatmulAlgo_t *algo) {
    int splits = 1;
    size_t written = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                      &splits, sizeof splits, &written));
    return splits <= 1;
}
// ANCHOR_END: adds_in_order

static void make_plan(Plan *plan, const PlanKey *k) {
    plan->key = *k;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, k->compute, CUDA_R_32F));
    cublasOperation_t ta = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtEpilogue_t epilogue = (cublasLtEpilogue_t)k->epilogue;
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    if (k->aux_ld) {
        int64_t ld = k->aux_ld;
        set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
    }
    // Column-major layouts of the stored matrices (rows, cols, ld), before op().
    const int a_rows = k->trans_a ? k->k : k->m, a_cols = k->trans_a ? k->m : k->k;
    const int b_rows = k->trans_b ? k->n : k->k, b_cols = k->trans_b ? k->k : k->n;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, FLOATX_CUDA_TYPE, a_rows, a_cols, k->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, FLOATX_CUDA_TYPE, b_rows, b_cols, k->ldb));
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
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt.handle, plan->desc, plan->a, plan->b, plan->c,
                                                plan->c, pref, wanted, results, &found));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (found == 0)
        die("matmul_v2: cuBLASLt has no algorithm for m=%d n=%d k=%d (ld %d %d %d, epilogue %d, "
            "alignments %d %d %d)",
            k->m, k->n, k->k, k->lda, k->ldb, k->ldc, k->epilogue, k->align_a, k->align_b,
            k->align_c);
    plan->algo = results[0].algo;
    plan->num_candidates = 0;
    if (!adds_in_order(&results[0].algo)) return;  // nothing to pick that keeps its bits
    for (int i = 0; i < found; i++)
        if (adds_in_order(&results[i].algo))
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
    return key;
}

// The cached plan for this key, made on first use.
static Plan *plan_for(const PlanKey *k) {
    if (!lt.handle) {
        CUBLAS_CHECK(cublasLtCreate(&lt.handle));
        lt.workspace = gpu_malloc(WORKSPACE_BYTES, "the cuBLASLt workspace");
    }
    for (int i = 0; i < lt.num_plans; i++)
        if (memcmp(&lt.plans[i].key, k, sizeof *k) == 0) return &lt.plans[i];
    if (lt.num_plans == MAX_PLANS) die("matmul_v2: more than %d GEMM shapes", MAX_PLANS);
    Plan *plan = &lt.plans[lt.num_plans++];
    make_plan(plan, k);
    return plan;
}

// ---- chapter 11: the kernel picked by the clock -------------------------------------
// ANCHOR: autotune
// cuBLASLt's heuristic ranks its kernels for a shape from a model of the GPU,
// without running them. Its first choice is good, not always the fastest: on
// the H100 another of its first eight is up to 9% faster for some of GPT-2's
// GEMMs (the kernel lab's autotuned rows). So the first call of a shape runs each
// candidate that adds in order (adds_in_order: the same bits as the first) a
// few times, on the call's own operands, and keeps the fastest for good. The
// trial runs write D and the epilogue's outputs, which the real call then
// overwrites; a GEMM that accumulates into D (beta = 1) has D saved first and
// put back after. The timing waits for the device: once per shape, in the
// first step, never inside a CUDA graph's capture (the heuristic's first
// choice stays then).
static float time_candidate(const GpuContext *ctx, Plan *plan, const cublasLtMatmulAlgo_t *algo,
                            const floatX *A, const floatX *B, float beta, floatX *D,
                            cudaEvent_t start, cudaEvent_t stop) {
    const float alpha = 1.0f;
    const int runs = 3;
    for (int r = 0; r <= runs; r++) {
        if (r == 1) CUDA_CHECK(cudaEventRecord(start, ctx->stream));  // after one warm-up run
        CUBLAS_CHECK(cublasLtMatmul(lt.handle, plan->desc, &alpha, A, plan->a, B, plan->b, &beta,
                                    D, plan->c, D, plan->c, algo, lt.workspace, WORKSPACE_BYTES,
                                    ctx->stream));
    }
    CUDA_CHECK(cudaEventRecord(stop, ctx->stream));
    gpu_event_sync(stop, "a GEMM candidate's trial runs");
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / runs;
}

static void autotune(const GpuContext *ctx, Plan *plan, const floatX *A, const floatX *B,
                     float beta, floatX *D) {
    plan->tuned = 1;
    cudaStreamCaptureStatus capturing;
    CUDA_CHECK(cudaStreamIsCapturing(ctx->stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone || plan->num_candidates < 2) return;
    const size_t d_bytes = (size_t)plan->key.ldc * plan->key.n * sizeof(floatX);
    floatX *saved = NULL;
    if (beta != 0.0f) {
        saved = (floatX *)gpu_malloc(d_bytes, "a GEMM's output, kept while its kernels are timed");
        CUDA_CHECK(cudaMemcpyAsync(saved, D, d_bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    }
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    float best = INFINITY;
    for (int i = 0; i < plan->num_candidates; i++) {
        const cublasLtMatmulAlgo_t *algo = &plan->candidates[i];
        const float ms = time_candidate(ctx, plan, algo, A, B, beta, D, start, stop);
        if (ms < best) best = ms, plan->algo = plan->candidates[i];
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    if (saved) {
        CUDA_CHECK(cudaMemcpyAsync(D, saved, d_bytes, cudaMemcpyDeviceToDevice, ctx->stream));
        gpu_stream_sync(ctx, "a GEMM's output put back after timing");
        gpu_free(saved);
    }
}
// ANCHOR_END: autotune

// D = op(A) op(B) (+ beta D), column-major, with the epilogue of the key;
// bias and aux are the epilogue's vectors (or NULL).
static void lt_gemm(const GpuContext *ctx, PlanKey key, const floatX *A, const floatX *B,
                    float beta, floatX *D, const void *bias, const void *aux, const char *what) {
    key.align_a = alignment_of(A), key.align_b = alignment_of(B), key.align_c = alignment_of(D);
    key.compute = gpu_gemm_compute_type(ctx);
    key.autotune = ctx->gemm_autotune;
    Plan *plan = plan_for(&key);
    if (bias) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (aux) set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    if (key.autotune && !plan->tuned) autotune(ctx, plan, A, B, beta, D);
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasLtMatmul(lt.handle, plan->desc, &alpha, A, plan->a, B, plan->b, &beta, D,
                                plan->c, D, plan->c, &plan->algo, lt.workspace, WORKSPACE_BYTES,
                                ctx->stream));
    char name[160];  // the shape too: each GEMM's own line in a profile
    snprintf(name, sizeof name, "%s %dx%dx%d", what, key.m, key.n, key.k);
    gpu_check_launch(ctx, name);
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

// The weight (OC, C) copied into the first OC rows of a (OCp, C) buffer whose
// other rows are zero. Buffers allocated once, at the largest size seen.
static floatX *pad_weight(const GpuContext *ctx, const floatX *weight, int OC, int C) {
    const size_t n = (size_t)padded_width(OC) * C;
    if (n > lt.padded_elements) {
        gpu_free(lt.padded_weight), gpu_free(lt.padded_dweight);
        lt.padded_weight = (floatX *)gpu_malloc(n * sizeof(floatX), "a padded GEMM weight");
        lt.padded_dweight = (floatX *)gpu_malloc(n * sizeof(floatX), "a padded GEMM dweight");
        lt.padded_elements = n;
    }
    const size_t real = (size_t)OC * C * sizeof(floatX);
    gpu_memcpy_async(ctx, lt.padded_weight, weight, real, cudaMemcpyDeviceToDevice,
                     "copy (weight into padded rows)");
    gpu_zero(ctx, (char *)lt.padded_weight + real, n * sizeof(floatX) - real,
             "memset (padding rows of a weight)");
    return lt.padded_weight;
}

// dweight (OC, C) += the first OC rows of the padded gradient.
__global__ void add_unpadded_rows_kernel_v2(floatX *dweight, const floatX *padded, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dweight[i] = f2x(x2f(dweight[i]) + x2f(padded[i]));
}

// ANCHOR: matmul_forward_v2
extern "C" void matmul_forward_v2(const GpuContext *ctx, floatX *out, floatX *pre_gelu,
                                  const floatX *inp, const floatX *weight, const floatX *bias,
                                  int B, int T, int C, int OC, int ld) {
    if (pre_gelu && ld != OC) die("matmul_forward_v2: GELU's output needs ld == OC");
    if (OC % PAD_TO != 0) {  // the lm_head at V = 50257: see pad_weight
        if (bias || ld < padded_width(OC))
            die("matmul_forward_v2: OC = %d needs padding: no bias, and ld >= %d", OC,
                padded_width(OC));
        weight = pad_weight(ctx, weight, OC, C);
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
// adds them in fp32 and rounds once; the model's dbias is zero when this
// runs (the gradients are zeroed once a step and each bias has one use), so
// the add is exact and the gradient is rounded once, as v1's.
__global__ void bias_accumulate_kernel_v2(floatX *dbias, const floatX *sums, int OC) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < OC) dbias[i] = f2x(x2f(dbias[i]) + x2f(sums[i]));
}

// ANCHOR: matmul_backward_v2
extern "C" void matmul_backward_v2(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                                   floatX *dbias, float *scratch, const floatX *dout,
                                   const floatX *inp, const floatX *weight,
                                   const floatX *pre_gelu, int B, int T, int C, int OC, int ld) {
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
        weight = pad_weight(ctx, weight, OC, C);
        dweight = lt.padded_dweight;
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

extern "C" void matmul_lt_release(void) {
    for (int i = 0; i < lt.num_plans; i++) {
        Plan *p = &lt.plans[i];
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->a));
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->b));
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->c));
        CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->desc));
    }
    if (lt.handle) CUBLAS_CHECK(cublasLtDestroy(lt.handle));
    gpu_free(lt.workspace);
    gpu_free(lt.padded_weight), gpu_free(lt.padded_dweight);
    memset(&lt, 0, sizeof lt);
}
