// attention_sweep.cu: chapter 05's demo, and chapter 12's. Causal attention
// at GPT-2's heads (12 heads of 64) and B=16, at T = 256 .. 4096, forward and
// backward, by chapter 04's slots (eager: the (B,NH,T,T) scores written out),
// by chapter 05's two flash versions (v2: mma.sync; v3: wgmma, what chapter
// 05's slots run at heads of 64) and by chapter 12's v4 (the TMA, warp
// specialization: what chapter 12's slots run there): the time of each pass,
// and the memory each keeps for the backward pass besides qkv and out, and
// uses as scratch. PyTorch's scaled_dot_product_attention adds its rows to
// the same file (chapters/05_flash_attention/sdpa_sweep.py); `make demo-05`
// runs both, and `make demo-12` the flash versions at B=16 and 64
// (chapters/12_fast_attention/attention_sweep.sh).
//
//   build/demos/attention_sweep [CSV] [--batch B[,B...]] [--min-seq T] [--max-seq T]
//                               [--flash-only] [--hold-ms MS]
//
// CSV rows are labelled IMPL-PASS-T (flash-v3-forward-1024) at B=16, the
// batch chapter 05's tables name, and IMPL-PASS-T-BN at another batch N
// (flash-v4-forward-1024-B64).
//
// Timing: the pass is captured K times over in a CUDA graph, the graph is
// replayed, and the replay's time between two CUDA events is divided by K;
// the median of REPEATS replays after WARMUP. A graph launches its kernels
// back to back, so a pass of a few microseconds (T = 256) is timed without
// the host's launch overhead, for us and for PyTorch alike. With --hold-ms,
// the graph is first replayed for that long, untimed: a GPU lowers its clock
// after some time at full load, and a short measurement takes the clock that
// the work before it left, so two versions timed after different work are
// timed at different clocks. Held first, every row is timed at the clock the
// GPU keeps under load (chapter 12).
// TFLOP/s counts causal attention's FLOPs as FlashAttention's papers do:
// forward 4 * B*NH*T*T*hs / 2, backward 2.5 times that.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "attention_flash.h"
#include "gpu/gpu_ops.h"
#include "util/util.h"

#define NH 12
#define HS 64
#define K_PER_GRAPH 20
#define WARMUP 3
#define REPEATS 15

#define MAX_BATCHES 8
#define UNSUFFIXED_B 16  // the batch whose rows' labels name no batch

typedef enum { EAGER, FLASH_V2, FLASH_V3, FLASH_V4, NUM_IMPLS } Impl;

typedef struct {
    Impl impl;
    GpuOps ops;
    int B, T;
    floatX *qkv, *out, *att, *dout, *dqkv;
    float *lse, *scratch;
} Run;

__global__ void fill_uniform_kernel(floatX *p, size_t n, unsigned seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;  // a cheap integer hash
        h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
        p[i] = f2x((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

static floatX *alloc_random(size_t n, unsigned seed) {
    floatX *p = (floatX *)gpu_malloc(n * sizeof(floatX), "attention_sweep buffer");
    fill_uniform_kernel<<<1024, 256>>>(p, n, seed);
    CUDA_CHECK(cudaGetLastError());
    return p;
}

static const char *const IMPL_NAMES[] = {"eager", "flash-v2", "flash-v3", "flash-v4"};
static const char *const IMPL_KERNELS[] = {"attention_forward_v1 / attention_backward_v1",
                                           "attention_forward_v2 / attention_backward_v2",
                                           "attention_forward_v3 / attention_backward_v3",
                                           "attention_forward_v4 / attention_backward_v4"};
// The chapter whose slots run each (v2 is called by name).
static const int IMPL_CHAPTERS[] = {4, 5, 5, 12};

// Eager, v3 and v4 through chapter 04's, 05's and 12's slots; v2 by name
// (the flash slots pick v3 and v4 at heads of 64, on a Hopper).
static void forward(const GpuContext *ctx, Run *r) {
    if (r->impl == FLASH_V2)
        attention_forward_v2(ctx, r->out, r->lse, r->qkv, r->B, r->T, NH * HS, NH);
    else
        r->ops.attention_forward(ctx, r->out, r->att, r->lse, r->scratch, r->qkv, r->B, r->T,
                                 NH * HS, NH);
}

static void backward(const GpuContext *ctx, Run *r) {
    if (r->impl == FLASH_V2)
        attention_backward_v2(ctx, r->dqkv, r->scratch, r->dout, r->out, r->qkv, r->lse, r->B,
                              r->T, NH * HS, NH);
    else
        r->ops.attention_backward(ctx, r->dqkv, r->scratch, r->dout, r->out, r->qkv, r->att,
                                  r->lse, r->B, r->T, NH * HS, NH);
}

static int compare_floats(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// The median ms of one pass: K_PER_GRAPH passes captured in one graph,
// replayed for hold_ms before the timed replays.
static double time_pass(GpuContext *ctx, Run *r, void (*pass)(const GpuContext *, Run *),
                        double hold_ms) {
    pass(ctx, r);  // once outside the graph: lazy loading, shared-memory limits
    gpu_stream_sync(ctx, "the pass before capture");
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < K_PER_GRAPH; i++) pass(ctx, r);
    CUDA_CHECK(cudaStreamEndCapture(ctx->stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t start, end;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&end));
    for (const double start_ms = now_ms(); now_ms() - start_ms < hold_ms;) {
        CUDA_CHECK(cudaGraphLaunch(exec, ctx->stream));
        gpu_stream_sync(ctx, "a graph of attention passes, held before timing");
    }
    float ms[REPEATS];
    for (int i = 0; i < WARMUP + REPEATS; i++) {
        CUDA_CHECK(cudaEventRecord(start, ctx->stream));
        CUDA_CHECK(cudaGraphLaunch(exec, ctx->stream));
        CUDA_CHECK(cudaEventRecord(end, ctx->stream));
        gpu_event_sync(ctx, end, "a timed graph of attention passes");
        if (i >= WARMUP) CUDA_CHECK(cudaEventElapsedTime(&ms[i - WARMUP], start, end));
    }
    qsort(ms, REPEATS, sizeof ms[0], compare_floats);
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(end));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return ms[REPEATS / 2] / K_PER_GRAPH;
}

// Every version at one shape (B, T): a row per pass.
static void sweep_shape(GpuContext *ctx, FILE *csv, int B, int T, int flash_only,
                        double hold_ms) {
    const int C = NH * HS;
    const double mib = 1024.0 * 1024.0;
    const size_t N = (size_t)B * T * C, A = (size_t)B * NH * T * T;
    char batch_suffix[16] = "";
    if (B != UNSUFFIXED_B) snprintf(batch_suffix, sizeof batch_suffix, "-B%d", B);
    for (int impl = flash_only ? FLASH_V2 : EAGER; impl < NUM_IMPLS; impl++) {
        // On another GPU the slots would run v2.
        if ((impl == FLASH_V3 || impl == FLASH_V4) && !ctx->hopper) continue;
        const int flash = impl != EAGER;
        Optimizations o = chapter_optimizations(IMPL_CHAPTERS[impl]);
        Run r;
        memset(&r, 0, sizeof r);
        GpuLaunchSettings launch;
        r.ops = gpu_ops_select(&o, &launch);
        gpu_launch_apply(ctx, &launch);  // which turns off the sync after launches
        r.impl = (Impl)impl, r.B = B, r.T = T;
        const size_t scratch = impl == FLASH_V4 ? attention_backward_v4_scratch_floats(B, T, NH)
                               : flash ? attention_backward_v2_scratch_floats(B, T, NH)
                                       : attention_backward_scratch_floats(B, T, C, NH);
        r.qkv = alloc_random(3 * N, 1), r.dout = alloc_random(N, 2);
        r.out = (floatX *)gpu_malloc(N * sizeof(floatX), "out");
        r.dqkv = (floatX *)gpu_malloc(3 * N * sizeof(floatX), "dqkv");
        r.att = flash ? NULL : (floatX *)gpu_malloc(A * sizeof(floatX), "att");
        r.lse = flash ? (float *)gpu_malloc((size_t)B * NH * T * sizeof(float), "lse") : NULL;
        r.scratch = (float *)gpu_malloc(scratch * sizeof(float), "scratch");
        const double kept =
            flash ? (double)B * NH * T * sizeof(float) : (double)A * sizeof(floatX);
        // The eager scratch holds floatX arrays in a buffer sized in floats (attention.h).
        const double scratch_bytes = flash ? (double)scratch * sizeof(float)
                                           : (double)scratch * sizeof(floatX);
        const double fwd_flops = 4.0 * B * NH * (double)T * T * HS / 2;
        const char *name_of_impl = IMPL_NAMES[impl], *kernels = IMPL_KERNELS[impl];
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) forward(ctx, &r);  // the backward pass reads what it kept
            double ms = time_pass(ctx, &r, pass ? backward : forward, hold_ms);
            double flops = pass ? 2.5 * fwd_flops : fwd_flops;
            double tflops = flops / (ms * 1e9);
            const char *name = pass ? "backward" : "forward";
            printf("%-8s %-8s %4d %5d %10.4f %9.1f %10.1f %12.1f\n", name_of_impl, name, B, T,
                   ms, tflops, kept / mib, scratch_bytes / mib);
            if (csv)
                fprintf(csv, "%s-%s-%d%s,%s,%s,%d,%d,%d,%d,%.5f,%.1f,%.1f,%.1f,%s\n",
                        name_of_impl, name, T, batch_suffix, name_of_impl, name, B, T, NH, HS,
                        ms, tflops, kept / mib, scratch_bytes / mib, kernels);
        }
        void *all[] = {r.qkv, r.dout, r.out, r.dqkv, r.att, r.lse, r.scratch};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(all[i]);
    }
}

// "16,64" into batches (at most MAX_BATCHES); their count, or -1.
static int parse_batches(const char *list, int *batches) {
    int n = 0;
    for (const char *p = list; *p;) {
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || b < 1 || b > 1 << 20 || n == MAX_BATCHES || (*end && *end != ','))
            return -1;
        batches[n++] = (int)b;
        p = *end ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    const char *csv_path = NULL;
    int batches[MAX_BATCHES] = {16}, num_batches = 1, min_T = 256, max_T = 4096, flash_only = 0;
    double hold_ms = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            num_batches = parse_batches(argv[++i], batches);
            if (num_batches < 1)
                die("attention_sweep: --batch %s: positive batches, comma-separated (at most %d)",
                    argv[i], MAX_BATCHES);
        } else if (!strcmp(argv[i], "--min-seq") && i + 1 < argc) min_T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-seq") && i + 1 < argc) max_T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--flash-only")) flash_only = 1;
        else if (!strcmp(argv[i], "--hold-ms") && i + 1 < argc) {
            char *end;
            hold_ms = strtod(argv[++i], &end);
            if (end == argv[i] || *end || hold_ms < 0 || hold_ms > 60000)
                die("attention_sweep: --hold-ms %s: milliseconds from 0 to 60000", argv[i]);
        } else if (argv[i][0] != '-' && !csv_path) csv_path = argv[i];
        else die("usage: %s [CSV] [--batch B[,B...]] [--min-seq T] [--max-seq T] [--flash-only] "
                 "[--hold-ms MS]",
                 argv[0]);
    }
    if (min_T < 1 || max_T < 1) die("attention_sweep: --min-seq and --max-seq must be positive");
    if (gpu_device_count() == 0) die("attention_sweep: no CUDA device");
    GpuContext ctx;
    gpu_context_init(&ctx, GPU_FIRST_DEVICE);
    FILE *csv = NULL;
    if (csv_path) {
        csv = fopen(csv_path, "w");
        if (!csv) die("%s: cannot open for writing", csv_path);
        fprintf(csv, "label,impl,pass,B,T,NH,hs,ms,tflops,kept_mib,scratch_mib,kernels\n");
    }
    printf("%-8s %-8s %4s %5s %10s %9s %10s %12s\n", "impl", "pass", "B", "T", "ms", "TFLOP/s",
           "kept MiB", "scratch MiB");
    for (int k = 0; k < num_batches; k++)
        for (int T = min_T; T <= max_T; T *= 2)
            sweep_shape(&ctx, csv, batches[k], T, flash_only, hold_ms);
    if (csv) fclose(csv);
    gpu_context_free(&ctx);
    return 0;
}
