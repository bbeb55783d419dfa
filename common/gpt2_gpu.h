// gpt2_gpu.h: GPT-2 on the GPU, in FP32: the same model as the CPU reference
// (gpt2_cpu.h), layer for layer, with each layer a launcher from kernels/.
//
// Memory, all on the device:
//   params, grads, m, v   one flat buffer each, num_params floats, in
//                         gpt2_config.h's order; params_of/grads_of point into them
//   acts                  what the backward pass needs, per layer, as on the CPU
//                         (without the scores before the softmax, which the
//                         attention kernels keep in scratch)
//   grad buffers          ONE set of per-layer gradient buffers, reused by every
//                         layer on the way back, and one running gradient of the
//                         residual stream: what PyTorch's caching allocator ends
//                         up doing for eager code
//   scratch               one buffer, as large as the largest kernel's need
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

typedef struct {
    float *encoded;                       // (B,T,C)
    float *ln1, *ln1_mean, *ln1_rstd;     // (L,B,T,C), (L,B,T), (L,B,T)
    float *qkv;                           // (L,B,T,3C)
    float *atty;                          // (L,B,T,C)
    float *att;                           // (L,B,NH,T,T)
    float *attproj;                       // (L,B,T,C)
    float *residual2;                     // (L,B,T,C)
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;                // (L,B,T,4C)
    float *fcproj;                        // (L,B,T,C)
    float *residual3;                     // (L,B,T,C)
    float *lnf, *lnf_mean, *lnf_rstd;     // (B,T,C), (B,T), (B,T)
    float *logits, *probs;                // (B,T,Vp)
    float *losses;                        // (B,T)
} GpuActivations;

// Gradients of the activations: one layer's worth, reused by every layer.
typedef struct {
    float *residual;   // (B,T,C): d(loss)/d(the residual stream) at the current depth
    float *ln;         // (B,T,C): of ln1 or ln2
    float *qkv;        // (B,T,3C)
    float *atty;       // (B,T,C)
    float *fch, *fch_gelu;  // (B,T,4C)
    float *lnf;        // (B,T,C)
    float *logits;     // (B,T,Vp)
    float *losses;     // (B,T)
} GpuGradBuffers;

typedef struct {
    GPT2Config config;
    GpuContext *ctx;
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    float *params, *grads, *m, *v;
    float *params_of[NUM_PARAM_TENSORS], *grads_of[NUM_PARAM_TENSORS];
    int max_B, max_T;    // the activations' capacity
    int B, T;            // of the last forward
    GpuActivations acts;
    GpuGradBuffers d;
    float *scratch;
    size_t scratch_floats;
    int32_t *inputs, *targets;  // device, (B,T)
    int32_t *buckets;           // device, the encoder's positions grouped by token
    EncoderBuckets host_buckets;
    float *mean_loss;           // device, one float
    float *norm;                // device, one float
    size_t device_bytes;        // everything this model allocated
} GPT2Gpu;

// Allocates everything for batches up to (max_B, max_T) and copies the host
// parameters (num_params floats, gpt2_config.h's layout) to the device.
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

// Zeroes the parameter gradients and fills them with d(mean loss)/d(params)
// for the last forward, which must have had targets.
void gpt2_gpu_backward(GPT2Gpu *model);

// Clips the gradients to max_norm (<= 0: no clipping) and applies one AdamW
// step at step t (1-based) and learning rate lr, one launch per tensor.
// Returns the gradient norm before clipping (read back: waits for the device).
float gpt2_gpu_update(GPT2Gpu *model, float lr, const AdamWConfig *cfg, float max_norm, int t);

// Copies between the device buffers and host arrays of num_params floats.
void gpt2_gpu_download(const GPT2Gpu *model, const float *device_buffer, float *host);
void gpt2_gpu_upload(GPT2Gpu *model, float *device_buffer, const float *host);

#endif
