// floatx_host.c: see floatx_host.h.
#include "gpu/floatx_host.h"

#include <string.h>

#ifdef PRECISION_BF16
#include "util/bf16.h"

void floatx_from_floats(floatX *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_from_float_rne(src[i]);
}

void floats_from_floatx(float *dst, const floatX *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
}

float round_to_floatx(float x) { return bf16_to_float(bf16_from_float_rne(x)); }

#else

void floatx_from_floats(floatX *dst, const float *src, size_t n) {
    memcpy(dst, src, n * sizeof(float));
}

void floats_from_floatx(float *dst, const floatX *src, size_t n) {
    memcpy(dst, src, n * sizeof(float));
}

float round_to_floatx(float x) { return x; }

#endif
