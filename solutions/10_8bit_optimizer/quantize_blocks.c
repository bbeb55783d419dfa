// quantize_blocks.c: chapter 10's exercise: block-wise quantization of a
// tensor with a dynamic map (common/optim/quantize8.h says what it must do).
// solutions/10_8bit_optimizer/ has it complete; exercises/10_8bit_optimizer/
// has its body cut out.
#include <math.h>

#include "exercise.h"
#include "optim/quantize8.h"

// ANCHOR: quantize_blocks
void q8_quantize_blocks(const float *map, const float *x, size_t n, uint8_t *q, float *absmax) {
    // EXERCISE BEGIN: for each block of Q8_BLOCK values (the last one shorter): its scale is the largest |x| of the block (fmaxf, fabsf), stored in absmax[block]; each value's byte is q8_quantize_value(map, x[i], scale)
    // EXERCISE STUB: (void)map, (void)x;
    // EXERCISE STUB: for (size_t i = 0; i < n; i++) q[i] = 0;  // every byte the map's first value, every scale 0
    // EXERCISE STUB: for (size_t b = 0; b < q8_blocks(n); b++) absmax[b] = 0.0f;
    for (size_t start = 0; start < n; start += Q8_BLOCK) {
        const size_t end = n - start < Q8_BLOCK ? n : start + Q8_BLOCK;
        float scale = 0.0f;
        for (size_t i = start; i < end; i++) scale = fmaxf(scale, fabsf(x[i]));
        for (size_t i = start; i < end; i++) q[i] = q8_quantize_value(map, x[i], scale);
        absmax[start / Q8_BLOCK] = scale;
    }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: block-wise quantization
}
// ANCHOR_END: quantize_blocks
