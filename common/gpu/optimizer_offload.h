// optimizer_offload.h: chapter 14's --offload-optimizer: AdamW's moments of
// the layers' tensors in the host's pinned memory, one block a layer
// (layer_tables.h: StateBlock), brought to the GPU for the layer's update
// and sent back after it, on two copy streams, while the GPU computes.
//
// The GPU holds two layers' blocks (two slots) and, for good, the block of
// the tensors outside the layers (wte's fp32 moments are 8 bytes of its
// 38.6M values at 124M: as large as 21 layers' blocks of 8-bit moments, and
// needed for every step; the embeddings stay). The layers are updated from
// the last to the first, in the order the backward pass completes them.
// ANCHOR: offload_timeline
// Layer l's update waits for its block to be on the GPU, and the copy back
// waits for the update; the next layer but one is then copied into the slot:
//
//   up   (host to GPU)   [in L-1][in L-2]       [in L-3]       [in L-4] ...
//   compute                       [update L-1]   [update L-2]  ...
//   down (GPU to host)                       [out L-1]      [out L-2] ...
//
// Each direction has its own stream and copy engine, so that both move at
// once (PCIe is full duplex). What it costs a step: a layer's block twice
// (in and out) over the bus, L times; hidden where the work between two
// updates (the backward pass of a layer, with --update-in-backward) takes
// longer than the copies, else the step waits for the bus.
// ANCHOR_END: offload_timeline
//
// Every stream forked from the model's stream joins it again before the
// step ends (optimizer_offload_end): a CUDA graph (chapter 11) can capture
// the step, and the host's blocks are never read while a copy is writing
// them, as long as the host reads them only after waiting for the model's
// stream (gpt2_gpu_get_state does).
#ifndef OPTIMIZER_OFFLOAD_H
#define OPTIMIZER_OFFLOAD_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu_context.h"
#include "optim/adam_state.h"
#include "optim/layer_tables.h"

// Where a group's moments are: six arrays of a block (layer_tables.h).
typedef struct {
    float *m, *v;
    uint8_t *m_q, *v_q;
    float *m_absmax, *v_absmax;
} MomentsAt;

typedef struct {
    GPT2Config config;
    StateBlock layer, rest;      // the blocks' layouts: any layer's, the rest's
    unsigned char *host;         // pinned: L blocks of layer.bytes, layer l's at l * layer.bytes
    unsigned char *slots;        // device: 2 blocks of layer.bytes; layer l in slot l % 2
    unsigned char *rest_block;   // device: rest.bytes
    cudaStream_t up, down;       // host to GPU, GPU to host
    cudaEvent_t fork;            // the model's stream at the start of the updates
    cudaEvent_t in[2], updated[2], out[2];  // per slot: block copied in, updated, copied out
    size_t device_bytes;         // slots and rest_block
} OptimizerOffload;

// The blocks' layouts for the model cfg's moments in layout adam, its
// pinned host blocks and device buffers (every moment zero: a fresh state),
// its streams and events.
void optimizer_offload_init(OptimizerOffload *o, const GPT2Config *cfg, const AdamLayout *adam);
void optimizer_offload_free(OptimizerOffload *o);

// The device bytes it takes, without making it: two layers' blocks and the
// rest's (memory_plan.c). Its host bytes: L layers' blocks.
size_t optimizer_offload_device_bytes(const GPT2Config *cfg, const AdamLayout *adam);
size_t optimizer_offload_host_bytes(const GPT2Config *cfg, const AdamLayout *adam);

// The step's updates begin: layers L-1 and L-2 are queued to come in.
void optimizer_offload_begin(OptimizerOffload *o, const GpuContext *ctx);

// Where group l's moments are for its update, on ctx's stream: layer l's
// slot, which the stream then waits for, or with l = L the rest's block.
MomentsAt optimizer_offload_acquire(OptimizerOffload *o, const GpuContext *ctx, int l);

// Layer l's update is queued on ctx's stream: its block goes back to the
// host once it is done, and layer l - 2 comes into its slot (nothing for
// the rest's, l = L).
void optimizer_offload_release(OptimizerOffload *o, const GpuContext *ctx, int l);

// The step's updates are queued: ctx's stream waits for the last copies.
void optimizer_offload_end(OptimizerOffload *o, const GpuContext *ctx);

// Every moment to and from a state in adam's layout (s->layout), waiting
// for the copies queued on ctx's stream first: for checkpoints and tests.
void optimizer_offload_get(const OptimizerOffload *o, const GpuContext *ctx, AdamState *s);
void optimizer_offload_set(OptimizerOffload *o, const GpuContext *ctx, const AdamState *s);

#endif
