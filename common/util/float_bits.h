// float_bits.h: an fp32 value's 32 bits, and the value of 32 bits: what the
// tests and demos of rounding (bf16, TF32, stochastic rounding) look at.
// memcpy, not a pointer cast or a union: the one way C and C++ both define.
#ifndef FLOAT_BITS_H
#define FLOAT_BITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float float_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
