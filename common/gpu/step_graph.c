// step_graph.c: see step_graph.h.
#include "gpu/step_graph.h"

#include <string.h>

#include "util/util.h"

static int same_key(const StepGraphKey *a, const StepGraphKey *b) {
    return a->batch == b->batch && a->first == b->first && a->last == b->last;
}

// ANCHOR: capture
// The stream records instead of running: every launch and copy that work()
// queues on it becomes a node of the graph, in the stream's order. "Thread
// local" capture: chapter 08's worker threads never call CUDA, and no other
// thread's calls may join this graph by accident.
static cudaGraphExec_t capture(const GpuContext *ctx, StepWork work, void *arg) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    work(arg);
    CUDA_CHECK(cudaStreamEndCapture(ctx->stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));  // the executable graph is a copy
    return exec;
}
// ANCHOR_END: capture

void step_graphs_launch(StepGraphs *g, const GpuContext *ctx, StepGraphKey key, StepWork work,
                        void *arg) {
    int i = 0;
    while (i < g->count && !same_key(&g->keys[i], &key)) i++;
    if (i == g->count) {
        if (g->count == STEP_GRAPHS_MAX) die("step_graphs: more than %d graphs", STEP_GRAPHS_MAX);
        g->keys[i] = key;
        g->execs[i] = capture(ctx, work, arg);
        g->count++;
        g->captures++;
    }
    // ANCHOR: replay
    CUDA_CHECK(cudaGraphLaunch(g->execs[i], ctx->stream));
    // ANCHOR_END: replay
}

void step_graphs_free(StepGraphs *g) {
    for (int i = 0; i < g->count; i++) CUDA_CHECK(cudaGraphExecDestroy(g->execs[i]));
    memset(g, 0, sizeof *g);
}
