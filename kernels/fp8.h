// fp8.h: chapter 13's casts from bf16 to FP8, and the scales that make 8 bits
// enough.
//
// Two FP8 formats (OCP's, which Hopper's tensor cores read):
//   e4m3: 4 exponent bits, 3 of mantissa, largest 448, smallest normal 2^-6,
//         subnormals down to 2^-9: the activations and the weights;
//   e5m2: 5 exponent bits, 2 of mantissa, largest 57344, smallest normal
//         2^-14, subnormals down to 2^-16: the gradients, whose range across
//         a tensor is wider and whose precision matters less.
// Three bits of mantissa is a relative step of 2^-3 at most (each value is
// rounded to within 2^-4 of itself); bf16's is 2^-8. What FP8 cannot hold is
// range: 18 binades for e4m3 against bf16's 254. So every FP8 tensor comes
// with a scale, one float, and stores x / scale: real = stored * scale.
//
// The scale of a tensor is a power of two chosen so that its largest
// magnitude, amax, lands at or just below the format's largest value:
//   scale = 2^ceil(log2(amax / max_of_format)).
// A power of two because dividing by one rounds nothing: the only rounding in
// a cast is the format's own, and the GEMM's product of two scales is exact.
//
// Delayed scaling (Transformer Engine's recipe): a tensor produced inside the
// step is cast with a scale computed from the amaxes of the steps before (the
// largest of the last FP8_HISTORY), while the cast itself measures this step's
// amax for the steps after. One pass reads the tensor, where a scale from the
// tensor's own amax (current scaling) needs its amax before the cast, so a
// pass of its own. A value that outgrows the history's largest saturates at
// the format's largest (never infinity). The first step of a run has no
// history: it runs current scaling (fp8_cast_mode).
//
// amax is gathered with an integer atomicMax on the bits of |x| (non-negative
// floats order as their bits do): a maximum does not depend on the order its
// operands arrive in, so it is the same on every run, unlike a float sum.
#ifndef FP8_H
#define FP8_H

#include <stddef.h>
#include <stdint.h>

#include "gemm_operands.h"
#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FP8_HISTORY 16       // steps of amax a delayed scale looks back over
#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f

// One FP8 tensor's scaling state, on the device. 80 bytes: in an array of
// them each scale stays 16-byte aligned, which cuBLASLt wants of a scale
// pointer (with 72 it refuses the GEMM as "not supported").
typedef struct {
    float scale;                  // real = stored * scale: what the GEMM reads
    float amax;                   // this step's max |real| so far (0 at a step's start)
    float history[FP8_HISTORY];   // the amaxes of the last steps, the latest first
    float unused[2];              // to 80 bytes
} Fp8Meta;

// How a cast picks its scale: from the history (delayed), or from the
// tensor's own amax, measured by a pass before the cast (current).
typedef enum { FP8_DELAYED, FP8_CURRENT } Fp8ScaleMode;

// Rows and columns of a cast must be multiples of this (the FP8 GEMMs need
// every leading dimension to be a multiple of 16 bytes anyway).
#define FP8_CAST_ALIGN 16

// What a cast reads and writes. `in` is (rows, cols) row-major floatX (the
// bf16 build only); the value cast at (r, c) is
//   FP8_COPY   in[r, c]
//   FP8_GELU   gelu(in[r, c])                    (the forward's MLP, tanh form)
//   FP8_DGELU  in[r, c] * gelu'(pre[r, c])       (its backward: in = d gelu(pre))
typedef enum { FP8_COPY, FP8_GELU, FP8_DGELU } Fp8CastOp;

typedef struct {
    Fp8CastOp op;
    const floatX *in, *pre;  // pre: FP8_DGELU's GELU input (B,T,4C), else NULL
    int rows, cols;
    GemmPrecision format;    // GEMM_E4M3 or GEMM_E5M2
    Fp8Meta *meta;           // its scale is read, its amax raised
    void *out;               // (rows, cols) FP8, row-major, or NULL
    void *out_t;             // (cols, rows) FP8: the transpose, or NULL
    // The column sums of the values (before the cast, in fp32), for a bias
    // gradient: partial sums of each FP8_CAST_TILE rows into col_partials
    // ((rows / FP8_CAST_TILE rounded up) x cols floats), then added in
    // order into dbias (cols, floatX, ACCUMULATES). NULL: none.
    float *col_partials;
    floatX *dbias;
} Fp8Cast;

#define FP8_CAST_TILE 64  // a block's rows and columns

// Floats of col_partials a cast of `rows` x `cols` needs.
size_t fp8_cast_partials_floats(int rows, int cols);

// Runs the cast: with FP8_CURRENT, first a pass that measures amax and sets
// meta->scale from it; with FP8_DELAYED, the scale already in meta. Either
// way raises meta->amax to the tensor's. Exits on rows or cols not a
// multiple of FP8_CAST_ALIGN.
void fp8_cast(const GpuContext *ctx, const Fp8Cast *cast, Fp8ScaleMode mode);

// The end of a step: for each of the n metas, the history shifted by one and
// its amax put first, the amax reset to 0, and the scale recomputed from the
// history's largest for the format of meta i (formats[i], a GemmPrecision,
// on the device). A meta whose history is all 0 keeps its scale.
void fp8_scales_advance(const GpuContext *ctx, Fp8Meta *metas, const uint8_t *formats, int n);

// The largest finite value of a format, and the power-of-two scale for an
// amax (host versions of the device arithmetic, for tests and reports).
float fp8_format_max(GemmPrecision format);
float fp8_scale_for_amax(float amax, GemmPrecision format);

#ifdef __cplusplus
}
#endif

#endif
