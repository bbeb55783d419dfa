// gemm_operands.h: how a GEMM's operands are stored, which the launcher slots
// of the linear layer carry (gpu_ops.h: matmul_forward, matmul_backward).
//
// Every chapter up to 12 runs its GEMMs on operands of the build's storage
// type, floatX, and passes NULL: "floatX, unscaled". Chapter 13's FP8 GEMMs
// store an operand in 8 bits (e4m3, or e5m2 for gradients), each with the
// scale that turns its stored values back into the real ones, and ask for
// the output's largest magnitude, from which the next step's scale comes.
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

typedef struct {
    GemmPrecision weight, input;           // how each operand is stored
    const float *weight_scale, *input_scale;  // device, one float each: real = stored * scale
    float *amax_out;                       // device, one float: max |out| (NULL: not wanted)
} GemmOperands;

// Whether a launcher given `operands` runs them as floatX: NULL, or both
// operands GEMM_FLOATX.
static inline int gemm_operands_are_floatx(const GemmOperands *operands) {
    return !operands || (operands->weight == GEMM_FLOATX && operands->input == GEMM_FLOATX);
}

#ifdef __cplusplus
}
#endif

#endif
