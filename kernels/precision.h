// precision.h: the storage type of the trainer, floatX, chosen when it is
// built: float by default, bf16 with -DPRECISION_BF16 (chapter 02). It is the
// one build-time choice of the trainer (make train CH=N picks the binary).
//
// A plain C header, like gpu_context.h: the trainer and the tests (gcc) and
// the .cu files (nvcc) all include it and see the same sizes.
//
// What is stored in floatX, 2 bytes per value in the bf16 build:
//   - the parameters the forward and backward passes read (in bf16, the
//     working copy, rounded from the fp32 master weights after every step);
//   - every activation: the embeddings, the layernorms' outputs, qkv, the
//     attention scores and probabilities, the MLP's, the residual stream, the
//     logits and the probabilities of the softmax;
//   - every gradient: of the activations and of the parameters.
// Those are the big buffers, the ones every kernel streams through memory
// and the ones the GEMMs multiply: halving them halves the memory traffic,
// and bf16 operands run on the tensor cores.
//
// What stays fp32 in every build, because 8 bits of mantissa are not enough
// there (bf16 keeps 8 significant bits: a relative step of 2^-8 = 0.4%):
//   - the layernorms' mean and rstd (B,T): the backward pass rebuilds
//     xhat = (x - mean) * rstd from them, and an error in a row's statistics
//     shifts every value of the row the same way;
//   - the per-token losses, their mean and the loss gradients (B,T): a loss
//     near 3 rounded to bf16 moves by up to 0.008, more than a step changes it;
//   - AdamW's moments m and v and the fp32 master weights: a step moves a
//     weight by about lr (6e-4 at the peak, less as it decays), 0.6% of a
//     weight of 0.1 at best, and bf16 rounds any change smaller than 0.2% to
//     0.4% of a value away: most updates would vanish and training stall.
//     The optimizer updates the fp32 master copy and writes a rounded copy
//     to floatX;
//   - every accumulator: a sum of many terms (the reductions, the GEMMs'
//     dot products, the column sums of the bias gradients, the embedding's
//     scatter) is added in fp32 registers and rounded once, when stored;
//   - the softmaxes' row max and sum of exponentials;
//   - the partial sums of squares of the gradient norm (and their double
//     total): a sum over 124M values.
// Every kernel computes in fp32: it loads floatX, converts with x2f, computes,
// and rounds back with f2x when it stores. In the fp32 build floatX is float
// and both are the identity, so that build computes exactly what it did
// before floatX existed, bit for bit.
//
// Host code never does arithmetic on floatX: in the bf16 build it is, to gcc,
// an opaque 2-byte integer that only cudaMemcpy moves (the host converts to
// and from float with bit operations of its own where it needs to).
#ifndef PRECISION_H
#define PRECISION_H

#include <library_types.h>  // cudaDataType: CUDA_R_32F, CUDA_R_16BF

// ANCHOR: floatx_type
#ifdef PRECISION_BF16

#ifdef __CUDACC__
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
#else
#include <stdint.h>
typedef uint16_t floatX;  // bf16 bits: sign, 8 exponent bits, 7 mantissa bits
#endif
// floatX's type for cuBLAS (cublasGemmEx's A, B and C).
#define FLOATX_CUDA_TYPE CUDA_R_16BF
#define PRECISION_NAME "bf16"

#else

typedef float floatX;
#define FLOATX_CUDA_TYPE CUDA_R_32F
#define PRECISION_NAME "fp32"

#endif
// ANCHOR_END: floatx_type

#ifdef __CUDACC__
// ANCHOR: floatx_convert
// x2f: a stored value, exactly, as float (bf16 is the top half of a float).
// f2x: a float rounded to floatX, to nearest, ties to even: the rounding that
// is unbiased on average, as PyTorch's .to(torch.bfloat16).
#ifdef PRECISION_BF16
__device__ __forceinline__ float x2f(floatX x) { return __bfloat162float(x); }
__device__ __forceinline__ floatX f2x(float x) { return __float2bfloat16_rn(x); }
#else
__device__ __forceinline__ float x2f(floatX x) { return x; }
__device__ __forceinline__ floatX f2x(float x) { return x; }
#endif
// ANCHOR_END: floatx_convert
#endif

#endif
