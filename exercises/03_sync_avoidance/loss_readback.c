// GENERATED from solutions/03_sync_avoidance/loss_readback.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 03_sync_avoidance); what to do and
// how to test it: exercises/03_sync_avoidance/README.md.
// loss_readback.c: chapter 03's exercise: reading the losses back from the
// device without stopping it (loss_readback.h tells the whole story).
// solutions/03_sync_avoidance/ has the two functions complete, and the
// trainer runs them from chapter 03 on; exercises/03_sync_avoidance/ has
// their bodies cut out.
//
// The host code of a CUDA program, in C: the CUDA runtime is a C API, and
// neither function launches a kernel. Everything happens in the order of
// `stream`: the copy runs after the work queued before it (the steps whose
// losses it reads), and the event completes after the copy.
#include <math.h>

#include "exercise.h"
#include "gpu_context.h"
#include "gpu/loss_readback.h"
#include "util/util.h"

// ANCHOR: loss_readback_start
void loss_readback_start(LossReadback *r, const float *device, int n, cudaStream_t stream) {
    if (n <= 0 || n > r->capacity)
        die("loss_readback_start: %d floats, for a buffer of %d", n, r->capacity);
    // TODO(exercise 03_sync_avoidance): queue the copy of n floats from device into the pinned r->host on stream (cudaMemcpyAsync), then record r->copied on the same stream; nothing here may wait
    // Replace this stub, which makes the tests fail, with your code.
    (void)device, (void)stream;
    // TODO(exercise 03_sync_avoidance): delete this call once the code above is written.
    exercise_unfinished("03_sync_avoidance", "loss readback, the start",
                        "queue the copy of n floats from device into the pinned r->host on stream (cudaMemcpyAsync), then record r->copied on the same stream; nothing here may wait");
    r->count = n;
}
// ANCHOR_END: loss_readback_start

// ANCHOR: loss_readback_finish
int loss_readback_finish(LossReadback *r, const GpuContext *ctx, float *out) {
    // TODO(exercise 03_sync_avoidance): wait for r->copied with gpu_event_sync (it counts the wait); only then copy the r->count floats of r->host into out
    // Replace this stub, which makes the tests fail, with your code.
    (void)ctx;
    for (int i = 0; i < r->count; i++) out[i] = NAN;  // nothing read back: every loss is NaN
    // TODO(exercise 03_sync_avoidance): delete this call once the code above is written.
    exercise_unfinished("03_sync_avoidance", "loss readback, the finish",
                        "wait for r->copied with gpu_event_sync (it counts the wait); only then copy the r->count floats of r->host into out");
    return r->count;
}
// ANCHOR_END: loss_readback_finish
