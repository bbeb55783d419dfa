// gpt2_gpu.h: GPT-2 on the GPU: the same model as the CPU reference
// (gpt2_cpu.h), layer for layer, each layer a slot of the GpuOps table
// (gpu_ops.h) that the run's plan holds (run_plan.h).
//
// The code is in four files, one concern each: gpt2_gpu.c allocates the
// model and runs its forward and backward passes over a batch (gpu_batch.h);
// gpt2_gpu_update.c is the update, in the ways the chapters take it;
// gpt2_gpu_transfer.c moves weights, moments, logits and the loss between
// the host's fp32 and the device's storage type.
//
// Built twice (kernels/precision.h): in the fp32 build floatX is float and
// everything is fp32; in the bf16 build (chapter 02) the parameters, their
// gradients and the activations are stored in bf16, and the fp32 copies of
// record are `master` (the weights) and m, v (AdamW's moments).
//
// Memory, all on the device:
//   params, grads   one flat buffer each, num_params floatX, in gpt2_config.h's
//                   order; params_of/grads_of point into them. With chapter
//                   14's --update-in-backward, grads holds one layer's
//                   gradients at a time (layer_tables.h: layer_grads)
//   m, v            AdamW's moments, num_params floats (fp32 in every build);
//                   from chapter 10 the weight matrices' moments are 8-bit
//                   instead (m_q, v_q and their scales) and m, v hold the
//                   rest (adam_state.h: AdamLayout). With chapter 14's
//                   --offload-optimizer none of these: the moments are in
//                   `offload`, the layers' on the host (optimizer_offload.h).
//                   With chapter 15's --shard-optimizer, the moments of this
//                   rank's shard only (optimizer_shard.h: shard.local)
//   master          the fp32 master weights, num_params floats: the bf16 build
//                   only (NULL in fp32, where params are fp32 already); AdamW
//                   updates them and rounds them into params. With
//                   --shard-optimizer, the shard's: shard_values floats, and
//                   params and grads are padded to world_size shards
//   acts            every activation and activation gradient: one table,
//                   activations.h, sized by the plan; from chapter 14, some
//                   of them one layer's worth, which the backward pass
//                   recomputes for each layer (--recompute, recompute.h)
//   scratch         one float buffer, as large as the largest kernel's need
//   adamw_step      the values of the current AdamW step (adamw.h's AdamWStep),
//                   which chapter 09's fused update reads from memory
//   schedule        chapter 11: every step's lr and bias corrections
//                   (adamw_schedule.h), from which the device fills adamw_step
//   fp8             chapter 13: the FP8 copies of the linear layers' operands
//                   and their scales (fp8_layers.h), where FP8 GEMMs run
// Everything is allocated once, for the largest batch (B, T) the model will
// see; forward passes of smaller batches (sampling) use the front of the
// same buffers.
#ifndef GPT2_GPU_H
#define GPT2_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu/activations.h"
#include "files/train_state.h"
#include "gpu/fp8_layers.h"
#include "optim/adam_state.h"
#include "optim/layer_tables.h"
#include "adamw.h"
#include "model/gpt2_config.h"
#include "gpu/gpu_batch.h"
#include "gpu_context.h"
#include "gpu/gpu_ops.h"
#include "gpu/gpu_comm.h"
#include "gpu/optimizer_offload.h"
#include "optim/optimizer_shard.h"
#include "optim/optimizer.h"
#include "precision.h"
#include "gpu/run_plan.h"
#include "train/memory_budget.h"

// What a forward pass computes. Each mode does what the one before it does,
// and more; a kernel may drop a buffer that only another mode needs.
typedef enum {
    GPT2_LOGITS,  // the logits (B,T,V), rows of stride logits_stride: sampling
    GPT2_LOSS,    // and the per-token losses and their mean: validation
    GPT2_TRAIN,   // and what the backward pass needs: training
} Gpt2ForwardMode;


typedef struct {
    GPT2Config config;
    GpuContext *ctx;
    RunPlan plan;         // the run's plan (run_plan.h): its kernels, buffers and update
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    floatX *params, *grads;  // what the forward and backward passes read and write
    AdamLayout adam;         // where AdamW's moments live (adam_state.h)
    float *m, *v;            // AdamW's fp32 moments: adam.fp32_values each
    uint8_t *m_q, *v_q;      // chapter 10: the 8-bit moments, adam.q8_values each (else NULL)
    float *m_absmax, *v_absmax;  // their scales, adam.q8_blocks each
    float *master;           // fp32 master weights: the bf16 build only, else NULL
    floatX *params_of[NUM_PARAM_TENSORS], *grads_of[NUM_PARAM_TENSORS];
    int max_B, max_T;        // the activations' capacity
    int B, T;                // of the batch last uploaded
    int has_targets;         // it came with targets
    Gpt2ForwardMode last_mode;
    // Chapter 14: the buffers that every layer shares (--recompute) hold the
    // last layer's activations, as the forward pass left them; a backward
    // pass recomputes over them.
    int shared_hold_last_layer;
    GpuActivations acts;
    float *scratch;
    size_t scratch_floats;
    DeviceBatch own;            // the batch gpt2_gpu_upload_batch fills
    const DeviceBatch *batch;   // the one the passes read: &own, or gpt2_gpu_use_batch's
    HostBatch staging;          // pageable, for gpt2_gpu_forward_tokens
    float *mean_loss;           // device, one float
    float *norm;                // device, one float
    float *clip_factor;         // device, one float
    AdamWStep *adamw_step;      // device: the step's lr, corrections, clip factor (chapter 09)
    AdamWTensors adamw_tensors; // host: the fp32-state tensors' table that adamw_fused_v2 takes
    AdamWTensors adamw8_tensors;// host: the 8-bit-state tensors' (chapter 10), blocks of 256
    // Chapter 11 (gpt2_gpu_set_schedule): every step's lr and bias corrections
    // on the device.
    AdamWScheduleEntry *schedule;  // device, schedule_steps entries (NULL: none)
    int schedule_steps;
    // Chapter 14's update a layer at a time: with --update-in-backward
    // (plan.update_in_backward), where the one layer's gradients are and the
    // parts of the step's gradient norm, each taken before its gradients are
    // overwritten; with --offload-optimizer (plan.offload_optimizer), where
    // the moments are; with either, the AdamW tables of each layer.
    LayerGrads layer_grads;     // host: the gradients' layout (grads holds layer_grads.values)
    AdamWTensors *layer_tables; // host: 2 (L + 1): layer l's fp32-state table, then its 8-bit
                                // one; l = L: the tensors outside the layers (NULL: neither)
    float *norm_parts;          // device, L floats (--update-in-backward)
    AdamWConfig adamw_cfg;      // the step's betas, eps and decay, for the backward pass
    OptimizerOffload offload;   // --offload-optimizer's blocks, streams and events
    // Chapter 15: the run's ranks (NULL: one GPU), and whether this backward
    // pass averages the gradients over them (a step's last micro-batch's):
    // each layer's as soon as they are complete, on the communication stream.
    GpuComm *comm;
    int sync_grads;
    // Chapter 15's --shard-optimizer (plan.shard_optimizer): this rank's part
    // of the parameters, whose master weights and moments it keeps, and the
    // ranks' parts of the gradient norm (device, world_size floats).
    OptimizerShard shard;
    float *shard_norms;
    // Chapter 13: the plan asks for FP8 GEMMs and the GPU has them
    // (ctx->fp8); else chapter 12's bf16 GEMMs run and fp8 is empty.
    int fp8_on;
    Fp8Layers fp8;
    size_t device_bytes;        // everything this model allocated
} GPT2Gpu;

// Takes the plan's kernels and sets the context's launch settings from it,
// allocates everything the plan needs for batches up to (max_B, max_T), and
// copies the host parameters (num_params floats, gpt2_config.h's layout) to
// the device (gpt2_gpu_set_params).
void gpt2_gpu_init(GPT2Gpu *model, GpuContext *ctx, const GPT2Config *cfg, const float *params,
                   int max_B, int max_T, const RunPlan *plan);
void gpt2_gpu_free(GPT2Gpu *model);

// Checks a batch of (B,T) tokens, groups the inputs by token, and copies
// them (and the targets, with with_targets) to the device. From pageable
// memory each copy waits until the host's bytes are staged, and hb may be
// reused as soon as this returns (chapters 00-02). From pinned memory the
// copies are queued and this returns at once; the copy engine reads hb when
// the stream reaches them, so the caller must not write into hb before then
// (train_gpu.c records an event after this call and waits for it).
// Returns -1 with a reason in err for a token outside the vocabulary.
int gpt2_gpu_upload_batch(GPT2Gpu *model, HostBatch *hb, int with_targets, int B, int T,
                          char *err);


// Chapter 08: the passes read db, a training batch of (B,T) with targets,
// already on the device (or queued to be: the caller orders the copies
// before the passes), instead of the model's own.
void gpt2_gpu_use_batch(GPT2Gpu *model, const DeviceBatch *db, int B, int T);

// The forward pass over the batch last uploaded; modes LOSS and TRAIN need
// its targets and write the mean loss to *mean_loss (one float on the device).
void gpt2_gpu_forward(GPT2Gpu *model, Gpt2ForwardMode mode, float *mean_loss);

// The two above for tokens in plain host arrays (targets may be NULL for
// GPT2_LOGITS): copied into the model's pageable staging batch, uploaded,
// and run; the loss goes to model->mean_loss. For tests, checks, validation
// and sampling: the training step uploads its own batches.
int gpt2_gpu_forward_tokens(GPT2Gpu *model, const int32_t *inputs, const int32_t *targets, int B,
                            int T, Gpt2ForwardMode mode, char *err);
float gpt2_gpu_read_loss(const GPT2Gpu *model);  // model->mean_loss; waits for the device

// Zeroes the parameter gradients and fills them with d(mean loss)/d(params)
// for the last forward, which must have been a GPT2_TRAIN one.
void gpt2_gpu_backward(GPT2Gpu *model);
// Chapter 11's gradient accumulation: the same, but added to the gradients
// already there (the micro-batches after a step's first).
void gpt2_gpu_backward_add(GPT2Gpu *model);

// Clips the gradients to max_norm (<= 0: no clipping) and applies one AdamW
// step at step t (1-based) and learning rate lr. The gradient norm before
// clipping is written to *norm (one float on the device). Chapters 00-02
// read it back to compute the clipping factor on the host, and return it;
// chapter 03 (sync avoidance) computes the factor on the device, does not
// wait, and returns NaN: the norm is read later.
//
// Chapters 00-08 scale the gradients in place when clipping (model->grads
// then holds the clipped gradients), then launch AdamW once per tensor.
// Chapter 09 (fused optimizer) launches it once for every tensor, with the
// clipping folded into the update: the same weights and moments to the bit,
// but model->grads is left as the backward pass wrote it, unclipped. Without
// sync avoidance it still reads the norm back, to return it; the factor is
// the device's either way. Chapter 10 (8-bit moments) adds a second launch,
// adamw8bit_fused_v2, for the tensors whose moments are 8-bit (without the
// fused switch, adamw8bit_update_v1 per such tensor).
//
// The plan's update with the step's values given by the host (chapters
// 00-10); a plan whose values come from the device refuses it.
float gpt2_gpu_update(GPT2Gpu *model, float lr, const AdamWConfig *cfg, float max_norm, int t,
                      float *norm);

// Chapter 11: the same update with the step's values from the device's table
// (adamw_begin_step_v3), which gpt2_gpu_set_schedule uploaded: no launch
// takes an argument that changes from step to step, so the update can be
// captured in a CUDA graph, and one that sums N micro-batches (the plan's
// micro_batches) takes their mean. The device counts the steps; a replayed
// graph makes no call, so its caller checks every step against the table
// (train_gpu.c), and the kernel reads nothing past the table's end.
float gpt2_gpu_update_scheduled(GPT2Gpu *model, const AdamWConfig *cfg, float max_norm,
                                float *norm);

// Chapter 14's --update-in-backward (plan.update_in_backward): the step
// begins before its backward pass, which then applies each layer's
// gradients as soon as they are complete (gpt2_gpu_update_layer), and the
// tensors outside the layers after it; gpt2_gpu_update and
// gpt2_gpu_update_scheduled then only finish the step: the gradient norm
// from its parts, and chapter 13's amax histories. The step's values are
// written to the device as chapter 09's (_begin) or chapter 11's
// (_begin_scheduled) update writes them; the clipping is off (the plan
// refuses --grad-clip).
void gpt2_gpu_update_begin(GPT2Gpu *model, float lr, const AdamWConfig *cfg, int t, float *norm);
void gpt2_gpu_update_begin_scheduled(GPT2Gpu *model, const AdamWConfig *cfg, float *norm);

// Chapter 14's update a layer at a time (--update-in-backward, called by
// the backward pass; --offload-optimizer, by the update): _begin before the
// first layer's (with --offload-optimizer, the first blocks come in), then
// each layer l from L - 1 down to 0, and l = L, the tensors outside the
// layers, last. With --update-in-backward, layer l's part of the norm is
// taken before its update, and the buffer is then cleared for the layer
// below.
void gpt2_gpu_layer_updates_begin(GPT2Gpu *model);
void gpt2_gpu_update_layer(GPT2Gpu *model, int l);

// Chapter 11: uploads the lr and bias corrections of steps 1..steps
// (adamw_schedule_build) and sets the device's step counter to steps_done
// (the steps already taken: a resumed run's). The plan must take the step's
// values from the device (run_plan.h: device_schedule).
void gpt2_gpu_set_schedule(GPT2Gpu *model, const LrSchedule *lr, const AdamWConfig *cfg,
                           int steps, int steps_done);

// AdamW's moments to and from the host, in the model's layout (s->layout must
// be model->adam: adam_state_alloc(s, &model->adam)). With chapter 15's
// --shard-optimizer, get is a collective: every rank calls it, and rank 0's
// s receives every rank's shard in its place (optimizer_shard_gather; the
// other ranks' s may be NULL: they only send); set takes the whole state on
// every rank and keeps the rank's shard.
void gpt2_gpu_get_state(const GPT2Gpu *model, AdamState *s);
void gpt2_gpu_set_state(GPT2Gpu *model, const AdamState *s);

// Chapter 13: the FP8 layers' scaling state (fp8_layers.h: every FP8
// tensor's scale, amax and amax history, and whether a step has ended),
// to and from the host in the training state's layout (train_state.h's
// Fp8State, version 4). A delayed scale is the largest amax of the last
// FP8_HISTORY steps: a resumed run casts with the scales of the run that
// never stopped only if it has that run's histories.
// get: *s allocated here (fp8_state_free it); empty where FP8 GEMMs do not
// run (model->fp8_on 0). Waits for the device.
void gpt2_gpu_get_fp8_state(const GPT2Gpu *model, Fp8State *s);
// set: fails (-1, a reason in err) where FP8 GEMMs do not run, and for a
// state of another count of tensors (another model) or of histories of
// another length than this build's FP8_HISTORY.
int gpt2_gpu_set_fp8_state(GPT2Gpu *model, const Fp8State *s, char *err);

// Every moment as fp32 at its parameter's offset (num_params floats each),
// the 8-bit ones dequantized: for tests and reports.
void gpt2_gpu_get_moments(const GPT2Gpu *model, float *m, float *v);

// Copies between the device's fp32 buffers of num_params floats (master) and
// host arrays.
void gpt2_gpu_download(const GPT2Gpu *model, const float *device_buffer, float *host);
void gpt2_gpu_upload(GPT2Gpu *model, float *device_buffer, const float *host);

// Rows [first_row, first_row + rows) of the logits, their first `width`
// columns (V or Vp), into host floats (rows, width): the stride dropped. After
// a GPT2_TRAIN forward from chapter 04 on, the logits hold dlogits instead.
void gpt2_gpu_download_logits(const GPT2Gpu *model, size_t first_row, size_t rows, int width,
                              float *out);

// n floatX values from the device (parameters, gradients, activations) into
// n host floats: a copy in the fp32 build, a copy then an exact bf16 -> fp32
// conversion in the bf16 build.
void gpt2_gpu_download_floatx(const GPT2Gpu *model, const floatX *device, float *host, size_t n);

// The weights of record, num_params floats: the parameters in the fp32 build,
// the fp32 master weights in the bf16 build. What checkpoints save. With
// --shard-optimizer and master weights, a collective: every rank calls it,
// and rank 0's host receives every rank's shard of the master weights. With
// --shard-optimizer, host may be NULL on the ranks other than 0: they send
// their shards, where there is a collective, and receive nothing.
void gpt2_gpu_get_params(const GPT2Gpu *model, float *host);

// Sets the weights from num_params host floats. The fp32 build copies them
// into params. The bf16 build copies them into master, unchanged, and rounds
// them to nearest even (bf16_from_float_rne) into params: the same rounding
// as AdamW's after every step, so a model restored from a checkpoint of its
// master weights has exactly the bf16 weights it had when it was saved.
// With --shard-optimizer the master copy is the rank's shard's.
void gpt2_gpu_set_params(GPT2Gpu *model, const float *host);

// Where the device memory goes, by category, tensor by tensor (`--memory`):
// the run's plan (memory_plan_print), whose model part is device_bytes, the
// activations one by one among it, and the run's budget when not NULL.
void gpt2_gpu_print_memory(const GPT2Gpu *model, const MemoryBudget *budget, FILE *out);

#endif
