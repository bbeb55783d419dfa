// test_exercise_03_loss_readback.c: chapter 03's exercise, the asynchronous
// loss readback (common/gpu/loss_readback.h, solutions/03_sync_avoidance/
// loss_readback.c): the values come back exactly; loss_readback_start does
// not wait for the device; loss_readback_finish does, once, and not before
// the copy has landed.
#include "gpu_test.h"
#include "gpu/loss_readback.h"
#include "softmax_crossentropy.h"

TestSuite(exercise_loss_readback, .init = gpu_test_init, .fini = gpu_test_fini);

// CUDA loads a kernel's code the first time the kernel is launched (lazy
// loading, CUDA_MODULE_LOADING=LAZY, the default), and that load may wait for
// the whole device. So every kernel a test times is launched once first.
// (The kernels here write fp32 values, as the losses are in every build:
// dlosses_fill_v1 fills B*T floats with 1 / (B*T).)
static void load_kernels(float *d, int n) {
    dlosses_fill_v1(&gt_ctx, d, 1, n);
    CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(float), gt_ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(gt_ctx.stream));
}

// Queues on gt_ctx.stream a few tens of milliseconds of work (memsets of a
// 1 GiB buffer: no kernel of ours, so it stays fast under compute-sanitizer):
// work that the copy must wait behind.
static void keep_device_busy(void) {
    const size_t bytes = (size_t)1 << 30;
    void *buf = gt_device_alloc(bytes, "something to keep the device busy");
    for (int i = 0; i < 48; i++) CUDA_CHECK(cudaMemsetAsync(buf, i, bytes, gt_ctx.stream));
}

Test(exercise_loss_readback, returns_the_device_values) {
    enum { CAP = 64 };
    Rng rng;
    rng_seed(&rng, 31);
    float *x = gt_random(CAP, -12.0f, 12.0f, &rng);
    float *d_x = gt_upload(x, CAP), out[CAP];
    LossReadback r;
    loss_readback_init(&r, CAP);
    // Twice, with other counts and offsets: the readback is reusable.
    const int counts[] = {37, 5, CAP}, offsets[] = {0, 11, 0};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < CAP; i++) out[i] = -1.0f;
        loss_readback_start(&r, d_x + offsets[k], counts[k], gt_ctx.stream);
        cr_assert_eq(r.count, counts[k]);
        cr_assert_eq(loss_readback_finish(&r, &gt_ctx, out), counts[k]);
        gt_assert_identical("values read back", out, x + offsets[k], (size_t)counts[k]);
    }
    loss_readback_free(&r);
}

// The device is kept busy, then the values to read are computed (1 / N each,
// by dlosses_fill_v1, queued after the busy work), then the readback starts. The
// start must return while all of that is still queued: the copy's event is
// not done yet, and no wait was counted. The finish must then wait (one
// event wait, counted) and return the computed values, not what the pinned
// buffer held before.
Test(exercise_loss_readback, start_does_not_wait_and_finish_does) {
    enum { N = 48 };
    Rng rng;
    rng_seed(&rng, 32);
    float *x = gt_random(N, 1.0f, 4.0f, &rng), want[N], out[N];
    for (int i = 0; i < N; i++) want[i] = 1.0f / (float)N;
    float *d_x = gt_upload(x, N);
    LossReadback r;
    loss_readback_init(&r, N);
    for (int i = 0; i < N; i++) r.host[i] = -1.0f;  // what a finish that does not wait returns
    float *scratch = gt_device_alloc(N * sizeof(float), "scratch");
    load_kernels(scratch, N);
    gt_ctx.sync_after_launch = 0;  // as in chapter 03: the host queues, and goes on
    keep_device_busy();
    dlosses_fill_v1(&gt_ctx, d_x, 1, N);
    GpuSyncCounts before = gpu_sync_counts(&gt_ctx);
    loss_readback_start(&r, d_x, N, gt_ctx.stream);
    cudaError_t state = cudaEventQuery(r.copied);
    GpuSyncCounts started = gpu_sync_counts(&gt_ctx);
    cr_assert(gpu_sync_total(&started) == gpu_sync_total(&before),
              "loss_readback_start waited for the device: it only queues a copy and an event");
    cr_assert(state == cudaErrorNotReady,
              "loss_readback_start returned after the copy was done (cudaEventQuery: %s): it "
              "waited for the device, or did not record r->copied after the copy; "
              "cudaMemcpyAsync into pinned memory and cudaEventRecord never wait",
              cudaGetErrorName(state));
    cr_assert_eq(loss_readback_finish(&r, &gt_ctx, out), N);
    GpuSyncCounts finished = gpu_sync_counts(&gt_ctx);
    cr_assert_eq(finished.count[GPU_SYNC_EVENT] - started.count[GPU_SYNC_EVENT], 1,
                 "loss_readback_finish must wait for r->copied through gpu_event_sync, once");
    cr_assert_eq(gpu_sync_total(&finished) - gpu_sync_total(&started), 1,
                 "loss_readback_finish waits once, for the event, and in no other way");
    gt_assert_identical("values read back after the device's work", out, want, N);
    loss_readback_free(&r);
}

// The readback follows the stream's order: values written by a kernel
// queued just before the start are the ones read, over and over (round k
// fills the first (k+1) * N floats with 1 / ((k+1) * N)).
Test(exercise_loss_readback, reads_what_the_stream_wrote_before_it) {
    enum { N = 16, ROUNDS = 20 };
    float out[N];
    float *d_x = gt_device_alloc(ROUNDS * N * sizeof(float), "values");
    LossReadback r;
    loss_readback_init(&r, N);
    gt_ctx.sync_after_launch = 0;
    for (int k = 0; k < ROUNDS; k++) {
        dlosses_fill_v1(&gt_ctx, d_x, k + 1, N);
        const float expect = 1.0f / (float)((k + 1) * N);
        loss_readback_start(&r, d_x, N, gt_ctx.stream);
        cr_assert_eq(loss_readback_finish(&r, &gt_ctx, out), N);
        for (int i = 0; i < N; i++)
            cr_assert(out[i] == expect, "round %d, value %d: %g, not %g", k, i, (double)out[i],
                      (double)expect);
    }
    loss_readback_free(&r);
}
