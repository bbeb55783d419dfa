// gpt2_gpu.h: GPT-2 on the GPU: the same model as the CPU reference
// (gpt2_cpu.h), layer for layer, with each layer a launcher from kernels/.
//
// Built twice (kernels/precision.h): in the fp32 build floatX is float and
// everything is fp32; in the bf16 build (chapter 02) the parameters, their
// gradients and the activations are stored in bf16, and the fp32 copies of
// record are `master` (the weights) and m, v (AdamW's moments).
//
// Memory, all on the device:
//   params, grads         one flat buffer each, num_params floatX, in
//                         gpt2_config.h's order; params_of/grads_of point into them
//   m, v                  AdamW's moments, num_params floats (fp32 in every build)
//   master                the fp32 master weights, num_params floats: the bf16
//                         build only (NULL in fp32, where params are fp32
//                         already); AdamW updates them and rounds them into params
//   acts                  what the backward pass needs, per layer, as on the CPU
//                         (without the scores before the softmax, which the
//                         attention kernels keep in scratch)
//   grad buffers          ONE set of per-layer gradient buffers, reused by every
//                         layer on the way back, and one running gradient of the
//                         residual stream: what PyTorch's caching allocator ends
//                         up doing for eager code
//   scratch               one float buffer, as large as the largest kernel's need
// Which activations stay fp32 in the bf16 build, and why: kernels/precision.h
// (the layernorms' mean and rstd, the per-token losses and their gradients).
// Everything is allocated once, for the largest batch (B, T) the model will
// see; forward passes of smaller batches (sampling) reuse the same buffers.
#ifndef GPT2_GPU_H
#define GPT2_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "encoder.h"
#include "gpt2_config.h"
#include "gpu_context.h"
#include "optimizer.h"
#include "precision.h"

typedef struct {
    floatX *encoded;                      // (B,T,C)
    floatX *ln1;                          // (L,B,T,C)
    float *ln1_mean, *ln1_rstd;           // (L,B,T), (L,B,T): fp32 in every build
    floatX *qkv;                          // (L,B,T,3C)
    floatX *atty;                         // (L,B,T,C)
    floatX *att;                          // (L,B,NH,T,T)
    floatX *attproj;                      // (L,B,T,C)
    floatX *residual2;                    // (L,B,T,C)
    floatX *ln2;
    float *ln2_mean, *ln2_rstd;
    floatX *fch, *fch_gelu;               // (L,B,T,4C)
    floatX *fcproj;                       // (L,B,T,C)
    floatX *residual3;                    // (L,B,T,C)
    floatX *lnf;                          // (B,T,C)
    float *lnf_mean, *lnf_rstd;           // (B,T), (B,T)
    floatX *logits, *probs;               // (B,T,Vp)
    float *losses;                        // (B,T): fp32 in every build
} GpuActivations;

// Gradients of the activations: one layer's worth, reused by every layer.
typedef struct {
    floatX *residual;  // (B,T,C): d(loss)/d(the residual stream) at the current depth
    floatX *ln;        // (B,T,C): of ln1 or ln2
    floatX *qkv;       // (B,T,3C)
    floatX *atty;      // (B,T,C)
    floatX *fch, *fch_gelu;  // (B,T,4C)
    floatX *lnf;       // (B,T,C)
    floatX *logits;    // (B,T,Vp)
    float *losses;     // (B,T): fp32 in every build
} GpuGradBuffers;

typedef struct {
    GPT2Config config;
    GpuContext *ctx;
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    floatX *params, *grads;  // what the forward and backward passes read and write
    float *m, *v;            // AdamW's moments
    float *master;           // fp32 master weights: the bf16 build only, else NULL
    floatX *params_of[NUM_PARAM_TENSORS], *grads_of[NUM_PARAM_TENSORS];
    int max_B, max_T;    // the activations' capacity
    int B, T;            // of the last forward
    GpuActivations acts;
    GpuGradBuffers d;
    float *scratch;
    size_t scratch_floats;
    int32_t *inputs, *targets;  // device, (B,T)
    int32_t *buckets;           // device, the encoder's positions grouped by token
    EncoderBuckets host_buckets;  // gpt2_gpu_forward builds them here (pageable)
    int num_buckets;            // of the batch last uploaded (encoder_backward_v1's grid)
    float *mean_loss;           // device, one float
    float *norm;                // device, one float
    float *clip_factor;         // device, one float (gpt2_gpu_update_async)
    size_t device_bytes;        // everything this model allocated
} GPT2Gpu;

// Allocates everything for batches up to (max_B, max_T) and copies the host
// parameters (num_params floats, gpt2_config.h's layout) to the device
// (gpt2_gpu_set_params).
void gpt2_gpu_init(GPT2Gpu *model, GpuContext *ctx, const GPT2Config *cfg, const float *params,
                   int max_B, int max_T);
void gpt2_gpu_free(GPT2Gpu *model);

// Forward over host tokens (B,T), which are copied to the device. With targets
// (may be NULL) it also computes the per-token losses and their mean, which
// stays on the device (model->mean_loss) until gpt2_gpu_read_loss.
// Returns -1 with a reason in err for a token outside the vocabulary.
int gpt2_gpu_forward(GPT2Gpu *model, const int32_t *inputs, const int32_t *targets, int B, int T,
                     char *err);
float gpt2_gpu_read_loss(const GPT2Gpu *model);  // waits for the device

// gpt2_gpu_forward in two halves, for chapter 03, where the host must not
// wait. First the batch: host tokens (B,T) in PINNED memory, and `buckets`,
// an EncoderBuckets with pinned `packed` (encoder_buckets_init_pinned) that
// this fills from inputs; it queues their copies to the device with
// cudaMemcpyAsync and returns without waiting. The copies read inputs,
// targets and buckets->packed when the stream reaches them: the caller must
// not write into them before then (train_gpu.c records an event right after
// this call and waits for it before reusing the buffers). Returns -1 with a
// reason in err for a token outside the vocabulary.
int gpt2_gpu_upload_batch_async(GPT2Gpu *model, const int32_t *inputs, const int32_t *targets,
                                EncoderBuckets *buckets, int B, int T, char *err);
// Then the forward pass over the batch last uploaded (by either function).
// With targets, the mean loss is written to *mean_loss: one float on the
// device (gpt2_gpu_forward passes model->mean_loss).
void gpt2_gpu_forward_uploaded(GPT2Gpu *model, int with_targets, float *mean_loss);

// Zeroes the parameter gradients and fills them with d(mean loss)/d(params)
// for the last forward, which must have had targets.
void gpt2_gpu_backward(GPT2Gpu *model);

// Clips the gradients to max_norm (<= 0: no clipping) and applies one AdamW
// step at step t (1-based) and learning rate lr, one launch per tensor.
// Returns the gradient norm before clipping (read back: waits for the device).
float gpt2_gpu_update(GPT2Gpu *model, float lr, const AdamWConfig *cfg, float max_norm, int t);

// Chapter 03: the same update, bit for bit, without waiting: the norm is
// written to *norm (one float on the device) for the caller to read back
// when it likes, and the clipping factor is computed from it on the device.
void gpt2_gpu_update_async(GPT2Gpu *model, float lr, const AdamWConfig *cfg, float max_norm, int t,
                           float *norm);

// Copies between the device's fp32 buffers (m, v, master) and host arrays of
// num_params floats.
void gpt2_gpu_download(const GPT2Gpu *model, const float *device_buffer, float *host);
void gpt2_gpu_upload(GPT2Gpu *model, float *device_buffer, const float *host);

// n floatX values from the device (parameters, gradients, activations) into
// n host floats: a copy in the fp32 build, a copy then an exact bf16 -> fp32
// conversion in the bf16 build.
void gpt2_gpu_download_floatx(const floatX *device, float *host, size_t n);

// The weights of record, num_params floats: the parameters in the fp32 build,
// the fp32 master weights in the bf16 build. What checkpoints save.
void gpt2_gpu_get_params(const GPT2Gpu *model, float *host);

// Sets the weights from num_params host floats. The fp32 build copies them
// into params. The bf16 build copies them into master, unchanged, and rounds
// them to nearest even (bf16_from_float_rne) into params: the same rounding
// as AdamW's after every step, so a model restored from a checkpoint of its
// master weights has exactly the bf16 weights it had when it was saved.
void gpt2_gpu_set_params(GPT2Gpu *model, const float *host);

#endif
