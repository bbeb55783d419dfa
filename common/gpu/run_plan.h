// run_plan.h: what a run of the GPU trainer does, decided once, before
// anything is allocated, from the chapter's switches and the command line.
// The model (gpt2_gpu.h), the memory plan (memory_plan.h) and the step
// (train_gpu.c) read the plan; none of them reads a switch.
//
// The switches themselves are read in three places (chapters.h says so):
//   gpu_ops_select        which kernel fills each launcher slot, and how every
//                         launch is made (common/gpu/gpu_ops.c)
//   apply_model_switches  the model's shape: vocabulary padding, tying
//   run_plan_build        everything else, below
#ifndef RUN_PLAN_H
#define RUN_PLAN_H

#include "train/chapters.h"
#include "train/recompute.h"
#include "model/gpt2_config.h"
#include "gpu/gpu_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

// ANCHOR: run_plan
typedef struct {
    // The kernels (gpu_ops_select), and the launch settings the model's
    // context takes from them.
    GpuOps ops;
    GpuLaunchSettings launch;
    // The model's buffers (activations.h, gpt2_gpu.h).
    int keeps_probs;       // 00-03: the softmax's probabilities, and dlogits of their own
    int keeps_scores;      // 00-04: attention's (B,NH,T,T) probabilities; else a row's lse (05)
    int logits_stride;     // the logits' row stride: Vp, or more (gpu_ops_logits_stride)
    int lt_gemms;          // 04: GEMMs on cuBLASLt, with its workspace (and padded copies)
    int fp8;               // 13: the linear layers' GEMMs on FP8 copies of their operands
    Recompute recompute;   // 14: --recompute: what the backward pass computes again (recompute.h)
    int fit_memory;        // 14: over its budget, the run takes the cheapest level that fits
                           // (train_gpu.c's check_memory then plans again at it)
    // The update (gpt2_gpu_update).
    int host_reads_norm;   // 00-02: the gradient norm read back by the host (which clips, to 08)
    int fused_update;      // 09: one AdamW launch for every tensor, the clipping folded in
    int moments_8bit;      // 10: the weight matrices' moments in one byte each (adam_state.h)
    int master_weights;    // the bf16 build's fp32 master copy: 1 unless --no-master-weights
                           // (14: the update then rounds stochastically into the weights)
    int update_in_backward;// 14: each layer updated as soon as the backward pass completes its
                           // gradients, which keep one layer's buffer (layer_tables.h)
    int offload_optimizer; // 14: the layers' moments on the host, streamed in and out for
                           // each layer's update (optimizer_offload.h)
    // The step (train_gpu.c).
    int async;             // 03: the host never waits inside a step; numbers are read late
    int workers;           // 08: batches from worker threads, copied on a stream of their own
    int graphs;            // 11: the step replayed from CUDA graphs
    int micro_batches;     // --grad-accum: backward passes summed into each update
    int device_schedule;   // the update's lr and corrections from a table on the device
    int phase_events;      // forward, backward and update timed apart (no graphs, one micro-batch)
    // The GPUs: this process's rank of world_size, on its device.
    int rank, world_size, device;
    int overlap_comm;      // 15: each layer's gradients averaged over the ranks during the
                           // backward pass (else all of them after it, in one all-reduce)
    int shard_optimizer;   // 15: each rank keeps the master weights and moments of its 1/N
                           // of the parameters, and updates those (optimizer_shard.h)
} RunPlan;
// ANCHOR_END: run_plan

// The plan for the switches o, a model of padded vocabulary Vp, micro_batches
// backward passes per update, the activations recomputed at `recompute`'s
// level, fp32 master weights unless master_weights is 0
// (--no-master-weights), and the update made in the backward pass when
// update_in_backward is 1 (--update-in-backward), the moments on the host
// when offload is 1 (--offload-optimizer), on one GPU. Returns 0, or -1 when
// the switches ask for a step the chapters before cannot give (CUDA graphs
// or micro-batches without sync avoidance or the fused update; no master
// weights without the fused update or in the fp32 build; the update in the
// backward pass without the fused update, or with micro-batches; the
// moments on the host without the fused update), err naming the flags.
int run_plan_build(RunPlan *plan, const Optimizations *o, int Vp, int micro_batches,
                   Recompute recompute, int master_weights, int update_in_backward, int offload,
                   char *err);

// run_plan_build's check of --update-in-backward, with the run's gradient
// clipping (--grad-clip, 0: off), which the plan does not hold: the update in
// the backward pass cannot clip by the global norm, which is known only once
// the last gradient is, after the first layers' have been applied and their
// buffer reused (layer_tables.h). 0, or -1 with err naming the flags.
int run_plan_check_update_in_backward(const Optimizations *o, int update_in_backward,
                                      int micro_batches, float grad_clip, char *err);

// run_plan_build's check of --no-master-weights alone (master_weights 0):
// the bf16 build only, with --fused-optimizer. 0, or -1 with err naming the
// flag. The trainer calls it once the command line is read, before it looks
// for a device, so that the refusal is the same on any machine.
int run_plan_check_master_weights(const Optimizations *o, int master_weights, char *err);

// Chapter 15's --shard-optimizer (shard 1) against the switches: each rank
// updates its shard with the fused update's tables (chapter 09), its
// moments on the GPU (not --offload-optimizer's layer blocks, offload 1).
// The trainer checks it before a device is looked for, and again where it
// plans the shards (train_gpu.c).
int run_plan_check_shard_optimizer(const Optimizations *o, int shard, int offload, char *err);

// The same for a model that is only run and updated, never stepped by the
// trainer (the tests, --check-state): one micro-batch, every activation kept;
// a combination the trainer would refuse is a programming error here.
RunPlan run_plan_for_model(const Optimizations *o, int Vp);

#ifdef __cplusplus
}
#endif

#endif
