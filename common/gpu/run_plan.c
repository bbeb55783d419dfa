// run_plan.c: see run_plan.h.
#include "gpu/run_plan.h"

#include <string.h>

#include "precision.h"
#include "util/util.h"

// ANCHOR: run_plan_build
// What chapter 11's step needs of the chapters before it: a graph replays a
// step with no host wait inside it (chapter 03) and an update that reads its
// values from the device (chapter 09); micro-batches, the update's 1/N
// folded into the device's clip factor (chapter 09), and their losses summed
// on the device (chapter 03).
static int check_step(const Optimizations *o, int micro_batches, char *err) {
    if (!o->cuda_graphs && micro_batches == 1) return 0;
    const char *flag = o->cuda_graphs ? "--cuda-graphs" : "--grad-accum";
    if (!o->sync_avoidance)
        return fail(err, "%s needs --sync-avoidance (chapter 03): its step reads its numbers "
                         "back later, and a graph may not wait for the host inside a step", flag);
    if (!o->fused_optimizer)
        return fail(err, "%s needs --fused-optimizer (chapter 09): the per-tensor updates take "
                         "the step's lr as an argument, not from the device", flag);
    return 0;
}

// Chapter 13's FP8 GEMMs run on cuBLASLt (chapter 04's matmul_v2), and take
// the bias gradient and GELU from the casts, not from GEMM epilogues.
static int check_fp8(const Optimizations *o, char *err) {
    if (o->fp8 && !o->kernel_fusion)
        return fail(err, "--fp8 needs --kernel-fusion (chapter 04): its GEMMs are cuBLASLt's");
    return 0;
}

// Chapter 14's --no-master-weights: only the bf16 build has a master copy to
// leave out, and only the fused update (chapter 09's and 10's kernels) rounds
// stochastically; the per-tensor kernels would round to nearest and lose the
// small updates.
int run_plan_check_master_weights(const Optimizations *o, int master_weights, char *err) {
    if (master_weights) return 0;
#ifndef PRECISION_BF16
    (void)o;
    return fail(err, "--no-master-weights: the bf16 build's (build/train_gpt2_bf16); the fp32 "
                     "build keeps its weights in fp32 and has no master copy to leave out");
#else
    if (!o->fused_optimizer)
        return fail(err, "--no-master-weights needs --fused-optimizer (chapter 09): only the "
                         "fused update rounds the weights stochastically, and rounded to nearest "
                         "the updates smaller than half a bf16 step would be lost");
    return 0;
#endif
}

// ANCHOR: update_in_backward_refusals
// Chapter 14's --update-in-backward: the fused update (chapter 09's tables,
// one per layer), and the step's gradients complete after one backward pass:
// with micro-batches each layer's would be needed until the last one's pass.
static int check_update_in_backward(const Optimizations *o, int update_in_backward,
                                    int micro_batches, char *err) {
    if (!update_in_backward) return 0;
    if (!o->fused_optimizer)
        return fail(err, "--update-in-backward needs --fused-optimizer (chapter 09): it updates "
                         "each layer with the fused kernels' tables, one a layer");
    if (micro_batches > 1)
        return fail(err, "--update-in-backward cannot take --grad-accum %d: a layer's gradients "
                         "are applied when one backward pass completes them, and micro-batches "
                         "need them kept until the last one's", micro_batches);
    return 0;
}

int run_plan_check_update_in_backward(const Optimizations *o, int update_in_backward,
                                      int micro_batches, float grad_clip, char *err) {
    if (check_update_in_backward(o, update_in_backward, micro_batches, err)) return -1;
    if (update_in_backward && grad_clip > 0.0f)
        return fail(err, "--update-in-backward needs --grad-clip 0 (it is %g): clipping by the "
                         "global norm needs every gradient before the first update, and the "
                         "first layers' are applied and gone before the last ones exist",
                    grad_clip);
    return 0;
}
// ANCHOR_END: update_in_backward_refusals

int run_plan_check_shard_optimizer(const Optimizations *o, int shard, int offload, char *err) {
    if (!shard) return 0;
    if (!o->fused_optimizer)
        return fail(err, "--shard-optimizer needs --fused-optimizer (chapter 09): each rank "
                         "updates its shard with the fused kernels' tables");
    if (offload)
        return fail(err, "--shard-optimizer with --offload-optimizer: the host's blocks hold a "
                         "layer's moments, not a shard's; take one or the other");
    return 0;
}

// Chapter 14's --offload-optimizer: the fused update's tables, one a layer,
// each launched as the layer's moments arrive.
static int check_offload(const Optimizations *o, int offload, char *err) {
    if (offload && !o->fused_optimizer)
        return fail(err, "--offload-optimizer needs --fused-optimizer (chapter 09): it updates "
                         "each layer with the fused kernels' tables, one a layer");
    return 0;
}

int run_plan_build(RunPlan *plan, const Optimizations *o, int Vp, int micro_batches,
                   Recompute recompute, int master_weights, int update_in_backward, int offload,
                   char *err) {
    memset(plan, 0, sizeof *plan);
    if (check_step(o, micro_batches, err) || check_fp8(o, err) ||
        run_plan_check_master_weights(o, master_weights, err) ||
        check_update_in_backward(o, update_in_backward, micro_batches, err) ||
        check_offload(o, offload, err))
        return -1;
    plan->ops = gpu_ops_select(o, &plan->launch);
    // The model's buffers: chapter 04's fused classifier keeps no
    // probabilities and writes dlogits over the logits; chapter 05's flash
    // attention keeps one log-sum-exp per row of scores instead of the rows.
    plan->keeps_probs = !o->kernel_fusion;
    plan->keeps_scores = !o->flash_attention;
    // Chapter 12's attention keeps what chapter 05's keeps; its backward
    // pass needs a larger scratch (memory_plan.c).
    plan->logits_stride = gpu_ops_logits_stride(o, Vp);
    plan->lt_gemms = o->kernel_fusion;
    plan->fp8 = o->fp8;
    // Chapter 14: the activations the backward pass computes again instead
    // of the forward pass keeping them for every layer, with any chapter's
    // kernels (activations.c says which, gpt2_gpu.c how).
    plan->recompute = recompute;
    // A run over its memory budget recomputes more rather than being refused
    // (memory_plan_fit): that level is the one number of the plan that waits
    // for the budget.
    plan->fit_memory = o->fit_memory;
    // The update.
    plan->host_reads_norm = !o->sync_avoidance;
    plan->fused_update = o->fused_optimizer;
    plan->moments_8bit = o->adamw_8bit;
    plan->master_weights = master_weights;
    plan->update_in_backward = update_in_backward;
    plan->offload_optimizer = offload;
    // The step.
    plan->async = o->sync_avoidance;
    plan->workers = o->data_workers;
    plan->graphs = o->cuda_graphs;
    plan->micro_batches = micro_batches;
    plan->device_schedule = o->cuda_graphs || micro_batches > 1;
    plan->phase_events = !o->cuda_graphs && micro_batches == 1;
    // One GPU: the first the process sees (the trainer places a rank of
    // several: train_gpu.c's place_rank).
    plan->rank = 0, plan->world_size = 1, plan->device = GPU_FIRST_DEVICE;
    plan->overlap_comm = o->overlap_comm;
    return 0;
}
// ANCHOR_END: run_plan_build

RunPlan run_plan_for_model(const Optimizations *o, int Vp) {
    RunPlan plan;
    char err[ERR_LEN];
    if (run_plan_build(&plan, o, Vp, 1, RECOMPUTE_NONE, 1, 0, 0, err))
        die("run_plan_for_model: %s", err);
    return plan;
}
