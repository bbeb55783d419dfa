// profiler.cu: see profiler.h. Host code only: events and bookkeeping.
#include <stdlib.h>
#include <string.h>

#include "gpu_context.h"
#include "profiler.h"

#include "util/util.h"

#define PROFILER_MAX_NAMES 512
#define IDLE_NAME "(idle: the host waited)"

typedef struct {
    cudaEvent_t event;
    int name;  // index into names; the interval ending here is charged to it
} Mark;

struct GpuProfiler {
    Mark *marks;
    int max_marks, num_marks, dropped;
    char *names[PROFILER_MAX_NAMES];
    int num_names;
    GpuContext *ctx;  // the context it marks while it runs (NULL when stopped)
    const GpuContext *marked;  // the context it last marked, whose events it reads
    int steps;
};

extern "C" GpuProfiler *gpu_profiler_new(int max_marks) {
    GpuProfiler *p = (GpuProfiler *)xcalloc(1, sizeof *p);
    p->marks = (Mark *)xcalloc((size_t)max_marks, sizeof(Mark));
    p->max_marks = max_marks;
    for (int i = 0; i < max_marks; i++) CUDA_CHECK(cudaEventCreate(&p->marks[i].event));
    return p;
}

extern "C" void gpu_profiler_free(GpuProfiler *p) {
    if (!p) return;
    if (p->ctx) p->ctx->profiler = NULL;
    for (int i = 0; i < p->max_marks; i++) CUDA_CHECK(cudaEventDestroy(p->marks[i].event));
    for (int i = 0; i < p->num_names; i++) free(p->names[i]);
    free(p->marks);
    free(p);
}

// The index of `name` in the profiler's table, added on first sight. Names
// repeat every step: a linear search over a few dozen strings is enough.
static int intern(GpuProfiler *p, const char *name) {
    for (int i = 0; i < p->num_names; i++)
        if (!strcmp(p->names[i], name)) return i;
    // The table's last entry collects every name past its size.
    if (p->num_names == PROFILER_MAX_NAMES) return PROFILER_MAX_NAMES - 1;
    if (p->num_names == PROFILER_MAX_NAMES - 1) name = "(other names)";
    p->names[p->num_names] = strdup(name);
    return p->num_names++;
}

static void record(GpuProfiler *p, cudaStream_t stream, const char *name) {
    if (p->num_marks == p->max_marks) {
        p->dropped++;
        return;
    }
    Mark *m = &p->marks[p->num_marks++];
    m->name = intern(p, name);
    CUDA_CHECK(cudaEventRecord(m->event, stream));
}

extern "C" void gpu_profiler_start(GpuProfiler *p, GpuContext *ctx) {
    p->num_marks = p->dropped = 0;
    p->steps = 0;
    p->ctx = ctx;
    p->marked = ctx;
    ctx->profiler = p;
    record(p, ctx->stream, "(start)");
}

extern "C" void gpu_profiler_stop(GpuProfiler *p, int steps) {
    if (p->ctx) p->ctx->profiler = NULL;
    p->ctx = NULL;
    p->steps = steps;
}

extern "C" int gpu_profiling(const GpuContext *ctx) { return ctx->profiler != NULL; }

extern "C" void gpu_profile_mark(const GpuContext *ctx, const char *name) {
    if (ctx->profiler) record(ctx->profiler, ctx->stream, name);
}

extern "C" void gpu_profile_after_wait(const GpuContext *ctx) {
    if (ctx->profiler) record(ctx->profiler, ctx->stream, IDLE_NAME);
}

static int by_time_desc(const void *a, const void *b) {
    double x = ((const GpuProfileRow *)a)->ms, y = ((const GpuProfileRow *)b)->ms;
    return (x < y) - (x > y);
}

extern "C" int gpu_profiler_results(GpuProfiler *p, GpuProfileRow *rows, int cap,
                                    double *total_ms) {
    *total_ms = 0;
    if (p->num_marks < 2 || p->steps <= 0) return 0;
    gpu_event_sync(p->marked, p->marks[p->num_marks - 1].event, "the profiler's last mark");
    double ms_of[PROFILER_MAX_NAMES] = {0}, calls_of[PROFILER_MAX_NAMES] = {0};
    for (int i = 1; i < p->num_marks; i++) {
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, p->marks[i - 1].event, p->marks[i].event));
        ms_of[p->marks[i].name] += ms;
        calls_of[p->marks[i].name] += 1;
    }
    int n = 0;
    for (int k = 0; k < p->num_names; k++) {
        if (calls_of[k] == 0) continue;  // "(start)" ends no interval
        *total_ms += ms_of[k] / p->steps;
        if (n < cap) rows[n++] = (GpuProfileRow){p->names[k], calls_of[k] / p->steps,
                                                 ms_of[k] / p->steps, 0};
    }
    for (int i = 0; i < n; i++) rows[i].share = *total_ms > 0 ? rows[i].ms / *total_ms : 0;
    qsort(rows, (size_t)n, sizeof *rows, by_time_desc);
    return n;
}

extern "C" int gpu_profiler_report(GpuProfiler *p, FILE *out, const char *csv_path, char *err) {
    static GpuProfileRow rows[PROFILER_MAX_NAMES];
    double total;
    int n = gpu_profiler_results(p, rows, PROFILER_MAX_NAMES, &total);
    fprintf(out, "profile: %d steps, device time per step by kernel (%d marks%s)\n", p->steps,
            p->num_marks, p->dropped ? ", SOME DROPPED: raise the profiler's size" : "");
    fprintf(out, "profile: %-64s %8s %10s %7s\n", "kernel", "calls", "ms/step", "share");
    for (int i = 0; i < n; i++)
        fprintf(out, "profile: %-64s %8.1f %10.3f %6.1f%%\n", rows[i].name, rows[i].calls,
                rows[i].ms, 100 * rows[i].share);
    fprintf(out, "profile: %-64s %8s %10.3f %6.1f%%\n", "total", "", total, 100.0);
    if (!csv_path) return 0;
    FILE *f = fopen(csv_path, "w");
    if (!f) return fail(err, "--profile-csv %s: cannot open for writing", csv_path);
    fprintf(f, "kernel,calls_per_step,ms_per_step,share\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "\"%s\",%.2f,%.4f,%.4f\n", rows[i].name, rows[i].calls, rows[i].ms,
                rows[i].share);
    if (fclose(f) != 0) return fail(err, "--profile-csv %s: write failed", csv_path);
    return 0;
}
