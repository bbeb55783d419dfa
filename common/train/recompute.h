// recompute.h: chapter 14's --recompute LEVEL, the activations that the GPU
// model's backward pass computes again, from what the forward pass kept,
// instead of the forward pass keeping them for every layer (activations.h
// says which tensor goes at which level; gpt2_gpu.c does the recomputing).
//
// Each level recomputes what the one before it does, and more. Every level
// trains the same bits as none: what is recomputed is the forward pass's own
// arithmetic, the same kernels on the same inputs (with chapter 13's FP8,
// the casts again with the forward pass's scales; a cast's amax is an
// integer maximum, which a second pass over the same values leaves as it
// was, so the amax histories advance once a step, as without recompute).
//
// What a layer keeps, a token, without recompute (flash attention): 18C
// floatX values (X bytes each: 2 in bf16, 4 in fp32; C channels), 36C bytes
// in bf16, and 16 bytes of layernorm statistics and 4 NH of attention's row
// statistics (NH heads); with chapter 13's FP8, 7C bytes more of operands.
// Each level gives back, a token, for every layer but the one whose buffers
// all layers share (test_memory_plan.c checks these sums):
//   gelu   GELU's output, 4C X (8C bytes in bf16); with FP8 also fc's
//          projection's operand, 4C bytes (the bf16 output is never made
//          then)
//   norms  and ln1, ln2: 2C X (4C bytes in bf16) and their mean and rstd,
//          16 bytes; with FP8 also qkv's and fc's operands, 2C bytes
//   block  and the rest of the block but the residual stream leaving it:
//          qkv, attention's output and its projection, the residual between
//          the two halves, fc's output and its projection, 11C X (22C bytes
//          in bf16), and attention's row statistics, 4 NH bytes (in
//          chapters 00-04 its probabilities, NH T X); with FP8 also the
//          projection's operand, C bytes. A layer then keeps C X a token.
// At GPT-2 124M (C = 768, 12 layers, 12 heads) in bf16, B = 16, T = 1024,
// the layers' activations are 5.1 GiB without recompute, and 0.7 GiB with
// block: 12 residual streams and one layer of the rest.
// What it costs is the recomputing, in the backward pass: norms launches two
// layernorms a layer and gelu one kernel (a cast, in FP8), or in bf16 fc's
// GEMM again, whose epilogue made GELU's output (gpt2_gpu.c says why); block
// reruns the layer's forward pass but for fc's projection. The last layer's
// are still in the buffers when the backward pass starts: L - 1 layers are
// recomputed.
#ifndef RECOMPUTE_H
#define RECOMPUTE_H

#include <string.h>

// ANCHOR: recompute_levels
typedef enum {
    RECOMPUTE_NONE,   // every activation the backward pass reads, kept per layer
    RECOMPUTE_GELU,   // GELU's output (B,T,4C)
    RECOMPUTE_NORMS,  // and the layernorms' outputs ln1, ln2 (B,T,C), with their statistics
    RECOMPUTE_BLOCK,  // and the rest of each block: only the residual stream leaving it is kept
    RECOMPUTE_LEVELS
} Recompute;
// ANCHOR_END: recompute_levels

// The levels' names, as --recompute takes them and errors list them.
#define RECOMPUTE_CHOICES "none, gelu, norms or block"

static inline const char *recompute_name(Recompute r) {
    static const char *const names[RECOMPUTE_LEVELS] = {"none", "gelu", "norms", "block"};
    return (unsigned)r < RECOMPUTE_LEVELS ? names[r] : "?";
}

// The level named s: 0 and *out set, or -1 when s names none.
static inline int recompute_from_name(const char *s, Recompute *out) {
    for (int r = 0; r < RECOMPUTE_LEVELS; r++)
        if (!strcmp(s, recompute_name((Recompute)r))) {
            *out = (Recompute)r;
            return 0;
        }
    return -1;
}

#endif
