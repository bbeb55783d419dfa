// step_graph.h: chapter 11's CUDA graphs. A training step launches some 400
// kernels and GEMMs, each a call that costs the host a few microseconds and
// leaves the GPU a gap between one kernel's end and the next one's start. A
// CUDA graph records the launches once, while a function queues them on a
// stream in capture mode (nothing runs then), and replays the whole recording
// afterwards with one call: the host's cost of a step becomes one launch, and
// the driver has every dependency in hand before the first kernel starts.
//
// A replay repeats each launch exactly as it was captured: the same kernels,
// grids, arguments and pointers. So what a step reads that changes from one
// step to the next must be in device memory that the captured kernels read,
// not in their arguments: the tokens (copied into the batch's fixed buffers
// before the replay), the encoder's buckets and their count (encoder_backward_v2),
// the step's lr and bias corrections (adamw_begin_step_v3, from a table), the
// place of the step's loss (copied out after the replay). What still differs
// between steps, the device batch the step reads (chapter 08 has two, used in
// turn) and its part in a step of several micro-batches (first: zero the
// gradients; last: update the weights), gets a graph of its own: a handful,
// captured the first time each is needed and kept.
#ifndef STEP_GRAPH_H
#define STEP_GRAPH_H

#include <cuda_runtime.h>

#include "gpu_context.h"

#define STEP_GRAPHS_MAX 8

// What makes a step's graph differ from another's.
typedef struct {
    const void *batch;  // the device batch it reads
    int first, last;    // it zeroes the gradients; it ends with the update
} StepGraphKey;

typedef struct {
    StepGraphKey keys[STEP_GRAPHS_MAX];
    cudaGraphExec_t execs[STEP_GRAPHS_MAX];
    int count;
    int captures;       // graphs captured so far (a report, and the tests)
} StepGraphs;

// Queues one step's work on the stream it is given: what a graph records.
typedef void (*StepWork)(void *arg);

// Replays the graph of `key` on ctx->stream, capturing it first (running
// work(arg) in capture mode on ctx->stream) when there is none yet.
void step_graphs_launch(StepGraphs *g, const GpuContext *ctx, StepGraphKey key, StepWork work,
                        void *arg);
void step_graphs_free(StepGraphs *g);

#endif
