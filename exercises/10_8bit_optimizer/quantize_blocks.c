// GENERATED from solutions/10_8bit_optimizer/quantize_blocks.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 10_8bit_optimizer); what to do and
// how to test it: exercises/10_8bit_optimizer/README.md.
// quantize_blocks.c: chapter 10's exercise: block-wise quantization of a
// tensor with a dynamic map (common/optim/quantize8.h says what it must do).
// solutions/10_8bit_optimizer/ has it complete; exercises/10_8bit_optimizer/
// has its body cut out.
#include <math.h>

#include "exercise.h"
#include "optim/quantize8.h"

// ANCHOR: quantize_blocks
void q8_quantize_blocks(const float *map, const float *x, size_t n, uint8_t *q, float *absmax) {
    // TODO(exercise 10_8bit_optimizer): for each block of Q8_BLOCK values (the last one shorter): its scale is the largest |x| of the block (fmaxf, fabsf), stored in absmax[block]; each value's byte is q8_quantize_value(map, x[i], scale)
    // Replace this stub, which makes the tests fail, with your code.
    (void)map, (void)x;
    for (size_t i = 0; i < n; i++) q[i] = 0;  // every byte the map's first value, every scale 0
    for (size_t b = 0; b < q8_blocks(n); b++) absmax[b] = 0.0f;
    // TODO(exercise 10_8bit_optimizer): delete this call once the code above is written.
    exercise_unfinished("10_8bit_optimizer", "block-wise quantization",
                        "for each block of Q8_BLOCK values (the last one shorter): its scale is the largest |x| of the block (fmaxf, fabsf), stored in absmax[block]; each value's byte is q8_quantize_value(map, x[i], scale)");
}
// ANCHOR_END: quantize_blocks
