// matmul.cu: see matmul.h.
#include <stdio.h>

#include "matmul.h"
#include "reduce.cuh"

#define MM_ROWS_PER_CHUNK 128  // rows per dbias partial; a shape constant (see layernorm.cu)
#define MM_COLS 32
#define MM_ROW_LANES 8

static int num_chunks(int BT) { return (BT + MM_ROWS_PER_CHUNK - 1) / MM_ROWS_PER_CHUNK; }

// C = alpha op(A) op(B) + beta C, all floatX in memory, column-major, with
// the compute type of the context. cublasGemmEx rather than cublasSgemm so
// that chapter 01 changes the compute type and chapter 02 the storage type,
// and nothing else. alpha and beta are floats, the compute type's: with
// beta = 1, C is read, added to in fp32 and rounded once.
static void gemm(const GpuContext *ctx, cublasOperation_t op_a, cublasOperation_t op_b, int m,
                 int n, int k, const floatX *A, int lda, const floatX *B, int ldb, float beta,
                 floatX *C, int ldc, const char *what) {
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, op_a, op_b, m, n, k, &alpha, A, FLOATX_CUDA_TYPE, lda,
                              B, FLOATX_CUDA_TYPE, ldb, &beta, C, FLOATX_CUDA_TYPE, ldc,
                              gpu_gemm_compute_type(ctx), CUBLAS_GEMM_DEFAULT));
    char name[160];  // the shape too: each GEMM's own line in a profile
    snprintf(name, sizeof name, "%s %dx%dx%d", what, m, n, k);
    gpu_check_launch(ctx, name);
}

// One thread per element of out; consecutive threads touch consecutive
// columns, so both out and bias are read coalesced. (In bf16 the GEMM's
// output was rounded once already and the sum is rounded again: the price
// of adding the bias in a kernel of its own, after the GEMM.)
__global__ void add_bias_kernel_v1(floatX *out, const floatX *bias, size_t rows, int OC) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * OC) return;
    out[i] = f2x(x2f(out[i]) + x2f(bias[i % OC]));
}

extern "C" void matmul_forward_v1(const GpuContext *ctx, floatX *out, const floatX *inp,
                                  const floatX *weight, const floatX *bias, int B, int T, int C,
                                  int OC) {
    const int BT = B * T;
    // out^T (OC x BT) = weight (OC x C) @ inp^T (C x BT). In column-major,
    // weight's memory reads as weight^T (C x OC, ld C), hence op T; inp's
    // memory reads as inp^T (C x BT, ld C), used as is.
    gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, OC, BT, C, weight, C, inp, C, 0.0f, out, OC,
         "matmul_forward_v1: cublasGemmEx");
    if (!bias) return;
    const int threads = 256;
    add_bias_kernel_v1<<<blocks_for((size_t)BT * OC, threads), threads, 0, ctx->stream>>>(
        out, bias, (size_t)BT, OC);
    gpu_check_launch(ctx, "add_bias_kernel_v1");
}

// Column sums of dout (BT, OC) over chunks of rows, written as partials; the
// same scheme as layernorm's parameter gradients: a warp covers 32
// consecutive columns of one row, the 8 warps take every 8th row, and the 8
// sums are added in warp order. The partials are fp32 whatever floatX is.
__global__ void bias_grad_partial_kernel_v1(float *partial, const floatX *dout, int BT, int OC) {
    __shared__ float sums[MM_ROW_LANES][MM_COLS];
    const int col = blockIdx.x * MM_COLS + threadIdx.x;
    const int chunk = blockIdx.y;
    const int row_end = min(BT, (chunk + 1) * MM_ROWS_PER_CHUNK);
    float sum = 0.0f;
    if (col < OC)
        for (int r = chunk * MM_ROWS_PER_CHUNK + threadIdx.y; r < row_end; r += MM_ROW_LANES)
            sum += x2f(dout[(size_t)r * OC + col]);
    sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        for (int k = 1; k < MM_ROW_LANES; k++) sum += sums[k][threadIdx.x];
        partial[(size_t)chunk * OC + col] = sum;
    }
}

// The chunks' partials added in chunk order, in fp32; then dbias += the total,
// rounded to floatX once.
__global__ void bias_grad_reduce_kernel_v1(floatX *dbias, const float *partial, int chunks,
                                           int OC) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= OC) return;
    float sum = 0.0f;
    for (int k = 0; k < chunks; k++) sum += partial[(size_t)k * OC + col];
    dbias[col] = f2x(x2f(dbias[col]) + sum);
}

extern "C" size_t matmul_backward_scratch_floats(int B, int T, int OC) {
    return (size_t)num_chunks(B * T) * OC;
}

extern "C" void matmul_backward_v1(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                                   floatX *dbias, float *scratch, const floatX *dout,
                                   const floatX *inp, const floatX *weight, int B, int T, int C,
                                   int OC) {
    const int BT = B * T;
    // dinp^T (C x BT) += weight^T (C x OC) @ dout^T (OC x BT): weight's memory
    // already reads as weight^T (ld C), dout's as dout^T (ld OC).
    gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, C, BT, OC, weight, C, dout, OC, 1.0f, dinp, C,
         "matmul_backward_v1: cublasGemmEx (dinp)");
    // dweight^T (C x OC) += inp^T (C x BT) @ dout (BT x OC): inp's memory
    // reads as inp^T (ld C); dout's reads as dout^T, hence op T.
    gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, BT, inp, C, dout, OC, 1.0f, dweight, C,
         "matmul_backward_v1: cublasGemmEx (dweight)");
    if (!dbias) return;
    const int chunks = num_chunks(BT), threads = 256;
    dim3 grid(blocks_for(OC, MM_COLS), chunks), block(MM_COLS, MM_ROW_LANES);
    bias_grad_partial_kernel_v1<<<grid, block, 0, ctx->stream>>>(scratch, dout, BT, OC);
    gpu_check_launch(ctx, "bias_grad_partial_kernel_v1");
    bias_grad_reduce_kernel_v1<<<blocks_for(OC, threads), threads, 0, ctx->stream>>>(
        dbias, scratch, chunks, OC);
    gpu_check_launch(ctx, "bias_grad_reduce_kernel_v1");
}
