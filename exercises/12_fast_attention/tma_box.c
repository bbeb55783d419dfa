// GENERATED from solutions/12_fast_attention/tma_box.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 12_fast_attention); what to do and
// how to test it: exercises/12_fast_attention/README.md.
// tma_box.c: chapter 12's exercise: the TMA's description of one head's
// tiles (common/gpu/tma_box.h says what it must hold). solutions/12_fast_attention/
// has it complete; exercises/12_fast_attention/ has its body cut out.
#include "gpu/tma_box.h"

#include <string.h>

#include "exercise.h"
#include "util/util.h"

#define BF16_BYTES 2

// ANCHOR: tma_box
int tma_box_for_heads(TmaBox *box, int B, int T, int width, int ld, int head_size, int rows,
                      char *err) {
    if (B < 1 || T < 1 || width < 1 || head_size < 1 || rows < 1)
        return fail(err, "TMA box: B=%d, T=%d, width=%d, head size %d, %d rows: each must be "
                         "at least 1", B, T, width, head_size, rows);
    if (width > ld || width % head_size != 0)
        return fail(err, "TMA box: %d values a row in rows of %d, heads of %d: the values must "
                         "fit the row and be whole heads", width, ld, head_size);
    // TODO(exercise 12_fast_attention): the limits first (rows 16-byte aligned and below 2^40 bytes, the box 1..256 in each dimension, its rows a multiple of 16 bytes and at most the 128-byte swizzle), then dims = {width, T, B}, strides = {ld, T*ld} in bytes, box = {head_size, rows, 1}
    // Replace this stub, which makes the tests fail, with your code.
    memset(box, 0, sizeof *box);  // an empty description, which cuTensorMapEncodeTiled refuses
    // TODO(exercise 12_fast_attention): delete this call once the code above is written.
    exercise_unfinished("12_fast_attention", "the TMA's description of a head's tiles",
                        "the limits first (rows 16-byte aligned and below 2^40 bytes, the box 1..256 in each dimension, its rows a multiple of 16 bytes and at most the 128-byte swizzle), then dims = {width, T, B}, strides = {ld, T*ld} in bytes, box = {head_size, rows, 1}");
    return 0;
}
// ANCHOR_END: tma_box
