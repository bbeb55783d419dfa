// profiler.h: where the device's time goes, kernel by kernel (`--profile`).
//
// While a profiler runs, every kernel launch leaves a mark on the stream: a
// CUDA event, recorded right after the launch with the kernel's name.
// gpu_check_launch (gpu_context.h) makes the mark, so every launcher of the
// project is profiled without a line of its own; cuBLAS calls and memsets
// mark through the same call. The device time between two consecutive marks
// is the time of the work between them: the kernel's own, plus whatever the
// device spent waiting for it to be launched.
//
// The host's waits (the counted synchronizations of gpu_context.h) mark too,
// without a name: the interval that ends at such a mark is the time the
// device sat idle because the host had stopped to wait and had not yet
// queued anything new. It is reported as one row of its own, "(idle: the
// host waited)". After a wait, the next kernel's interval starts when the
// host came back, so it includes that launch's latency: in the chapters that
// wait after every launch (00-02), every kernel pays it, which is the truth
// of how those chapters run.
//
// Marks are recorded on the stream they are given; the profiler reads them
// back only when it is stopped and asked for results, so it adds no waits
// of its own to the steps it profiles, only the cost of recording the events
// (about a microsecond of host time each).
//
// A plain C header for the trainer (gcc) and the kernels (nvcc).
#ifndef PROFILER_H
#define PROFILER_H

#include <stdio.h>

#include <cuda_runtime.h>

#include "gpu_context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GpuProfiler GpuProfiler;

// One kernel's share of the profiled steps.
typedef struct {
    const char *name;
    double calls;  // launches per step
    double ms;     // device milliseconds per step
    double share;  // of the profiled time
} GpuProfileRow;

// A profiler with room for max_marks marks (events are created once, here).
GpuProfiler *gpu_profiler_new(int max_marks);
void gpu_profiler_free(GpuProfiler *p);

// Starts marking the launches and waits of ctx (ctx->profiler): the first
// mark goes on its stream now. One profiler marks a context at a time; marks
// past max_marks are dropped (and counted).
void gpu_profiler_start(GpuProfiler *p, GpuContext *ctx);
// Stops marking; `steps` is how many training steps the marks covered, to
// report per-step numbers.
void gpu_profiler_stop(GpuProfiler *p, int steps);

// After stop: waits for the last mark, then fills rows (room for cap) sorted
// by time, largest first, and returns how many. *total_ms: the profiled
// device time per step.
int gpu_profiler_results(GpuProfiler *p, GpuProfileRow *rows, int cap, double *total_ms);
// The results as a table on `out`, and as CSV (kernel,calls_per_step,
// ms_per_step,share) to csv_path when it is not NULL. Returns 0, or -1 when
// csv_path cannot be written (err says why).
int gpu_profiler_report(GpuProfiler *p, FILE *out, const char *csv_path, char *err);

// The marks, called from gpu_context.cu: after a launch on ctx (a no-op
// unless a profiler marks ctx), and after a host wait.
void gpu_profile_mark(const GpuContext *ctx, const char *name);
void gpu_profile_after_wait(const GpuContext *ctx);
int gpu_profiling(const GpuContext *ctx);  // 1 while a profiler marks ctx

#ifdef __cplusplus
}
#endif

#endif
