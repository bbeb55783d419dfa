// gemm_shapes.cu: chapter 01's demo. Every GEMM of one GPT-2 (124M) training
// step, at the model's own shapes, timed on the fp32 cores and on the TF32
// tensor cores: the same cuBLAS calls as kernels/matmul.cu and
// kernels/attention.cu, with the compute type from gpu_gemm_compute_type(), the
// trainer's one switch. The forward GEMMs of the linear layers are also timed
// with the exercise's kernel, tiled_gemm_tf32 (solutions/01_tensor_cores/, or
// exercises/ with `make demo-01 EXERCISES=1`).
//
//   build/demos/gemm_shapes [CSV] [--batch B] [--seq T] [--repeats N] [--warmup N]
//                           [--tf32-peak TFLOPS] [--fp32-peak TFLOPS]
//
// Each GEMM runs --warmup times untimed, then --repeats times, each timed by
// its own pair of CUDA events; the median is reported. Inputs are uniform in
// [-1, 1). TFLOP/s counts 2*M*N*K per GEMM. The percentages are of the
// datasheet peaks of an H100 SXM (dense TF32 tensor cores 494.7 TFLOP/s, fp32
// cores 66.9), or of the peaks given on the command line.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_context.h"
#include "tiled_gemm.h"

// GPT-2 124M.
#define L 12
#define C 768
#define NH 12
#define V 50257

// H100 SXM5 datasheet peaks, dense (no 2:4 sparsity), TFLOP/s.
#define H100_SXM_TF32_PEAK 494.7
#define H100_SXM_FP32_PEAK 66.9

typedef enum { FORWARD, DINP, DWEIGHT, ATT_SCORES, ATT_OUT, ATT_DATT, ATT_DV, ATT_DQ, ATT_DK } Op;

typedef struct {
    const char *label;  // the CSV's first column
    const char *what;   // for the table
    Op op;
    int in, out;        // a linear layer's channels: weight (out, in)
    int per_step;       // how many times one training step runs it
} Gemm;

typedef struct {
    float *x, *w, *y, *dy, *dx, *dw;  // a linear layer's tensors
    float *q, *k, *v, *o;             // (B*NH, T, hs) each
    float *tt_in, *tt_out;            // (B*NH, T, T) each
} Buffers;

static int B = 16, T = 1024;

// ---- random inputs ---------------------------------------------------------
__global__ void fill_uniform_kernel(float *p, size_t n, unsigned seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;  // a cheap integer hash
        h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
        p[i] = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

static float *alloc_random(size_t n, unsigned seed) {
    float *p = (float *)gpu_malloc(n * sizeof(float), "gemm_shapes buffer");
    fill_uniform_kernel<<<1024, 256>>>(p, n, seed);
    CUDA_CHECK(cudaGetLastError());
    return p;
}

// ---- the GEMMs, as the trainer calls them --------------------------------------
// Column-major cuBLAS on row-major memory: see kernels/matmul.h.
// ANCHOR: demo_gemm
static void gemm(const GpuContext *ctx, cublasOperation_t op_a, cublasOperation_t op_b, int m,
                 int n, int k, const float *A, int lda, const float *Bm, int ldb, float beta,
                 float *Cm, int ldc) {
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, op_a, op_b, m, n, k, &alpha, A, CUDA_R_32F, lda, Bm,
                              CUDA_R_32F, ldb, &beta, Cm, CUDA_R_32F, ldc,
                              gpu_gemm_compute_type(ctx), CUBLAS_GEMM_DEFAULT));
}
// ANCHOR_END: demo_gemm

static void batched(const GpuContext *ctx, cublasOperation_t op_a, cublasOperation_t op_b, int m,
                    int n, int k, const float *A, int lda, long long sa, const float *Bm, int ldb,
                    long long sb, float *Cm, int ldc, long long sc) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->cublas, op_a, op_b, m, n, k, &alpha, A,
                                            CUDA_R_32F, lda, sa, Bm, CUDA_R_32F, ldb, sb, &beta,
                                            Cm, CUDA_R_32F, ldc, sc, B * NH,
                                            gpu_gemm_compute_type(ctx), CUBLAS_GEMM_DEFAULT));
}

// One call of g: cuBLAS (use_tiled = 0) or the exercise's kernel (FORWARD only).
static void run(const GpuContext *ctx, const Gemm *g, const Buffers *b, int use_tiled) {
    const int BT = B * T, hs = C / NH;
    const long long tt = (long long)T * T, ths = (long long)T * hs;
    switch (g->op) {
    case FORWARD:  // y = x @ w^T (matmul_forward_v1)
        if (use_tiled)
            tiled_gemm_tf32(ctx, b->y, b->x, b->w, BT, g->out, g->in);
        else
            gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, g->out, BT, g->in, b->w, g->in, b->x, g->in, 0.0f,
                 b->y, g->out);
        break;
    case DINP:  // dx += dy @ w (matmul_backward_v1)
        gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, g->in, BT, g->out, b->w, g->in, b->dy, g->out, 1.0f,
             b->dx, g->in);
        break;
    case DWEIGHT:  // dw += dy^T @ x (matmul_backward_v1)
        gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, g->in, g->out, BT, b->x, g->in, b->dy, g->out, 1.0f,
             b->dw, g->in);
        break;
    // attention_forward_v1 and attention_backward_v1, per head:
    case ATT_SCORES:  // preatt = q @ k^T
        batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, b->k, hs, ths, b->q, hs, ths, b->tt_out,
                T, tt);
        break;
    case ATT_OUT:  // y = att @ v
        batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, b->v, hs, ths, b->tt_in, T, tt, b->o,
                hs, ths);
        break;
    case ATT_DATT:  // datt = dy @ v^T
        batched(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, b->v, hs, ths, b->q, hs, ths, b->tt_out,
                T, tt);
        break;
    case ATT_DV:  // dv = att^T @ dy
        batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, b->q, hs, ths, b->tt_in, T, tt, b->o,
                hs, ths);
        break;
    case ATT_DQ:  // dq = dpre @ k
        batched(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, b->k, hs, ths, b->tt_in, T, tt, b->o,
                hs, ths);
        break;
    case ATT_DK:  // dk = dpre^T @ q
        batched(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, b->q, hs, ths, b->tt_in, T, tt, b->o,
                hs, ths);
        break;
    }
}

// The product's shape in row-major terms: out (M, N) = sum over K, `batch` times.
static void shape_of(const Gemm *g, int *M, int *N, int *K, int *batch) {
    const int BT = B * T, hs = C / NH;
    *batch = 1;
    switch (g->op) {
    case FORWARD: *M = BT, *N = g->out, *K = g->in; return;
    case DINP: *M = BT, *N = g->in, *K = g->out; return;
    case DWEIGHT: *M = g->out, *N = g->in, *K = BT; return;
    case ATT_SCORES: case ATT_DATT: *M = T, *N = T, *K = hs, *batch = B * NH; return;
    default: *M = T, *N = hs, *K = T, *batch = B * NH; return;
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// Median milliseconds of `repeats` timed calls after `warmup` untimed ones.
static double time_ms(const GpuContext *ctx, const Gemm *g, const Buffers *b, int use_tiled,
                      int warmup, int repeats) {
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    float *ms = (float *)malloc(repeats * sizeof(float));
    for (int i = 0; i < warmup; i++) run(ctx, g, b, use_tiled);
    for (int i = 0; i < repeats; i++) {
        CUDA_CHECK(cudaEventRecord(start, ctx->stream));
        run(ctx, g, b, use_tiled);
        CUDA_CHECK(cudaEventRecord(stop, ctx->stream));
        CUDA_CHECK(cudaEventSynchronize(stop));
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], start, stop));
    }
    qsort(ms, repeats, sizeof(float), cmp_float);
    const double median = repeats % 2 ? ms[repeats / 2] : 0.5 * (ms[repeats / 2 - 1] + ms[repeats / 2]);
    free(ms);
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return median;
}

static void usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [CSV] [--batch B] [--seq T] [--repeats N] [--warmup N]\n"
            "          [--tf32-peak TFLOPS] [--fp32-peak TFLOPS]\n"
            "Times every GEMM of a GPT-2 (124M) training step in fp32 and in TF32 and\n"
            "writes the table to CSV when given.\n",
            prog);
    exit(2);
}

// One summary row: sums of per-step milliseconds and FLOPs over a set of rows.
typedef struct {
    double gflop, fp32_ms, tf32_ms;
} Sum;

static void print_row(FILE *csv, const char *label, const char *what, const char *shape,
                      int have_shape, int M, int N, int K, int batch, int per_step, double gflop,
                      double fp32_ms, double tf32_ms, double tiled_ms, double tf32_peak,
                      double fp32_peak) {
    const double fp32_tf = gflop / fp32_ms, tf32_tf = gflop / tf32_ms;  // GFLOP/ms = TFLOP/s
    const double tiled_tf = tiled_ms > 0 ? gflop / tiled_ms : 0;
    char tiled[32] = "";
    if (tiled_ms > 0) snprintf(tiled, sizeof tiled, "%7.1f", tiled_tf);
    printf("%-26s %-28s %9.1f %9.3f %9.3f %7.1f %7.1f %5.1f%% %5.1f%% %6.2fx %7s\n", what, shape,
           gflop, fp32_ms, tf32_ms, fp32_tf, tf32_tf, 100 * fp32_tf / fp32_peak,
           100 * tf32_tf / tf32_peak, fp32_ms / tf32_ms, tiled);
    if (!csv) return;
    fprintf(csv, "%s,", label);
    if (have_shape)
        fprintf(csv, "%d,%d,%d,%d,%d,", M, N, K, batch, per_step);
    else
        fprintf(csv, ",,,,,");
    fprintf(csv, "%.1f,%.3f,%.3f,", gflop, fp32_ms, tf32_ms);
    if (tiled_ms > 0) fprintf(csv, "%.3f", tiled_ms);
    fprintf(csv, ",%.1f,%.1f,", fp32_tf, tf32_tf);
    if (tiled_ms > 0) fprintf(csv, "%.1f", tiled_tf);
    fprintf(csv, ",%.2f,%.4f,%.4f\n", fp32_ms / tf32_ms, fp32_tf / fp32_peak, tf32_tf / tf32_peak);
}

int main(int argc, char **argv) {
    const char *csv_path = NULL;
    int warmup = 5, repeats = 20;
    double tf32_peak = H100_SXM_TF32_PEAK, fp32_peak = H100_SXM_FP32_PEAK;
    int peaks_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (csv_path) usage(argv[0]);
            csv_path = a;
            continue;
        }
        if (i + 1 >= argc) usage(argv[0]);
        const char *v = argv[++i];
        if (!strcmp(a, "--batch")) B = atoi(v);
        else if (!strcmp(a, "--seq")) T = atoi(v);
        else if (!strcmp(a, "--repeats")) repeats = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--tf32-peak")) tf32_peak = atof(v), peaks_given = 1;
        else if (!strcmp(a, "--fp32-peak")) fp32_peak = atof(v), peaks_given = 1;
        else usage(argv[0]);
    }
    if (B < 1 || T < 1 || repeats < 1 || warmup < 0 || tf32_peak <= 0 || fp32_peak <= 0)
        usage(argv[0]);
    if (gpu_device_count() == 0) {
        fprintf(stderr, "gemm_shapes: no CUDA device\n");
        return 1;
    }

    GpuContext ctx;
    gpu_context_init(&ctx, GPU_FIRST_DEVICE);
    ctx.sync_after_launch = 0;  // the events time the GEMMs alone
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int cublas_version = 0, driver = 0;
    CUBLAS_CHECK(cublasGetVersion(ctx.cublas, &cublas_version));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    printf("gemm_shapes: %s, %d SMs, CUDA driver %d, cuBLAS %d, %s\n", prop.name,
           prop.multiProcessorCount, driver, cublas_version, date);
    printf("GPT-2 124M: L=%d C=%d NH=%d V=%d; B=%d T=%d (B*T = %d rows); median of %d after %d "
           "warm-ups\n",
           L, C, NH, V, B, T, B * T, repeats, warmup);
    printf("fp32: CUBLAS_COMPUTE_32F (chapter 00); tf32: CUBLAS_COMPUTE_32F_FAST_TF32 (chapter "
           "01); tiled: tiled_gemm_tf32, the exercise\n");
    if (peaks_given)
        printf("peaks (given): TF32 tensor cores %.1f TFLOP/s, fp32 cores %.1f TFLOP/s\n",
               tf32_peak, fp32_peak);
    else
        printf("peaks (H100 SXM datasheet, dense): TF32 tensor cores %.1f TFLOP/s, fp32 cores "
               "%.1f TFLOP/s%s\n",
               tf32_peak, fp32_peak,
               strstr(prop.name, "H100") ? "" : "  (NOT this GPU: pass --tf32-peak/--fp32-peak)");
    printf("\n");

    FILE *csv = NULL;
    if (csv_path) {
        csv = fopen(csv_path, "w");
        if (!csv) {
            fprintf(stderr, "gemm_shapes: cannot write %s\n", csv_path);
            return 1;
        }
        fprintf(csv, "label,M,N,K,batch,per_step,gflop,fp32_ms,tf32_ms,tiled_ms,fp32_tflops,"
                     "tf32_tflops,tiled_tflops,speedup,fp32_of_peak,tf32_of_peak\n");
    }
    printf("%-26s %-28s %9s %9s %9s %7s %7s %6s %6s %7s %7s\n", "GEMM", "M x N x K (x batch)",
           "GFLOP", "fp32 ms", "tf32 ms", "fp32 TF", "tf32 TF", "%fp32", "%tf32", "speedup",
           "tiled TF");

    static const struct {
        const char *name;
        int in, out, per_step;
    } layers[] = {
        {"qkv", C, 3 * C, L}, {"attproj", C, C, L}, {"fc", C, 4 * C, L},
        {"fcproj", 4 * C, C, L}, {"lmhead", C, V, 1},
    };
    static const struct {
        Op op;
        const char *suffix, *what;
    } passes[] = {{FORWARD, "fwd", "forward"}, {DINP, "dinp", "backward dinp"},
                  {DWEIGHT, "dweight", "backward dweight"}};
    static const struct {
        Op op;
        const char *label, *what;
    } attention[] = {
        {ATT_SCORES, "attn-scores-fwd", "attn q @ k^T"}, {ATT_OUT, "attn-out-fwd", "attn att @ v"},
        {ATT_DATT, "attn-datt", "attn bwd dy @ v^T"}, {ATT_DV, "attn-dv", "attn bwd att^T @ dy"},
        {ATT_DQ, "attn-dq", "attn bwd dpre @ k"}, {ATT_DK, "attn-dk", "attn bwd dpre^T @ q"},
    };

    const size_t BT = (size_t)B * T;
    Sum linear = {0, 0, 0}, attn = {0, 0, 0};
    unsigned seed = 1;
    for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++) {
        Buffers b;
        memset(&b, 0, sizeof b);
        const int in = layers[li].in, out = layers[li].out;
        b.x = alloc_random(BT * in, seed++);
        b.w = alloc_random((size_t)out * in, seed++);
        b.dy = alloc_random(BT * out, seed++);
        b.y = alloc_random(BT * out, seed++);
        b.dx = alloc_random(BT * in, seed++);
        b.dw = alloc_random((size_t)out * in, seed++);
        for (size_t pi = 0; pi < sizeof passes / sizeof passes[0]; pi++) {
            Gemm g = {NULL, NULL, passes[pi].op, in, out, layers[li].per_step};
            char label[64], what[64], shape[64];
            snprintf(label, sizeof label, "%s-%s", layers[li].name, passes[pi].suffix);
            snprintf(what, sizeof what, "%s %s", layers[li].name, passes[pi].what);
            int M, N, K, batch;
            shape_of(&g, &M, &N, &K, &batch);
            snprintf(shape, sizeof shape, "%d x %d x %d", M, N, K);
            const double gflop = 2.0 * M * N * K * batch / 1e9;
            ctx.tensor_cores = 0;
            const double fp32_ms = time_ms(&ctx, &g, &b, 0, warmup, repeats);
            ctx.tensor_cores = 1;
            const double tf32_ms = time_ms(&ctx, &g, &b, 0, warmup, repeats);
            const double tiled_ms = g.op == FORWARD ? time_ms(&ctx, &g, &b, 1, warmup, repeats) : 0;
            print_row(csv, label, what, shape, 1, M, N, K, batch, g.per_step, gflop, fp32_ms,
                      tf32_ms, tiled_ms, tf32_peak, fp32_peak);
            linear.gflop += g.per_step * gflop;
            linear.fp32_ms += g.per_step * fp32_ms;
            linear.tf32_ms += g.per_step * tf32_ms;
        }
        float *bufs[] = {b.x, b.w, b.dy, b.y, b.dx, b.dw};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(bufs[i]);
    }

    {
        Buffers b;
        memset(&b, 0, sizeof b);
        const size_t per_head = BT * C, scores = (size_t)B * NH * T * T;
        b.q = alloc_random(per_head, seed++);
        b.k = alloc_random(per_head, seed++);
        b.v = alloc_random(per_head, seed++);
        b.o = alloc_random(per_head, seed++);
        b.tt_in = alloc_random(scores, seed++);
        b.tt_out = alloc_random(scores, seed++);
        for (size_t ai = 0; ai < sizeof attention / sizeof attention[0]; ai++) {
            Gemm g = {attention[ai].label, attention[ai].what, attention[ai].op, 0, 0, L};
            int M, N, K, batch;
            shape_of(&g, &M, &N, &K, &batch);
            char shape[64];
            snprintf(shape, sizeof shape, "%d x %d x %d x %d", M, N, K, batch);
            const double gflop = 2.0 * M * N * K * batch / 1e9;
            ctx.tensor_cores = 0;
            const double fp32_ms = time_ms(&ctx, &g, &b, 0, warmup, repeats);
            ctx.tensor_cores = 1;
            const double tf32_ms = time_ms(&ctx, &g, &b, 0, warmup, repeats);
            print_row(csv, g.label, g.what, shape, 1, M, N, K, batch, g.per_step, gflop, fp32_ms,
                      tf32_ms, 0, tf32_peak, fp32_peak);
            attn.gflop += g.per_step * gflop;
            attn.fp32_ms += g.per_step * fp32_ms;
            attn.tf32_ms += g.per_step * tf32_ms;
        }
        float *bufs[] = {b.q, b.k, b.v, b.o, b.tt_in, b.tt_out};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_free(bufs[i]);
    }

    printf("\nper training step (each row times how often a step runs it):\n");
    print_row(csv, "step-linear", "all linear layers", "", 0, 0, 0, 0, 0, 0, linear.gflop,
              linear.fp32_ms, linear.tf32_ms, 0, tf32_peak, fp32_peak);
    print_row(csv, "step-attention", "all attention GEMMs", "", 0, 0, 0, 0, 0, 0, attn.gflop,
              attn.fp32_ms, attn.tf32_ms, 0, tf32_peak, fp32_peak);
    print_row(csv, "step-all", "every GEMM of a step", "", 0, 0, 0, 0, 0, 0,
              linear.gflop + attn.gflop, linear.fp32_ms + attn.fp32_ms,
              linear.tf32_ms + attn.tf32_ms, 0, tf32_peak, fp32_peak);
    if (csv) {
        if (fclose(csv) != 0) {
            fprintf(stderr, "gemm_shapes: error writing %s\n", csv_path);
            return 1;
        }
        printf("\nwrote %s\n", csv_path);
    }
    gpu_context_free(&ctx);
    return 0;
}
