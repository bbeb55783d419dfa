// lab_gemm_steps.c: appendix E's GEMM, step by step (kernels/gemm_steps.h),
// and cuBLASLt's (chapter 04's matmul_forward_v2, no bias) as the last row:
// C (M, N) = A (M, K) @ B^T, bf16 operands, fp32 sums. bf16 build only.
//
// Each version is checked against the CPU's matmul on a shape that fits no
// tile (333 x 200 x 264: rows past 2 x 128 + 64, columns past 128 + 64,
// K past 4 x 64), then timed at three of GPT-2 124M's GEMMs at B=16, T=1024:
// fc (16384 x 3072 x 768), the MLP's first, the largest; fcproj (16384 x
// 768 x 3072), its second, the same FLOPs with a sum 4 times longer and 4
// times fewer outputs; and qkv (16384 x 2304 x 768). `make demo-gemm` runs
// this family alone into results/<gpu>/gemm_steps/lab.csv, each row named
// gemm_steps-VERSION-SHAPE (tools/gemm_steps_lab.sh).
#include <stdlib.h>

#include "gemm_steps.h"
#include "lab.h"
#include "matmul_lt.h"
#include "model/gpt2_cpu.h"

#ifdef PRECISION_BF16

// ANCHOR: lab_gemm_versions
static const struct {
    const char *name;
    int step;  // gemm_step's step; 0: cuBLASLt
} VERSIONS[] = {
    {"s1 wmma 64x64", 1},        {"s2 wmma 128x128", 2},   {"s3 cp.async ring", 3},
    {"s4 mma.sync swizzled", 4}, {"s5 wgmma TMA", 5},      {"s6 wgmma 128x256", 6},
    {"cublasLt", 0},
};
// ANCHOR_END: lab_gemm_versions
#define NUM_VERSIONS ((int)(sizeof VERSIONS / sizeof VERSIONS[0]))
_Static_assert(GEMM_STEPS == 6, "a row per step of gemm_step");

static const struct {
    const char *name;
    int M, N, K;
} SHAPES[] = {
    {"fc", LAB_B * LAB_T, 4 * LAB_C, LAB_C},
    {"fcproj", LAB_B * LAB_T, LAB_C, 4 * LAB_C},
    {"qkv", LAB_B * LAB_T, 3 * LAB_C, LAB_C},
};

typedef struct {
    int M, N, K, step;
    floatX *A, *B, *C;
} Args;

static void run(Lab *lab, void *p) {
    const Args *a = p;
    if (a->step > 0) gemm_step(&lab->ctx, a->step, a->C, a->A, a->B, a->M, a->N, a->K);
    else matmul_forward_v2(&lab->ctx, a->C, NULL, a->A, a->B, NULL, 1, a->M, a->K, a->N, a->N, NULL);
}

static Args upload(Lab *lab, int M, int N, int K, const float *A, const float *B) {
    Args a = {.M = M, .N = N, .K = K, .A = lab_upload_x(lab, A, (size_t)M * K),
              .B = lab_upload_x(lab, B, (size_t)N * K),
              .C = lab_alloc(lab, (size_t)M * N * sizeof(floatX))};
    return a;
}

static int runs_here(const Lab *lab, int v) {
    return !(VERSIONS[v].step > 0 && gemm_step_needs_hopper(VERSIONS[v].step) && !lab->ctx.hopper);
}

// Every version against the CPU's fp32 matmul on the odd shape: its error.
static void check_versions(Lab *lab, double errors[NUM_VERSIONS]) {
    const int M = 333, N = 200, K = 264;
    float *A = lab_random_x(lab, (size_t)M * K, -1, 1), *B = lab_random_x(lab, (size_t)N * K, -1, 1);
    float *ref = xmalloc((size_t)M * N * sizeof(float));
    cpu_matmul_forward(ref, A, B, NULL, 1, M, K, N);
    Args a = upload(lab, M, N, K, A, B);
    for (int v = 0; v < NUM_VERSIONS; v++) {
        if (!runs_here(lab, v)) continue;
        a.step = VERSIONS[v].step;
        run(lab, &a);
        float *got = lab_download_x(lab, a.C, (size_t)M * N);
        errors[v] = lab_error(got, ref, (size_t)M * N);
        free(got);
    }
    lab_free_buffers(lab);
    free(A), free(B), free(ref);
}

void lab_gemm_steps(Lab *lab) {
    if (!lab_wants(lab, "gemm_steps")) return;
    double errors[NUM_VERSIONS];
    check_versions(lab, errors);
    for (int v = 0; v < NUM_VERSIONS; v++)
        if (!runs_here(lab, v))
            printf("gemm_steps: %s left out: it runs on compute capability 9.0 only\n",
                   VERSIONS[v].name);
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const int M = SHAPES[s].M, N = SHAPES[s].N, K = SHAPES[s].K;
        float *A = lab_random_x(lab, (size_t)M * K, -1, 1);
        float *B = lab_random_x(lab, (size_t)N * K, -0.05f, 0.05f);
        Args a = upload(lab, M, N, K, A, B);
        char shape[64];
        snprintf(shape, sizeof shape, "%s %dx%dx%d", SHAPES[s].name, M, N, K);
        const double bytes = ((double)M * K + (double)N * K + (double)M * N) * sizeof(floatX);
        for (int v = 0; v < NUM_VERSIONS; v++) {
            if (!runs_here(lab, v)) continue;
            a.step = VERSIONS[v].step;
            // the steps extend chapter 01's exercise; cuBLASLt's GEMM is chapter 04's
            LabRow row = {"gemm_steps", VERSIONS[v].name, shape, a.step > 0 ? 1 : 4, errors[v],
                          lab_tolerance(), lab_time_ms(lab, run, &a), bytes,
                          2.0 * M * N * (double)K};
            lab_report(lab, &row);
        }
        lab_free_buffers(lab);
        free(A), free(B);
    }
}

#else

void lab_gemm_steps(Lab *lab) { (void)lab; }  // bf16 operands: the bf16 lab's family

#endif
