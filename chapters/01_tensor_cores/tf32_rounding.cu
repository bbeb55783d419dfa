// tf32_rounding.cu: chapter 01's second demo. When an fp32 GEMM runs on the
// tensor cores in TF32, what happens to the 13 low mantissa bits of each
// operand: are they cut off (truncation, toward zero), or rounded to nearest?
// The datasheets say "TF32"; this program asks the GPU.
//
//   build/demos/tf32_rounding [CSV]          (make demo-01-rounding DEMO_CSV=...)
//
// The trick is a product by the identity. In C = I X every output is one
// operand times 1, plus zeros: 1 and 0 are exact in TF32, a product by 1 is
// exact, and adding zeros to it is exact in the fp32 accumulator. So C holds
// the tensor cores' own copy of X's values, with whatever rounding they got,
// and nothing else. X is filled with values whose low 13 bits are known
// (zero, below half of TF32's last place, exactly half, above half; both
// signs; the last kept bit odd and even), and every output is compared with
// four candidates computed on the host from the input's bits:
//   exact      the fp32 value itself (the GEMM did not use TF32 at all)
//   truncated  the low 13 bits cleared (rounded toward zero)
//   nearest    rounded to nearest, ties to even
//   away       rounded to nearest, ties away from zero
// The paths tried:
//   cublas-nn-left   cuBLAS, C = I X, the trainer's call (cublasGemmEx, fp32
//                    storage, gpu_gemm_compute_type() with tensor cores on:
//                    CUBLAS_COMPUTE_32F_FAST_TF32)
//   cublas-nn-right  the same, C = X I (X is the other operand)
//   cublas-tn-left   C = X^T I, the transposes of the trainer's forward pass
//   wmma-raw         the exercise's WMMA mma_sync on fp32 values loaded as
//                    they are, without __float_to_tf32: what the tensor
//                    cores do with bits nobody rounded
//   wmma-converted   the same after wmma::__float_to_tf32, as the exercise's
//                    solution does
// It prints one line per path and, given a path, writes them as a CSV.
#include <mma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_context.h"
#include "util/float_bits.h"

using namespace nvcuda;

#define N 1024               // the square matrices of the cuBLAS paths
#define NVALUES (N * N)      // test values, every path
#define TF32_DROPPED 13      // fp32's 23 mantissa bits less TF32's 10
#define LOW_MASK ((1u << TF32_DROPPED) - 1)
#define HALF (1u << (TF32_DROPPED - 1))

enum { EXACT, TRUNCATED, NEAREST_EVEN, NEAREST_AWAY, CANDIDATES };
static const char *const candidate_names[CANDIDATES] = {"exact", "truncated", "nearest",
                                                        "away"};

// The four candidates for what the tensor cores may have made of bits u.
// The values are finite and far from overflow, so a carry out of the
// mantissa only bumps the exponent, as rounding up should.
static void candidates(uint32_t u, uint32_t out[CANDIDATES]) {
    const uint32_t low = u & LOW_MASK, kept = u & ~LOW_MASK, last = (u >> TF32_DROPPED) & 1;
    out[EXACT] = u;
    out[TRUNCATED] = kept;
    out[NEAREST_AWAY] = low >= HALF ? kept + (1u << TF32_DROPPED) : kept;
    out[NEAREST_EVEN] = (low > HALF || (low == HALF && last)) ? kept + (1u << TF32_DROPPED) : kept;
}

// The test values: the low 13 bits cycle through these patterns; the sign,
// the exponent (values between 2^-6 and 2^7) and the 10 kept mantissa bits
// come from a fixed pseudo-random sequence.
static const uint32_t low_patterns[] = {0x0000, 0x0001, 0x0800, 0x0FFF,
                                        0x1000, 0x1001, 0x1800, 0x1FFF};
#define NPATTERNS (sizeof low_patterns / sizeof low_patterns[0])

static void fill_values(float *x) {
    uint64_t state = 0x243F6A8885A308D3ull;
    for (size_t i = 0; i < NVALUES; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const uint32_t r = (uint32_t)(state >> 32);
        const uint32_t sign = r >> 31, exponent = 121 + (r >> 20) % 14, kept = (r >> 4) & 0x3FF;
        const uint32_t low = low_patterns[i % NPATTERNS];
        x[i] = float_from_bits(sign << 31 | exponent << 23 | kept << TF32_DROPPED | low);
    }
}

// ---- the WMMA paths ---------------------------------------------------------------
// One warp per 16 x 8 tile of the values (row-major, 8 per row): A is the
// tile, B is the 8 x 16 identity (its last 8 columns zero), so columns 0-7 of
// the 16 x 16 result are the tile as the tensor cores saw it.
__global__ void wmma_identity_kernel(float *out, const float *values, const float *identity,
                                     int tiles, int convert) {
    const int tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (tile >= tiles) return;  // the whole warp together
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
    wmma::load_matrix_sync(a, values + (size_t)tile * 16 * 8, 8);
    wmma::load_matrix_sync(b, identity, 16);
    if (convert) {
        for (int t = 0; t < a.num_elements; t++) a.x[t] = wmma::__float_to_tf32(a.x[t]);
        for (int t = 0; t < b.num_elements; t++) b.x[t] = wmma::__float_to_tf32(b.x[t]);
    }
    wmma::fill_fragment(c, 0.0f);
    wmma::mma_sync(c, a, b, c);
    wmma::store_matrix_sync(out + (size_t)tile * 16 * 16, c, 16, wmma::mem_row_major);
}

// ---- the cuBLAS paths ---------------------------------------------------------
// Column-major, as cuBLAS sees memory: C (N x N) = op(A) op(B), alpha 1, beta 0.
static void cublas_gemm(const GpuContext *ctx, cublasOperation_t op_a, const float *A,
                        const float *B, float *C) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, op_a, CUBLAS_OP_N, N, N, N, &alpha, A, CUDA_R_32F, N, B,
                              CUDA_R_32F, N, &beta, C, CUDA_R_32F, N, gpu_gemm_compute_type(ctx),
                              CUBLAS_GEMM_DEFAULT));
}

typedef struct {
    const char *label, *what;
    long long values, matches[CANDIDATES], ties, tie_matches[CANDIDATES];
    char verdict[64];
} PathResult;

// Compares got[i] with the candidates of want[i], i < n, and concludes.
static void judge(PathResult *r, const char *label, const char *what, const float *want,
                  const float *got, size_t n) {
    memset(r, 0, sizeof *r);
    r->label = label;
    r->what = what;
    r->values = (long long)n;
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = float_bits(want[i]), g = float_bits(got[i]);
        uint32_t cand[CANDIDATES];
        candidates(u, cand);
        const int tie = (u & LOW_MASK) == HALF;
        r->ties += tie;
        for (int c = 0; c < CANDIDATES; c++)
            if (g == cand[c]) {
                r->matches[c]++;
                if (tie) r->tie_matches[c]++;
            }
    }
    // The values include patterns that tell every candidate from the others,
    // so at most one matches everything.
    snprintf(r->verdict, sizeof r->verdict, "none of the four");
    for (int c = 0; c < CANDIDATES; c++)
        if (r->matches[c] == r->values) snprintf(r->verdict, sizeof r->verdict, "%s",
                                                 candidate_names[c]);
}

int main(int argc, char **argv) {
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr,
                "usage: %s [CSV]\n"
                "Which rounding TF32 GEMMs apply to their fp32 operands, found with products\n"
                "by the identity; writes one row per path to CSV when given.\n",
                argv[0]);
        return 2;
    }
    if (gpu_device_count() == 0) {
        fprintf(stderr, "tf32_rounding: no CUDA device\n");
        return 1;
    }
    GpuContext ctx;
    gpu_context_init(&ctx, GPU_FIRST_DEVICE);
    ctx.tensor_cores = 1;  // chapter 01: CUBLAS_COMPUTE_32F_FAST_TF32
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int cublas_version = 0, driver = 0;
    CUBLAS_CHECK(cublasGetVersion(ctx.cublas, &cublas_version));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("tf32_rounding: %s, CUDA driver %d, cuBLAS %d, %s\n", prop.name, driver, cublas_version,
           date);
    printf("%d values; low 13 bits cycling through", NVALUES);
    for (size_t p = 0; p < NPATTERNS; p++) printf(" 0x%04X", (unsigned)low_patterns[p]);
    printf("\n\n");

    const size_t bytes = (size_t)NVALUES * sizeof(float);
    float *x = (float *)malloc(bytes), *xt = (float *)malloc(bytes);
    float *eye = (float *)calloc(NVALUES, sizeof(float));
    float *got = (float *)malloc(bytes), *wide = (float *)malloc(2 * bytes);
    if (!x || !xt || !eye || !got || !wide) {
        fprintf(stderr, "tf32_rounding: out of host memory\n");
        return 1;
    }
    fill_values(x);
    for (int i = 0; i < N; i++) eye[(size_t)i * N + i] = 1.0f;
    for (int i = 0; i < N; i++)  // xt = x transposed
        for (int j = 0; j < N; j++) xt[(size_t)j * N + i] = x[(size_t)i * N + j];

    float *d_x = (float *)gpu_malloc(bytes, "values"), *d_eye = (float *)gpu_malloc(bytes, "I");
    float *d_out = (float *)gpu_malloc(2 * bytes, "results");
    CUDA_CHECK(cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_eye, eye, bytes, cudaMemcpyHostToDevice));

    PathResult results[5];
    int nres = 0;

    // ANCHOR: identity_gemm
    // C = I X: column j of C is column j of X, so C's memory is X's.
    cublas_gemm(&ctx, CUBLAS_OP_N, d_eye, d_x, d_out);
    CUDA_CHECK(cudaMemcpy(got, d_out, bytes, cudaMemcpyDeviceToHost));
    judge(&results[nres++], "cublas-nn-left", "cuBLAS TF32, C = I X", x, got, NVALUES);
    // ANCHOR_END: identity_gemm
    // C = X I.
    cublas_gemm(&ctx, CUBLAS_OP_N, d_x, d_eye, d_out);
    CUDA_CHECK(cudaMemcpy(got, d_out, bytes, cudaMemcpyDeviceToHost));
    judge(&results[nres++], "cublas-nn-right", "cuBLAS TF32, C = X I", x, got, NVALUES);
    // C = X^T I: C's memory is X transposed.
    cublas_gemm(&ctx, CUBLAS_OP_T, d_x, d_eye, d_out);
    CUDA_CHECK(cudaMemcpy(got, d_out, bytes, cudaMemcpyDeviceToHost));
    judge(&results[nres++], "cublas-tn-left", "cuBLAS TF32, C = X^T I", xt, got, NVALUES);

    // WMMA: values times the 8 x 16 identity (row-major), 16 x 8 values per warp.
    float identity8x16[8 * 16] = {0};
    for (int k = 0; k < 8; k++) identity8x16[k * 16 + k] = 1.0f;
    float *d_id = (float *)gpu_malloc(sizeof identity8x16, "8 x 16 identity");
    CUDA_CHECK(cudaMemcpy(d_id, identity8x16, sizeof identity8x16, cudaMemcpyHostToDevice));
    const int tiles = NVALUES / (16 * 8), warps_per_block = 8;
    for (int convert = 0; convert <= 1; convert++) {
        wmma_identity_kernel<<<(tiles + warps_per_block - 1) / warps_per_block,
                               32 * warps_per_block>>>(d_out, d_x, d_id, tiles, convert);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(wide, d_out, 2 * bytes, cudaMemcpyDeviceToHost));
        for (int t = 0; t < tiles; t++)  // columns 0-7 of each 16 x 16 result
            for (int m = 0; m < 16; m++)
                for (int n = 0; n < 8; n++)
                    got[((size_t)t * 16 + m) * 8 + n] = wide[((size_t)t * 16 + m) * 16 + n];
        if (convert)
            judge(&results[nres++], "wmma-converted", "WMMA after __float_to_tf32", x, got,
                  NVALUES);
        else
            judge(&results[nres++], "wmma-raw", "WMMA on unconverted fp32", x, got, NVALUES);
    }

    printf("%-16s %-28s %9s %9s %9s %9s %9s  %s\n", "path", "", "exact", "truncated", "nearest",
           "away", "ties", "verdict");
    for (int i = 0; i < nres; i++) {
        const PathResult *r = &results[i];
        printf("%-16s %-28s %9lld %9lld %9lld %9lld %9lld  %s\n", r->label, r->what,
               r->matches[EXACT], r->matches[TRUNCATED], r->matches[NEAREST_EVEN],
               r->matches[NEAREST_AWAY], r->ties, r->verdict);
    }
    printf("\n(columns: how many of the %d outputs equal each candidate; a value whose low bits\n"
           "are zero equals all four. ties: values exactly halfway, where only 'nearest'\n"
           "and 'away' differ. verdict: the candidate that every output equals.)\n",
           NVALUES);

    if (argc == 2) {
        FILE *csv = fopen(argv[1], "w");
        if (!csv) {
            fprintf(stderr, "tf32_rounding: cannot write %s\n", argv[1]);
            return 1;
        }
        fprintf(csv, "label,values,exact,truncated,nearest,away,ties,ties_nearest,ties_away,"
                     "verdict\n");
        for (int i = 0; i < nres; i++) {
            const PathResult *r = &results[i];
            fprintf(csv, "%s,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s\n", r->label, r->values,
                    r->matches[EXACT], r->matches[TRUNCATED], r->matches[NEAREST_EVEN],
                    r->matches[NEAREST_AWAY], r->ties, r->tie_matches[NEAREST_EVEN],
                    r->tie_matches[NEAREST_AWAY], r->verdict);
        }
        fclose(csv);
        printf("wrote %s\n", argv[1]);
    }

    gpu_free(d_x);
    gpu_free(d_eye);
    gpu_free(d_out);
    gpu_free(d_id);
    gpu_context_free(&ctx);
    free(x);
    free(xt);
    free(eye);
    free(got);
    free(wide);
    return 0;
}
