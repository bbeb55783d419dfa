// gpu_context.h: what every launcher needs: the stream it runs on, the cuBLAS
// handle, the run-time switches that change how kernels are launched, and the
// error checks.
//
// A plain C header: the trainer and the tests (C11, built by gcc) include it,
// and so do the .cu files (built by nvcc), which define the functions below
// with C linkage.
//
// Error policy: a failing CUDA or cuBLAS call is a programming error or an
// exhausted device, never bad input, so the checks print where it happened and
// exit(1), as util.h's die() does on the host.
#ifndef GPU_CONTEXT_H
#define GPU_CONTEXT_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- synchronizations, counted (below) -------------------------------------------
typedef enum {
    GPU_SYNC_LAUNCH_CHECK,
    GPU_SYNC_COPY,
    GPU_SYNC_STREAM,
    GPU_SYNC_EVENT,
    GPU_SYNC_DEVICE,
    GPU_SYNC_KINDS
} GpuSyncKind;

typedef struct {
    unsigned long long count[GPU_SYNC_KINDS];
} GpuSyncCounts;

struct MatmulLt;     // matmul_lt.cu's state: cuBLASLt's handle, workspace and plans
struct GpuProfiler;  // profiler.h

// ANCHOR: gpu_context
// Everything a launch needs, for one GPU, and everything that lives as long
// as the GPU is used: its stream, its library handles and caches, its
// counters. Nothing of it is global to the process, so a program can hold one
// context per GPU (chapter 15) or, as the tests do, several on one GPU.
typedef struct {
    int device;            // the CUDA device this context runs on
    int rank, world_size;  // this GPU's place among the run's GPUs: 0 and 1, one GPU
    int sm_count;          // its streaming multiprocessors, for reports
    // 1 where Hopper's own kernels run (wgmma, sm_90a code: chapter 05's
    // attention_forward_v3): a GPU of compute capability 9.0 (H100, H200), a
    // build that has them (GPU_ARCH=90), and GPT2_PORTABLE_KERNELS not set to
    // 1 in the environment (which runs the kernels of every GPU instead).
    int hopper;
    // 1 where chapter 13's FP8 GEMMs run: a GPU with FP8 tensor cores
    // (compute capability 8.9 or later: Ada, Hopper), unless
    // GPT2_PORTABLE_KERNELS=1 (the kernels every GPU runs).
    int fp8;
    cudaStream_t stream;   // every launcher and cuBLAS call runs on it
    cublasHandle_t cublas; // bound to `stream`
    // The parts that change while the context is used, behind pointers, so
    // that launchers, which take the context as const, can still count a
    // wait, mark a profile or cache a GEMM plan in it.
    struct MatmulLt *lt;          // chapter 04's cuBLASLt handle, workspace and plan cache
    struct GpuProfiler *profiler; // the profiler that marks this context's launches, or NULL
    GpuSyncCounts *syncs;         // the host's waits for this context, by kind
    // The chapter switches that change how every launch is made rather than
    // which kernel runs: gpu_ops_select (common/gpu/gpu_ops.c) chooses them,
    // and the model applies them to its context (gpu_launch_apply).
    // Chapters 00-02 synchronize after every launch, so that an error is
    // reported by the launch that caused it (the way PyTorch eager behaves
    // with CUDA_LAUNCH_BLOCKING=1). Chapter 03 turns it off.
    int sync_after_launch;
    // 0: fp32 GEMMs on the fp32 cores (chapter 00). 1: TF32 tensor cores
    // (chapter 01). Read at every GEMM by gpu_gemm_compute_type(). The bf16
    // build ignores it: bf16 GEMMs always run on the tensor cores.
    int tensor_cores;
    // Chapter 11: each cuBLASLt GEMM shape picks its algorithm by timing the
    // heuristic's candidates once, on its first call (matmul_lt.h), instead
    // of taking the heuristic's first. Read when a shape's plan is made.
    int gemm_autotune;
} GpuContext;
// ANCHOR_END: gpu_context

// Binds the context to `device`, creates its stream, its cuBLAS handle, its
// counters and (empty) GEMM plan cache, and sets chapter 00's launch
// settings: sync_after_launch = 1, tensor_cores = 0, gemm_autotune = 0; rank
// 0 of 1. Exits, saying why, on a GPU older than compute capability 8.0 or
// one this build has no code for (the Makefile's GPU_ARCH).
void gpu_context_init(GpuContext *ctx, int device);
// Frees all of it (the GEMM plans, their workspace and padded copies too).
void gpu_context_free(GpuContext *ctx);

// The device a single-GPU program uses: the first one it can see (choose
// another with CUDA_VISIBLE_DEVICES). A run on several GPUs takes each
// rank's from its launcher instead (chapter 15).
#define GPU_FIRST_DEVICE 0

// The number of CUDA devices; 0, silently, where there is no device or no
// driver (so that tests can skip themselves and programs can say why).
int gpu_device_count(void);

// Call after EVERY kernel launch (and cuBLAS call): reports a launch error
// (bad configuration, missing kernel image) always, and, when
// ctx->sync_after_launch is set, waits for the stream and reports an error
// raised while the kernel ran (an illegal address, say). `kernel_name` names
// the culprit in the message, and the kernel in a profile (profiler.h).
void gpu_check_launch(const GpuContext *ctx, const char *kernel_name);

// cudaMemsetAsync(ptr, 0, bytes) and cudaMemcpyAsync on ctx->stream, checked;
// `what` names them in a profile. Neither waits (see the copy's rules below).
void gpu_zero(const GpuContext *ctx, void *ptr, size_t bytes, const char *what);
void gpu_memcpy_async(const GpuContext *ctx, void *dst, const void *src, size_t bytes,
                      enum cudaMemcpyKind kind, const char *what);

// ---- synchronizations, counted -------------------------------------------------
// Every place where the trainer makes the host wait for the device goes
// through one of the functions below, so that the waits can be counted
// (chapter 03 counts them per step: `--count-syncs`). A wait is:
//   GPU_SYNC_LAUNCH_CHECK  the cudaStreamSynchronize of gpu_check_launch when
//                          sync_after_launch is on (chapters 00-02)
//   GPU_SYNC_COPY          a cudaMemcpy between host and device memory: it
//                          returns when the copy is done (device to host), or,
//                          from pageable host memory, first waits for the
//                          work queued before it
//   GPU_SYNC_STREAM, GPU_SYNC_EVENT, GPU_SYNC_DEVICE
//                          cudaStreamSynchronize, cudaEventSynchronize,
//                          cudaDeviceSynchronize
// Kernel launches, cudaEventRecord, cudaMemsetAsync and cudaMemcpyAsync
// between device memory and PINNED host memory do not wait, and are not
// counted. (A cudaMemcpyAsync to pageable host memory does wait, and one
// from pageable memory may, while the driver stages the bytes: the trainer
// makes none in a chapter 03 step.) The counts are the context's.

// The one counter every wait below goes through.
void gpu_count_sync(const GpuContext *ctx, GpuSyncKind kind);
// The counts so far, by kind, and their total; the name of a kind for reports.
GpuSyncCounts gpu_sync_counts(const GpuContext *ctx);
unsigned long long gpu_sync_total(const GpuSyncCounts *c);
const char *gpu_sync_kind_name(GpuSyncKind kind);

// cudaMemcpy, checked and counted (GPU_SYNC_COPY).
void gpu_memcpy_sync(const GpuContext *ctx, void *dst, const void *src, size_t bytes,
                     enum cudaMemcpyKind kind);
// Waits for everything queued on ctx->stream (GPU_SYNC_STREAM), for an event
// (GPU_SYNC_EVENT), for the whole device (GPU_SYNC_DEVICE). A wait is where
// an error raised by any kernel queued before it shows up: `what` names what
// was waited for in the message, which also says how to find the culprit.
void gpu_stream_sync(const GpuContext *ctx, const char *what);
void gpu_event_sync(const GpuContext *ctx, cudaEvent_t event, const char *what);
void gpu_device_sync(const GpuContext *ctx, const char *what);

// cudaMalloc that, on failure, says how many bytes were asked for, for what,
// and how much the device had free; then exits.
void *gpu_malloc(size_t bytes, const char *what);
void gpu_free(void *ptr);  // cudaFree, checked; NULL is fine

// ---- a cold L2 cache, for timing one kernel alone ---------------------------------
// A kernel called again and again finds in the L2 cache what its last call
// left there (50 MB on the H100: two of GPT-2 124M's (B,T,C) tensors in bf16
// at B=16), and reads it at the cache's speed instead of memory's. Chapter
// 11's GEMM autotuning (matmul_lt.cu) and the kernel lab (tools/kernel_lab/)
// flush the cache before each timed call: a write over a buffer of twice its
// size, queued on the stream before the call's first event, so that it is
// not timed. Afterwards the cache is full of the flush's bytes, as in a
// step it is full of what the kernels before wrote.
typedef struct {
    void *buffer;
    size_t bytes;  // twice the device's L2 cache (cudaDevAttrL2CacheSize)
} GpuL2Flush;

void gpu_l2_flush_init(const GpuContext *ctx, GpuL2Flush *flush);
// cudaMemsetAsync of the whole buffer to the byte `value` on ctx->stream;
// nothing waits. The callers write another value each time.
void gpu_l2_flush(const GpuContext *ctx, const GpuL2Flush *flush, int value);
void gpu_l2_flush_free(GpuL2Flush *flush);

// The compute type of every GEMM (matmul and attention), whose operands are
// floatX (FLOATX_CUDA_TYPE): one branch on the build's precision.
#ifdef PRECISION_BF16
// ANCHOR: gemm_compute_type_bf16
// Chapter 02: bf16 operands. CUBLAS_COMPUTE_32F with 16-bit inputs runs on
// the tensor cores and adds the products in fp32; only C is rounded to bf16,
// once. (TF32 is a way of feeding fp32 operands to the tensor cores: cuBLAS
// accepts CUBLAS_COMPUTE_32F_FAST_TF32 with fp32 operands only, so the
// tensor_cores switch has nothing to choose here.)
static inline cublasComputeType_t gpu_gemm_compute_type(const GpuContext *ctx) {
    (void)ctx;
    return CUBLAS_COMPUTE_32F;
}
// ANCHOR_END: gemm_compute_type_bf16
#else
// ANCHOR: gemm_compute_type
// The compute type of every fp32 GEMM (matmul and attention). This is
// chapter 01's switch: the same cuBLAS calls, with TF32 tensor cores allowed.
static inline cublasComputeType_t gpu_gemm_compute_type(const GpuContext *ctx) {
    return ctx->tensor_cores ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}
// ANCHOR_END: gemm_compute_type
#endif

// Reporting functions behind the checks below; they do not return.
void gpu_fail_cuda(cudaError_t err, const char *call, const char *file, int line)
    __attribute__((noreturn));
void gpu_fail_cublas(cublasStatus_t status, const char *call, const char *file, int line)
    __attribute__((noreturn));

// CUDA_CHECK(cudaMemcpy(...)): a runtime call that must succeed.
#define CUDA_CHECK(call)                                                                \
    do {                                                                                \
        cudaError_t cuda_check_err_ = (call);                                           \
        if (cuda_check_err_ != cudaSuccess)                                             \
            gpu_fail_cuda(cuda_check_err_, #call, __FILE__, __LINE__);                  \
    } while (0)

// CUBLAS_CHECK(cublasGemmEx(...)): a cuBLAS call that must succeed.
#define CUBLAS_CHECK(call)                                                              \
    do {                                                                                \
        cublasStatus_t cublas_check_status_ = (call);                                   \
        if (cublas_check_status_ != CUBLAS_STATUS_SUCCESS)                              \
            gpu_fail_cublas(cublas_check_status_, #call, __FILE__, __LINE__);           \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
