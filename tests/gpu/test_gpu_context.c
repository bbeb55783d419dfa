// test_gpu_context.c: the context's starting state, the one switch that
// chapter 01 flips, the synchronization counter of chapter 03, that two
// contexts share nothing, and the L2 flush that timings start from.
#include "gpu_test.h"
#include "matmul_lt.h"
#include "profiler.h"
#include "softmax_crossentropy.h"

TestSuite(gpu_context, .init = gpu_test_init, .fini = gpu_test_fini);

Test(gpu_context, starts_with_chapter_00_switches) {
    cr_assert_gt(gpu_device_count(), 0);
    cr_assert_eq(gt_ctx.sync_after_launch, 1);
    cr_assert_eq(gt_ctx.tensor_cores, 0);
    cr_assert_gt(gt_ctx.sm_count, 0);
    cr_assert_eq(gpu_gemm_compute_type(&gt_ctx), CUBLAS_COMPUTE_32F);
    gt_ctx.tensor_cores = 1;
#ifdef PRECISION_BF16
    // bf16 operands: fp32 sums on the tensor cores, whatever the switch says.
    cr_assert_eq(gpu_gemm_compute_type(&gt_ctx), CUBLAS_COMPUTE_32F);
#else
    cr_assert_eq(gpu_gemm_compute_type(&gt_ctx), CUBLAS_COMPUTE_32F_FAST_TF32);
#endif
}

// Every wait goes through the counter, by kind; launches and asynchronous
// copies are not waits. gpu_check_launch waits (and counts) only while
// sync_after_launch is on, as in chapters 00-02.
Test(gpu_context, counts_each_synchronization_by_kind) {
    const size_t n = 1000;
    float *d = gt_device_alloc(n * sizeof(float), "values"), *host;
    // Pinned: a cudaMemcpyAsync into pageable memory would wait for the copy.
    CUDA_CHECK(cudaMallocHost((void **)&host, n * sizeof(float)));
    for (size_t i = 0; i < n; i++) host[i] = 1.0f;
    GpuSyncCounts before = gpu_sync_counts(&gt_ctx);
    gpu_memcpy_sync(&gt_ctx, d, host, n * sizeof(float), cudaMemcpyHostToDevice);      // copy
    dlosses_fill_v1(&gt_ctx, d, 1, 500);                                    // launch check
    gt_ctx.sync_after_launch = 0;
    dlosses_fill_v1(&gt_ctx, d + 500, 1, 500);                              // no wait
    CUDA_CHECK(cudaMemcpyAsync(host, d, n * sizeof(float), cudaMemcpyDeviceToHost,
                               gt_ctx.stream));                             // no wait
    cudaEvent_t ev;
    CUDA_CHECK(cudaEventCreate(&ev));
    CUDA_CHECK(cudaEventRecord(ev, gt_ctx.stream));
    gpu_event_sync(&gt_ctx, ev, "the test's event");                        // event
    gpu_stream_sync(&gt_ctx, "the test's stream");                          // stream
    gpu_device_sync(&gt_ctx, "the test's device");                          // device
    CUDA_CHECK(cudaEventDestroy(ev));
    GpuSyncCounts after = gpu_sync_counts(&gt_ctx);
    const unsigned long long want[GPU_SYNC_KINDS] = {
        [GPU_SYNC_LAUNCH_CHECK] = 1, [GPU_SYNC_COPY] = 1, [GPU_SYNC_STREAM] = 1,
        [GPU_SYNC_EVENT] = 1, [GPU_SYNC_DEVICE] = 1};
    for (int k = 0; k < GPU_SYNC_KINDS; k++)
        cr_assert_eq(after.count[k] - before.count[k], want[k], "%s: %llu waits counted, not %llu",
                     gpu_sync_kind_name((GpuSyncKind)k), after.count[k] - before.count[k],
                     want[k]);
    GpuSyncCounts d5 = {{1, 1, 1, 1, 1}};
    cr_assert_eq(gpu_sync_total(&d5), 5);
    for (size_t i = 0; i < n; i++)
        cr_assert(host[i] == 1.0f / 500, "value %zu: %g", i, (double)host[i]);
    CUDA_CHECK(cudaFreeHost(host));
}

// Everything that lives as long as a context, its counters, its GEMM plans
// and the profiler that marks it, is its own: a second context on the same
// GPU (as a second GPU's would be) sees none of the first's.
Test(gpu_context, two_contexts_share_no_state) {
    GpuContext other;
    gpu_context_init(&other, GPU_FIRST_DEVICE);
    cr_assert_eq(other.rank, 0);
    cr_assert_eq(other.world_size, 1);
    enum { B = 2, T = 8, C = 64, OC = 128 };
    floatX *inp = gt_device_alloc(B * T * C * sizeof(floatX), "inp");
    floatX *w = gt_device_alloc(OC * C * sizeof(floatX), "w");
    floatX *out = gt_device_alloc(B * T * OC * sizeof(floatX), "out");
    GpuProfiler *p = gpu_profiler_new(64);
    gpu_profiler_start(p, &gt_ctx);
    const GpuSyncCounts before = gpu_sync_counts(&other);
    matmul_forward_v2(&gt_ctx, out, NULL, inp, w, NULL, B, T, C, OC, OC, NULL);
    gpu_stream_sync(&gt_ctx, "the first context's GEMM");
    cr_assert_eq(gpu_profiling(&gt_ctx), 1);
    cr_assert_eq(gpu_profiling(&other), 0, "a profiler marks the context it was started on");
    cr_assert_eq(matmul_lt_stats(&gt_ctx).plans_cached, 1);
    cr_assert_eq(matmul_lt_stats(&other).plans_cached, 0, "the plan went to the other context");
    const GpuSyncCounts after = gpu_sync_counts(&other);
    cr_assert_eq(gpu_sync_total(&after), gpu_sync_total(&before),
                 "the first context's waits were counted in the second's");
    matmul_forward_v2(&other, out, NULL, inp, w, NULL, B, T, C, OC, OC, NULL);
    gpu_stream_sync(&other, "the second context's GEMM");
    cr_assert_eq(matmul_lt_stats(&other).plans_cached, 1);
    gpu_profiler_stop(p, 1);
    gpu_profiler_free(p);
    gpu_context_free(&other);
}

// The timing's flush (gpu_context.h): a buffer of twice the L2 cache, all of
// it written, on the context's stream and without a wait.
Test(gpu_context, l2_flush_writes_twice_the_cache_without_waiting) {
    int l2_bytes = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, gt_ctx.device));
    cr_assert_gt(l2_bytes, 0);
    GpuL2Flush flush;
    gpu_l2_flush_init(&gt_ctx, &flush);
    cr_assert_eq(flush.bytes, 2 * (size_t)l2_bytes);
    const GpuSyncCounts before = gpu_sync_counts(&gt_ctx);
    gpu_l2_flush(&gt_ctx, &flush, 0x5a);
    const GpuSyncCounts after = gpu_sync_counts(&gt_ctx);
    cr_assert_eq(gpu_sync_total(&after), gpu_sync_total(&before), "the flush waited");
    gpu_stream_sync(&gt_ctx, "the flush");
    unsigned char *host = xmalloc(flush.bytes);
    CUDA_CHECK(cudaMemcpy(host, flush.buffer, flush.bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < flush.bytes; i++)
        if (host[i] != 0x5a) cr_assert_fail("byte %zu of %zu: %#x, not 0x5a", i, flush.bytes, host[i]);
    free(host);
    gpu_l2_flush_free(&flush);
    cr_assert_null(flush.buffer);
    cr_assert_eq(flush.bytes, 0);
}
