// gpt2_cpu.h: the CPU reference GPT-2: forward and backward of every layer and
// of the whole model, in plain loops. It is the oracle every GPU chapter is
// compared against.
//
// The same source is compiled twice (gpt2_cpu_f32.c and gpt2_cpu_f64.c):
//   float:  GPT2Cpu,     cpu_layernorm_forward, gpt2_cpu_forward, ...
//   double: GPT2Cpu_f64, cpu_layernorm_forward_f64, gpt2_cpu_forward_f64, ...
// The float build is the reference the trainer and the GPU tests use; the
// double build exists so that finite-difference gradient checks are precise
// (in float, the difference quotient drowns in rounding) and so that the float
// build can itself be measured against higher precision.
//
// Layouts: activations are row-major with the batch outermost, (B, T, C) for a
// sequence of vectors and (B, H, T, T) for attention scores; weights are
// (out_features, in_features). Every *_backward ACCUMULATES into its gradient
// outputs (+=), so callers zero them first (gpt2_cpu_zero_grad does).
#ifndef GPT2_CPU_H
#define GPT2_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt2_config.h"

#define REAL float
#define FN(name) name
#include "model/gpt2_cpu_api.inc"
#undef REAL
#undef FN

#define REAL double
#define FN(name) name##_f64
#include "model/gpt2_cpu_api.inc"
#undef REAL
#undef FN

#endif
