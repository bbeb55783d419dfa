// gemm_operands.h: how a GEMM's operands are stored, which the launcher slots
// of the linear layer carry (gpu_ops.h: matmul_forward, matmul_backward).
//
// Every chapter up to 12 runs its GEMMs on operands of the build's storage
// type, floatX, and passes NULL: "floatX, unscaled". Chapter 13's FP8 GEMMs
// store an operand in 8 bits (e4m3, or e5m2 for gradients), each with the
// scale that turns its stored values back into the real ones (fp8.h).
//
// Hopper's FP8 products read both operands K-major: along the dimension the
// sum runs over. The forward pass's are (W's rows and X's rows both run
// along C); the backward pass's are not: dinp = dout @ W sums over W's
// rows, dweight = dout^T @ X over X's and dout's. So each FP8 operand comes
// as the rows the forward pass reads and, for the backward pass, its
// transpose, made by the same cast (fp8.h).
// A plain C header: the model (gcc) and the launchers (nvcc) include it.
#ifndef GEMM_OPERANDS_H
#define GEMM_OPERANDS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GEMM_FLOATX,  // the build's storage type (kernels/precision.h)
    GEMM_E4M3,    // FP8: 4 exponent bits, 3 of mantissa (chapter 13)
    GEMM_E5M2,    // FP8: 5 exponent bits, 2 of mantissa (chapter 13)
} GemmPrecision;

// ANCHOR: gemm_operands
// One operand in FP8: a (rows, cols) matrix stored row-major, as its floatX
// original is, and its transpose (cols, rows).
typedef struct {
    GemmPrecision format;
    const void *rows;     // (rows, cols): what the forward pass reads
    const void *cols;     // (cols, rows): what the backward pass reads
    const float *scale;   // device, one float: real = stored * scale
} GemmOperand;

// A linear layer's three: W (OC, C), X (B*T, C), dout (B*T, OC).
//   forward   out = X W^T          reads weight.rows, input.rows
//   backward  dinp = dout W        reads grad.rows, weight.cols (W^T)
//             dweight += dout^T X  reads grad.cols (dout^T), input.cols (X^T)
//
// fast_accum: the products whose sum runs over a layer's width (forward: C
// or 4C; dinp: OC) let the tensor cores keep their partial sums at their own
// precision, not promoted to fp32 every few steps of K; dweight's sum over
// B*T always promotes (matmul_lt.cu: matmul_fp8).
typedef struct {
    GemmOperand weight, input, grad;
    int fast_accum;
} GemmOperands;
// ANCHOR_END: gemm_operands

// Whether a launcher given `operands` runs them as floatX: NULL, or every
// operand GEMM_FLOATX (a zeroed struct is).
static inline int gemm_operands_are_floatx(const GemmOperands *operands) {
    return !operands || (operands->weight.format == GEMM_FLOATX &&
                         operands->input.format == GEMM_FLOATX &&
                         operands->grad.format == GEMM_FLOATX);
}

#ifdef __cplusplus
}
#endif

#endif
