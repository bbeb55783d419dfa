// floatx_host.h: arrays of the storage type, floatX (kernels/precision.h), on
// the host: made from floats and turned back into floats. In the fp32 build
// both are copies; in the bf16 build floatX is, to the host, the 16 bits of a
// bf16 value, and the conversions are bf16.h's: to nearest even one way
// (what the GPU's __float2bfloat16_rn does, and what AdamW's update stores),
// exact the other way.
#ifndef FLOATX_HOST_H
#define FLOATX_HOST_H

#include <stddef.h>

#include "precision.h"

void floatx_from_floats(floatX *dst, const float *src, size_t n);
void floats_from_floatx(float *dst, const floatX *src, size_t n);

// x as floatX would store it, back as a float (x itself in the fp32 build).
float round_to_floatx(float x);

#endif
