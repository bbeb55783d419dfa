// sync_parity.h: the parity checks of the switches that change no
// arithmetic (chapter 03's sync avoidance, chapter 09's fused optimizer),
// shared by the fp32 and bf16 training tests: runs with the switch on and
// off must agree bit for bit: every step's loss and gradient norm, and after
// the last step the weights (the fp32 master weights and the bf16 ones in
// the bf16 build), and AdamW's m and v.
#ifndef SYNC_PARITY_H
#define SYNC_PARITY_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu/training_fixture.h"
#include "gpu_test.h"
#include "train/train_gpu.h"

#define SP_MAX_STEPS 16

typedef struct {
    int steps;
    float loss[SP_MAX_STEPS], norm[SP_MAX_STEPS];
    size_t n;
    float *params;   // the weights of record (gpt2_gpu_get_params)
    float *weights;  // the floatX weights the passes read, as floats
    float *m, *v;
    GpuSyncCounts syncs;  // waits during the steps and the reads of their numbers
} SpRun;

// Queues 8 memsets of `gib` GiB on the trainer's stream: the device is then
// busy for a while (about 20 ms on an H100 for gib = 8) before it reaches the
// steps queued after them, and a trainer that does not wait runs ahead.
static inline void sp_keep_device_busy(GpuTrainer *tr, size_t gib) {
    const size_t bytes = gib << 30;
    void *buf = gt_device_alloc(bytes, "something to keep the device busy");
    for (int i = 0; i < 8; i++) CUDA_CHECK(cudaMemsetAsync(buf, i, bytes, tr->ctx.stream));
}

// `steps` steps of the tiny model with `optim`; the steps' numbers are read
// (gpu_trainer_read_stats) after each step listed in read_after (ascending,
// ending with `steps`). busy_after > 0 queues busy work (sp_keep_device_busy,
// 8 GiB) after that step. Not before the first: CUDA loads each kernel's code
// the first time it is launched (lazy loading, the default), and a load may
// wait for the whole device, which would drain the busy work; after the
// first steps every kernel of a step has been loaded.
static inline void sp_run(SpRun *r, const TrainOptions *o, Optimizations optim, int steps,
                          const int *read_after, int busy_after) {
    cr_assert(steps <= SP_MAX_STEPS);
    memset(r, 0, sizeof *r);
    r->steps = steps;
    GpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(gpu_trainer_init(&tr, o, &optim, err) == 0, "%s", err);
    GpuSyncCounts before = gpu_sync_counts(&tr.ctx);
    int got = 0;
    for (int i = 0; i < steps; i++) {
        GpuStepStats s, batch[GPU_MAX_PENDING_STEPS];
        cr_assert(gpu_trainer_step(&tr, &s, err) == 0, "%s", err);
        if (i + 1 == busy_after) sp_keep_device_busy(&tr, 8);
        cr_assert_eq(s.step, i + 1);
        cr_assert(optim.sync_avoidance ? isnan(s.loss) : !isnan(s.loss),
                  "the step's own loss: known at once in chapters 00-02 only");
        if (i + 1 != *read_after) continue;
        read_after++;
        int n = gpu_trainer_read_stats(&tr, batch);
        for (int j = 0; j < n; j++, got++) {
            cr_assert_eq(batch[j].step, got + 1, "the steps' numbers come in order");
            r->loss[got] = batch[j].loss;
            r->norm[got] = batch[j].grad_norm;
            // Chapter 11's steps (graphs, micro-batches) are not split by phase.
            const int split = !optim.cuda_graphs && o->grad_accum == 1;
            cr_assert(batch[j].ms > 0, "step %d: time missing", got + 1);
            cr_assert(split ? batch[j].forward_ms > 0 && batch[j].backward_ms > 0 &&
                                  batch[j].optimizer_ms > 0
                            : isnan(batch[j].forward_ms),
                      "step %d: the split by phase", got + 1);
        }
        cr_assert_eq(gpu_trainer_pending(&tr), 0);
    }
    cr_assert_eq(got, steps, "gpu_trainer_read_stats returned %d steps of %d", got, steps);
    GpuSyncCounts after = gpu_sync_counts(&tr.ctx);
    for (int k = 0; k < GPU_SYNC_KINDS; k++) r->syncs.count[k] = after.count[k] - before.count[k];
    r->n = tr.model.num_params;
    r->params = xmalloc(r->n * sizeof(float));
    r->weights = xmalloc(r->n * sizeof(float));
    r->m = xmalloc(r->n * sizeof(float));
    r->v = xmalloc(r->n * sizeof(float));
    gpt2_gpu_get_params(&tr.model, r->params);
    gpt2_gpu_download_floatx(&tr.model, tr.model.params, r->weights, r->n);
    gpt2_gpu_get_moments(&tr.model, r->m, r->v);
    gpu_trainer_free(&tr);
}

static inline void sp_free(SpRun *r) {
    free(r->params);
    free(r->weights);
    free(r->m);
    free(r->v);
}

// memcmp, value by value: the bits, not the numbers.
static inline void sp_assert_identical(const SpRun *a, const SpRun *b, const char *what) {
    cr_assert_eq(a->steps, b->steps);
    cr_assert_eq(a->n, b->n);
    char name[160];
    snprintf(name, sizeof name, "%s: losses", what);
    gt_assert_identical(name, a->loss, b->loss, (size_t)a->steps);
    snprintf(name, sizeof name, "%s: gradient norms", what);
    gt_assert_identical(name, a->norm, b->norm, (size_t)a->steps);
    snprintf(name, sizeof name, "%s: weights of record", what);
    gt_assert_identical(name, a->params, b->params, a->n);
    snprintf(name, sizeof name, "%s: weights", what);
    gt_assert_identical(name, a->weights, b->weights, a->n);
    snprintf(name, sizeof name, "%s: AdamW m", what);
    gt_assert_identical(name, a->m, b->m, a->n);
    snprintf(name, sizeof name, "%s: AdamW v", what);
    gt_assert_identical(name, a->v, b->v, a->n);
}

// The parity check of a switch that changes no arithmetic: `off` and `on`
// differ in that one switch, and must agree bit for bit after N = 6 steps,
// at three gradient clips: the tiny model's default (1.0), one that clips
// every step and one that never does, so that both clipping branches are
// compared. The run of `off` reads its numbers after every step; the run of
// `on` reads them twice (after steps 2 and 6) when it avoids syncs, else
// after every step too. `also`, when not NULL, adds checks of the switch's
// own against the `off` run of the default clip.
typedef void (*SpAlso)(const TrainOptions *o, Optimizations on, const SpRun *off_run);

static inline void sp_check_switch(Optimizations off, Optimizations on, const char *what,
                                   SpAlso also) {
    enum { N = 6 };
    const int read_each[] = {1, 2, 3, 4, 5, 6}, read_twice[] = {2, 6};
    const float clips[] = {-1.0f /* the default */, 1e-4f, 1e9f};
    for (int c = 0; c < 3; c++) {
        TrainOptions o = tiny_train_options(N);
        if (clips[c] > 0) o.grad_clip = clips[c];
        SpRun off_run, on_run;
        sp_run(&off_run, &o, off, N, read_each, 0);
        sp_run(&on_run, &o, on, N, on.sync_avoidance ? read_twice : read_each, 0);
        for (int i = 0; i < N; i++) {
            if (clips[c] == 1e-4f)
                cr_assert(off_run.norm[i] > o.grad_clip, "step %d was not clipped", i + 1);
            if (clips[c] == 1e9f) cr_assert(off_run.norm[i] < o.grad_clip, "step %d was clipped", i + 1);
        }
        char name[128];
        snprintf(name, sizeof name, "%s on vs off, grad_clip %g", what, (double)o.grad_clip);
        sp_assert_identical(&on_run, &off_run, name);
        sp_free(&on_run);
        if (c == 0 && also) also(&o, on, &off_run);
        sp_free(&off_run);
    }
}

// Sync avoidance's own check: the host runs ahead of a busy device. One
// more run keeps the device busy after step 2 and reads once, at the end:
// the upload buffers' events must hold the host back, or a queued step
// trains on the next batch. Steps 3 and 4 are queued behind the busy work;
// at step 5 the host waits for step 3's copy: one wait, besides the
// readback's.
static inline void sp_check_running_ahead(const TrainOptions *o, Optimizations on,
                                          const SpRun *off_run) {
    const int read_once[] = {6};
    SpRun ahead;
    sp_run(&ahead, o, on, 6, read_once, 2);
    cr_assert(ahead.syncs.count[GPU_SYNC_EVENT] >= 2,
              "the host never waited for an upload buffer (%llu event waits): the "
              "device was not kept busy long enough for this test to mean anything",
              ahead.syncs.count[GPU_SYNC_EVENT]);
    sp_assert_identical(&ahead, off_run, "sync-avoidance, host running ahead, vs off");
    sp_free(&ahead);
}

// Chapter 03's check: `base` (sync avoidance off) against base + sync
// avoidance, and the host running ahead.
static inline void sp_check_sync_avoidance(Optimizations base) {
    Optimizations on = base;
    on.sync_avoidance = 1;
    cr_assert(base.sync_avoidance == 0);
    sp_check_switch(base, on, "sync-avoidance", sp_check_running_ahead);
}

#endif
