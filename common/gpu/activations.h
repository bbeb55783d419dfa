// activations.h: every buffer the GPU model's forward and backward passes
// write, declared once, in one table (activations.c): its name, its shape,
// its precision and when it is needed. The table sizes them from the model's
// config, the largest batch (B, T) and the run's plan (run_plan.h), allocates
// them in one piece, frees them in one place, and reports their memory
// (`--memory`).
//
// Shapes, row-major (L layers, C channels, NH heads, Vp padded vocabulary).
// The forward pass keeps, per layer, what the backward pass needs; the
// backward pass has one layer's worth of gradient buffers, reused by every
// layer on the way down, and one running gradient of the residual stream:
// what PyTorch's caching allocator ends up doing for eager code.
//
// Chapter 14 (--recompute, recompute.h): a stacked (L,...) tensor that the
// plan's level recomputes holds one layer instead, (1,...): every layer's
// forward pass writes it in turn, and the backward pass writes it again,
// for each layer, before that layer's backward pass reads it. The table says
// from which level each tensor is recomputed; activations_layer says where
// layer l's slice is.
// Which tensors are fp32 in every build, and why: kernels/precision.h.
#ifndef ACTIVATIONS_H
#define ACTIVATIONS_H

#include <stddef.h>
#include <stdio.h>

#include "gpu/run_plan.h"
#include "model/gpt2_config.h"
#include "precision.h"

// The gradients of the activations: one layer's worth.
typedef struct {
    floatX *residual;  // (B,T,C): d(loss)/d(residual stream) at the current depth
    floatX *ln;        // (B,T,C): of ln1 or ln2
    floatX *qkv;       // (B,T,3C)
    floatX *atty;      // (B,T,C)
    floatX *fch;       // (B,T,4C): of fch (and, on the way, of fch_gelu, in place)
    floatX *lnf;       // (B,T,C)
    floatX *logits;    // (B,T,Vp)
    float *losses;     // (B,T)
} GpuActGrads;

typedef struct {
    floatX *encoded;              // (B,T,C)
    floatX *ln1;                  // (L,B,T,C)
    float *ln1_mean, *ln1_rstd;   // (L,B,T)
    floatX *qkv;                  // (L,B,T,3C)
    floatX *atty;                 // (L,B,T,C)
    floatX *att;                  // (L,B,NH,T,T): attention's probabilities (chapters 00-04)
    float *att_lse;               // (L,B,NH,T): their rows' log-sum-exp (chapter 05 on)
    floatX *attproj;              // (L,B,T,C)
    floatX *residual2;            // (L,B,T,C)
    floatX *ln2;                  // (L,B,T,C)
    float *ln2_mean, *ln2_rstd;   // (L,B,T)
    floatX *fch, *fch_gelu;       // (L,B,T,4C): before and after GELU
    floatX *fcproj;               // (L,B,T,C)
    floatX *residual3;            // (L,B,T,C)
    floatX *lnf;                  // (B,T,C)
    float *lnf_mean, *lnf_rstd;   // (B,T)
    floatX *logits, *probs;       // (B,T,Vp)
    float *losses;                // (B,T)
    GpuActGrads d;
    void *memory;                 // the one allocation they all live in
    size_t bytes;
    Recompute recompute;          // the plan's level, which they were allocated for
} GpuActivations;

// Allocates every tensor the run's plan needs for batches up to (B, T); the
// others stay NULL. Exits with a message on out-of-memory (gpu_malloc).
void activations_alloc(GpuActivations *a, const GPT2Config *cfg, int B, int T,
                       const RunPlan *p);
void activations_free(GpuActivations *a);

// The bytes activations_alloc takes for these arguments, allocating nothing.
size_t activations_bytes(const GPT2Config *cfg, int B, int T, const RunPlan *p);

// Which of a stacked tensor's layers holds layer l: l, or 0 for a tensor the
// plan recomputes (chapter 14), whose one layer every layer shares. `field`
// is the tensor's offsetof in GpuActivations, which must be a stacked one.
int activations_layer(const GpuActivations *a, size_t field, int l);

// One line per tensor (name, shape, type, MiB; "-" for those not needed;
// one layer's shape for those recomputed), for batches of (B, T): the
// activations' rows of `--memory` (memory_plan_print), which prints their
// total above them.
void activations_print(FILE *out, const GPT2Config *cfg, int B, int T, const RunPlan *p);

#endif
