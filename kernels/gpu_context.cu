// gpu_context.cu: see gpu_context.h.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_context.h"
#include "matmul_lt.h"
#include "profiler.h"
#include "util/util.h"

extern "C" void gpu_fail_cuda(cudaError_t err, const char *call, const char *file, int line) {
    fprintf(stderr, "%s:%d: CUDA error %s (%s) in %s\n", file, line, cudaGetErrorName(err),
            cudaGetErrorString(err), call);
    exit(1);
}

extern "C" void gpu_fail_cublas(cublasStatus_t status, const char *call, const char *file,
                                int line) {
    fprintf(stderr, "%s:%d: cuBLAS error %s in %s\n", file, line, cublasGetStatusString(status),
            call);
    exit(1);
}

extern "C" int gpu_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        // No driver or no device: not an error for a caller that only asks.
        // Clear it so that it does not resurface at the next unrelated check.
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

// ANCHOR: device_checks
// A kernel that does nothing: whether the driver finds code for the device
// in this build is asked of it.
__global__ void build_probe_kernel(void) {}

// The GPU must be one the code runs on: compute capability 8.0 at least
// (bf16 and TF32 tensor cores, cp.async), and covered by this build, which
// holds machine code for GPU_BUILD_ARCH and PTX that the driver compiles for
// a newer GPU, never an older one.
static void check_device_runs_build(int device, int major, int minor) {
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    const char *name = prop.name;
    if (major < 8) {
        fprintf(stderr, "error: GPU %d (%s) has compute capability %d.%d: every chapter needs "
                        "8.0 or newer (bf16 and TF32 tensor cores, cp.async): an A100, A10, L4, "
                        "RTX 30 or 40 series, H100 or newer\n", device, name, major, minor);
        exit(1);
    }
    cudaFuncAttributes attr;
    const cudaError_t err = cudaFuncGetAttributes(&attr, build_probe_kernel);
    if (err == cudaSuccess) return;
    (void)cudaGetLastError();
    fprintf(stderr, "error: this build is for compute capability %d.%d (GPU_ARCH=%d), and GPU %d "
                    "(%s) is %d.%d: %s. Rebuild for it: `make clean && make` builds for the GPU "
                    "present, or make GPU_ARCH=%d%d\n", GPU_BUILD_ARCH / 10, GPU_BUILD_ARCH % 10,
            GPU_BUILD_ARCH, device, name, major, minor, cudaGetErrorString(err), major, minor);
    exit(1);
}

// Hopper's own kernels (wgmma, sm_90a: attention_forward_v3) run where the
// build has them and the GPU is 9.0, unless GPT2_PORTABLE_KERNELS=1 asks for
// the kernels every GPU runs (v2), as the tests do to run those on a Hopper.
static int runs_hopper_kernels(int major, int minor) {
#ifdef WITH_WGMMA
    const char *portable = getenv("GPT2_PORTABLE_KERNELS");
    return major == 9 && minor == 0 && !(portable && !strcmp(portable, "1"));
#else
    (void)major, (void)minor;
    return 0;
#endif
}
// ANCHOR_END: device_checks

// FP8 tensor cores: compute capability 8.9 (Ada) and later.
static int runs_fp8_gemms(int major, int minor) {
    const char *portable = getenv("GPT2_PORTABLE_KERNELS");
    if (portable && !strcmp(portable, "1")) return 0;
    return major > 8 || (major == 8 && minor >= 9);
}

extern "C" void gpu_context_init(GpuContext *ctx, int device) {
    memset(ctx, 0, sizeof *ctx);
    ctx->device = device;
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, device));
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    check_device_runs_build(device, major, minor);
    ctx->hopper = runs_hopper_kernels(major, minor);
    ctx->fp8 = runs_fp8_gemms(major, minor);
    ctx->rank = 0;
    ctx->world_size = 1;
    ctx->syncs = (GpuSyncCounts *)xcalloc(1, sizeof *ctx->syncs);
    ctx->lt = matmul_lt_new();
    // A blocking stream (not cudaStreamNonBlocking): plain cudaMemcpy and
    // cudaMemset, which run on the legacy default stream, stay ordered with
    // our kernels. Chapter 08 brings streams that overlap on purpose.
    CUDA_CHECK(cudaStreamCreate(&ctx->stream));
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
    // Both are cuBLAS's defaults, stated so the reader sees them: the math
    // mode lets each call's compute type decide whether tensor cores may be
    // used (see gpu_gemm_compute_type), and routines that would need atomics
    // to be fast must not use them, which keeps every GEMM bit-reproducible
    // run to run on one GPU model and cuBLAS version.
    CUBLAS_CHECK(cublasSetMathMode(ctx->cublas, CUBLAS_DEFAULT_MATH));
    CUBLAS_CHECK(cublasSetAtomicsMode(ctx->cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
    ctx->sync_after_launch = 1;
    ctx->tensor_cores = 0;
    ctx->gemm_autotune = 0;
}

extern "C" void gpu_context_free(GpuContext *ctx) {
    matmul_lt_free(ctx->lt);  // chapter 04's cached GEMM plans
    if (ctx->cublas) CUBLAS_CHECK(cublasDestroy(ctx->cublas));
    if (ctx->stream) CUDA_CHECK(cudaStreamDestroy(ctx->stream));
    free(ctx->syncs);
    memset(ctx, 0, sizeof *ctx);
}

extern "C" void gpu_check_launch(const GpuContext *ctx, const char *kernel_name) {
    // A launch that could not start (too many threads, no image for this GPU)
    // is reported here at once, whether we synchronize or not.
    // ANCHOR: check_launch
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "%s: launch failed: %s (%s)\n", kernel_name, cudaGetErrorName(err),
                cudaGetErrorString(err));
        exit(1);
    }
    gpu_profile_mark(ctx, kernel_name);
    if (!ctx->sync_after_launch) return;
    // A fault while the kernel runs only shows up once we wait for it. Without
    // this wait it would surface at some later call, blaming the wrong kernel.
    gpu_count_sync(ctx, GPU_SYNC_LAUNCH_CHECK);
    err = cudaStreamSynchronize(ctx->stream);
    gpu_profile_after_wait(ctx);
    if (err != cudaSuccess) {
        fprintf(stderr, "%s: failed while running: %s (%s)\n", kernel_name, cudaGetErrorName(err),
                cudaGetErrorString(err));
        exit(1);
    }
    // ANCHOR_END: check_launch
}

// ---- synchronizations, counted ----------------------------------------------

extern "C" void gpu_count_sync(const GpuContext *ctx, GpuSyncKind kind) {
    ctx->syncs->count[kind]++;
}

extern "C" GpuSyncCounts gpu_sync_counts(const GpuContext *ctx) { return *ctx->syncs; }

extern "C" unsigned long long gpu_sync_total(const GpuSyncCounts *c) {
    unsigned long long total = 0;
    for (int k = 0; k < GPU_SYNC_KINDS; k++) total += c->count[k];
    return total;
}

extern "C" const char *gpu_sync_kind_name(GpuSyncKind kind) {
    static const char *const names[GPU_SYNC_KINDS] = {"launch checks", "copies", "stream",
                                                      "event", "device"};
    return (unsigned)kind < GPU_SYNC_KINDS ? names[kind] : "?";
}

extern "C" void gpu_memcpy_sync(const GpuContext *ctx, void *dst, const void *src, size_t bytes,
                                cudaMemcpyKind kind) {
    gpu_count_sync(ctx, GPU_SYNC_COPY);
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
    gpu_profile_after_wait(ctx);
}

extern "C" void gpu_memcpy_async(const GpuContext *ctx, void *dst, const void *src, size_t bytes,
                                 cudaMemcpyKind kind, const char *what) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, ctx->stream));
    gpu_profile_mark(ctx, what);
}

extern "C" void gpu_zero(const GpuContext *ctx, void *ptr, size_t bytes, const char *what) {
    CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, ctx->stream));
    gpu_profile_mark(ctx, what);
}

// Without sync_after_launch, a kernel that faults is reported at the next
// wait, whichever it is: say so, and how to find the kernel.
static void fail_at_wait(cudaError_t err, const char *wait, const char *what) {
    fprintf(stderr,
            "CUDA error %s (%s) in %s, waiting for %s: a kernel queued since the last wait "
            "failed; --no-sync-avoidance (or CUDA_LAUNCH_BLOCKING=1) reports it at its launch\n",
            cudaGetErrorName(err), cudaGetErrorString(err), wait, what);
    exit(1);
}

extern "C" void gpu_stream_sync(const GpuContext *ctx, const char *what) {
    gpu_count_sync(ctx, GPU_SYNC_STREAM);
    cudaError_t err = cudaStreamSynchronize(ctx->stream);
    gpu_profile_after_wait(ctx);
    if (err != cudaSuccess) fail_at_wait(err, "cudaStreamSynchronize", what);
}

extern "C" void gpu_event_sync(const GpuContext *ctx, cudaEvent_t event, const char *what) {
    gpu_count_sync(ctx, GPU_SYNC_EVENT);
    cudaError_t err = cudaEventSynchronize(event);
    gpu_profile_after_wait(ctx);
    if (err != cudaSuccess) fail_at_wait(err, "cudaEventSynchronize", what);
}

extern "C" void gpu_device_sync(const GpuContext *ctx, const char *what) {
    gpu_count_sync(ctx, GPU_SYNC_DEVICE);
    cudaError_t err = cudaDeviceSynchronize();
    gpu_profile_after_wait(ctx);
    if (err != cudaSuccess) fail_at_wait(err, "cudaDeviceSynchronize", what);
}

extern "C" void *gpu_malloc(size_t bytes, const char *what) {
    void *ptr = NULL;
    cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_bytes = 0, total_bytes = 0;
        cudaMemGetInfo(&free_bytes, &total_bytes);
        const double gib = 1024.0 * 1024.0 * 1024.0;
        fprintf(stderr,
                "gpu_malloc: cannot allocate %zu bytes (%.3f GiB) for %s: %s; "
                "the device has %.3f GiB free of %.3f GiB\n",
                bytes, bytes / gib, what, cudaGetErrorString(err), free_bytes / gib,
                total_bytes / gib);
        exit(1);
    }
    return ptr;
}

extern "C" void gpu_free(void *ptr) {
    if (ptr) CUDA_CHECK(cudaFree(ptr));
}

extern "C" void gpu_l2_flush_init(const GpuContext *ctx, GpuL2Flush *flush) {
    int l2_bytes = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, ctx->device));
    flush->bytes = 2 * (size_t)l2_bytes;
    flush->buffer = flush->bytes ? gpu_malloc(flush->bytes, "a buffer that flushes the L2 cache")
                                 : NULL;
}

extern "C" void gpu_l2_flush(const GpuContext *ctx, const GpuL2Flush *flush, int value) {
    if (flush->bytes) CUDA_CHECK(cudaMemsetAsync(flush->buffer, value, flush->bytes, ctx->stream));
}

extern "C" void gpu_l2_flush_free(GpuL2Flush *flush) {
    gpu_free(flush->buffer);
    flush->buffer = NULL, flush->bytes = 0;
}
