// flops.h: how much arithmetic a training step does, and how much the GPU
// could do: the two numbers behind TFLOP/s and MFU.
#ifndef FLOPS_H
#define FLOPS_H

#include "model/gpt2_config.h"

// FLOPs of forward plus backward, per token, at sequence length T:
//   6 N + 12 L C T
// N counts the weights that take part in matrix products: every transformer
// block's, and the lm_head's (wte's, when tied). Each such weight costs 2
// FLOPs per token forward (a multiply and an add) and 4 backward (the
// gradients of its input and of itself). The embeddings' lookups multiply
// nothing. Attention's two products with the sequence, q k^T and att v, cost
// 2 * 2 * T * C per token per layer forward and twice that backward: 12 L C T.
// (The causal mask halves the useful work; like everyone's MFU, ours counts
// the full T.)
double flops_per_token(const GPT2Config *cfg, int T);

// Dense bf16 tensor-core peak in TFLOP/s for a GPU name as CUDA reports it
// ("NVIDIA H100 80GB HBM3"), from the vendor's datasheets; 0 when unknown.
// MFU is measured against it in every chapter, fp32 ones included, so that
// the chapters share one yardstick.
double peak_bf16_tflops(const char *device_name);

// Memory bandwidth in TB/s (bytes read plus written per second) from the
// same datasheets, for the rooflines of the kernel lab; 0 when unknown.
double peak_hbm_tbps(const char *device_name);

#endif
