// attention.cu: see attention.h.
#include <math.h>
#include <stdio.h>

#include "attention.h"
#include "reduce.cuh"

// (B,T,·) rows of `row_stride` values, head h at channels [h*hs, (h+1)*hs)
// from `src`, to (B,NH,T,hs): each head's (T,hs) matrix contiguous, the form
// the batched GEMMs need. One thread per element, in source order, so the
// reads are coalesced and the writes come in contiguous runs of hs. A copy:
// floatX in, floatX out, no rounding.
// Element i of the (B,T,C) view, i = bt*C + c, is element
// ((b*NH + h)*T + t)*hs + j of the (B,NH,T,hs) view, with c = h*hs + j.
__device__ __forceinline__ size_t head_major_index(size_t i, int T, int C, int NH) {
    const int hs = C / NH;
    const int c = (int)(i % C);
    const size_t bt = i / C;
    const int t = (int)(bt % T), b = (int)(bt / T);
    return (((size_t)b * NH + c / hs) * T + t) * hs + c % hs;
}

__global__ void split_heads_kernel_v1(floatX *dst, const floatX *src, int row_stride, int B,
                                      int T, int C, int NH) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    dst[head_major_index(i, T, C, NH)] = src[(i / C) * row_stride + i % C];
}

// The inverse: (B,NH,T,hs) back into (B,T,·) rows of `row_stride` values,
// one thread per destination element (coalesced writes). With `accumulate`
// it adds (in fp32, rounded once), which is how the backward pass's
// gradients land in dqkv.
__global__ void merge_heads_kernel_v1(floatX *dst, int row_stride, const floatX *src, int B,
                                      int T, int C, int NH, int accumulate) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    float value = x2f(src[head_major_index(i, T, C, NH)]);
    floatX *d = dst + (i / C) * row_stride + i % C;
    *d = f2x(accumulate ? x2f(*d) + value : value);
}

// One warp per row of scores (b, h, t): scale, mask everything after t,
// softmax shifted by the row's max so that expf never overflows. Masked
// entries get exactly 0, so att @ v and the backward GEMMs may run over the
// full T x T square. The max, the exponentials and their sum are fp32; only
// the probabilities are rounded to floatX, when stored.
__global__ void causal_softmax_forward_kernel_v1(floatX *att, const floatX *preatt, int rows,
                                                 int T, float scale) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= rows) return;
    const int t = row % T;
    const floatX *s = preatt + (size_t)row * T;
    floatX *a = att + (size_t)row * T;
    float maxval = -INFINITY;
    for (int j = lane; j <= t; j += WARP_SIZE) maxval = fmaxf(maxval, x2f(s[j]) * scale);
    maxval = warp_max(maxval);
    float sum = 0.0f;
    for (int j = lane; j <= t; j += WARP_SIZE) sum += expf(x2f(s[j]) * scale - maxval);
    sum = warp_sum(sum);
    for (int j = lane; j < T; j += WARP_SIZE)
        a[j] = f2x(j <= t ? expf(x2f(s[j]) * scale - maxval) / sum : 0.0f);
}

// One warp per row: with y = softmax(x), dx = y * (dy - sum_j y_j dy_j), then
// times the forward's scale, since x = scale * q.k. Writes 0 above the
// diagonal. dpre may be the same buffer as datt: each thread reads datt[j]
// before it writes dpre[j], and the row's sum is complete (a warp shuffle)
// before any write. The dot product is fp32.
__global__ void causal_softmax_backward_kernel_v1(floatX *dpre, const floatX *datt,
                                                  const floatX *att, int rows, int T,
                                                  float scale) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= rows) return;
    const int t = row % T;
    const floatX *a = att + (size_t)row * T, *da = datt + (size_t)row * T;
    floatX *dp = dpre + (size_t)row * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += WARP_SIZE) dot += x2f(a[j]) * x2f(da[j]);
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += WARP_SIZE)
        dp[j] = f2x(j <= t ? x2f(a[j]) * (x2f(da[j]) - dot) * scale : 0.0f);
}

// For each of the B*NH heads, C_h = op(A_h) op(B_h) with floatX storage and
// the context's compute type, column-major (see matmul.h for the reading of
// row-major memory). Strides are in elements between consecutive heads.
// alpha and beta are floats: the compute type's (fp32 accumulation).
static void batched_gemm(const GpuContext *ctx, cublasOperation_t op_a, cublasOperation_t op_b,
                         int m, int n, int k, const floatX *A, int lda, long long stride_a,
                         const floatX *B, int ldb, long long stride_b, float beta, floatX *C,
                         int ldc, long long stride_c, int batch, const char *what) {
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->cublas, op_a, op_b, m, n, k, &alpha, A,
                                            FLOATX_CUDA_TYPE, lda, stride_a, B, FLOATX_CUDA_TYPE,
                                            ldb, stride_b, &beta, C, FLOATX_CUDA_TYPE, ldc,
                                            stride_c, batch, gpu_gemm_compute_type(ctx),
                                            CUBLAS_GEMM_DEFAULT));
    char name[160];  // the shape too: each GEMM's own line in a profile
    snprintf(name, sizeof name, "%s %dx%dx%d x%d", what, m, n, k, batch);
    gpu_check_launch(ctx, name);
}

static void split_heads(const GpuContext *ctx, floatX *dst, const floatX *src, int row_stride,
                        int B, int T, int C, int NH) {
    const int threads = 256;
    split_heads_kernel_v1<<<blocks_for((size_t)B * T * C, threads), threads, 0, ctx->stream>>>(
        dst, src, row_stride, B, T, C, NH);
    gpu_check_launch(ctx, "split_heads_kernel_v1");
}

static void merge_heads(const GpuContext *ctx, floatX *dst, int row_stride, const floatX *src,
                        int B, int T, int C, int NH, int accumulate) {
    const int threads = 256;
    merge_heads_kernel_v1<<<blocks_for((size_t)B * T * C, threads), threads, 0, ctx->stream>>>(
        dst, row_stride, src, B, T, C, NH, accumulate);
    gpu_check_launch(ctx, "merge_heads_kernel_v1");
}

// Counts of floatX, returned as counts of floats: enough, since floatX is
// never larger (see attention.h).
extern "C" size_t attention_forward_scratch_floats(int B, int T, int C, int NH) {
    return 4 * (size_t)B * T * C + (size_t)B * NH * T * T;
}

extern "C" size_t attention_backward_scratch_floats(int B, int T, int C, int NH) {
    return 7 * (size_t)B * T * C + (size_t)B * NH * T * T;
}

extern "C" void attention_forward_v1(const GpuContext *ctx, floatX *out, floatX *att,
                                     float *scratch, const floatX *qkv, int B, int T, int C,
                                     int NH) {
    const size_t N = (size_t)B * T * C;
    const int hs = C / NH, heads = B * NH;
    const long long head_tt = (long long)T * T, head_ths = (long long)T * hs;
    // floatX arrays back to back from the scratch's first byte (attention.h).
    floatX *q = (floatX *)scratch, *k = q + N, *v = k + N, *y = v + N, *preatt = y + N;

    // ANCHOR: eager_attention
    split_heads(ctx, q, qkv, 3 * C, B, T, C, NH);
    split_heads(ctx, k, qkv + C, 3 * C, B, T, C, NH);
    split_heads(ctx, v, qkv + 2 * C, 3 * C, B, T, C, NH);

    // preatt (T x T) = q (T x hs) @ k^T, per head; in column-major,
    // preatt^T = k @ q^T, where k's memory reads as k^T (hs x T, ld hs).
    // All T x T scores are computed, the masked ones too: eager PyTorch does
    // the same, and the softmax ignores them.
    batched_gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, k, hs, head_ths, q, hs, head_ths, 0.0f,
                 preatt, T, head_tt, heads, "attention_forward_v1: q @ k^T");

    const int threads = 256, rows_per_block = threads / WARP_SIZE, rows = heads * T;
    const float scale = 1.0f / sqrtf((float)hs);
    causal_softmax_forward_kernel_v1<<<blocks_for(rows, rows_per_block), threads, 0,
                                       ctx->stream>>>(att, preatt, rows, T, scale);
    gpu_check_launch(ctx, "causal_softmax_forward_kernel_v1");

    // y (T x hs) = att (T x T) @ v (T x hs); in column-major y^T = v^T @ att^T,
    // and both memories already read as those transposes.
    batched_gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, v, hs, head_ths, att, T, head_tt, 0.0f,
                 y, hs, head_ths, heads, "attention_forward_v1: att @ v");

    merge_heads(ctx, out, C, y, B, T, C, NH, 0);
    // ANCHOR_END: eager_attention
}

extern "C" void attention_backward_v1(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                      const floatX *dout, const floatX *qkv, const floatX *att,
                                      int B, int T, int C, int NH) {
    const size_t N = (size_t)B * T * C;
    const int hs = C / NH, heads = B * NH;
    const long long head_tt = (long long)T * T, head_ths = (long long)T * hs;
    // floatX arrays back to back from the scratch's first byte (attention.h).
    floatX *q = (floatX *)scratch, *k = q + N, *v = k + N, *dq = v + N, *dk = dq + N,
           *dv = dk + N, *dy = dv + N, *datt = dy + N;

    // The forward pass's q, k, v are not kept between passes (the scratch is
    // shared by all layers); splitting qkv again costs one read and write.
    split_heads(ctx, q, qkv, 3 * C, B, T, C, NH);
    split_heads(ctx, k, qkv + C, 3 * C, B, T, C, NH);
    split_heads(ctx, v, qkv + 2 * C, 3 * C, B, T, C, NH);
    split_heads(ctx, dy, dout, C, B, T, C, NH);

    // datt (T x T) = dy (T x hs) @ v^T; column-major: datt^T = v @ dy^T.
    batched_gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, v, hs, head_ths, dy, hs, head_ths, 0.0f,
                 datt, T, head_tt, heads, "attention_backward_v1: dy @ v^T");
    // dv (T x hs) = att^T @ dy; column-major: dv^T = dy^T @ att.
    batched_gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, dy, hs, head_ths, att, T, head_tt, 0.0f,
                 dv, hs, head_ths, heads, "attention_backward_v1: att^T @ dy");

    const int threads = 256, rows_per_block = threads / WARP_SIZE, rows = heads * T;
    const float scale = 1.0f / sqrtf((float)hs);
    floatX *dpre = datt;  // in place: see causal_softmax_backward_kernel_v1
    causal_softmax_backward_kernel_v1<<<blocks_for(rows, rows_per_block), threads, 0,
                                        ctx->stream>>>(dpre, datt, att, rows, T, scale);
    gpu_check_launch(ctx, "causal_softmax_backward_kernel_v1");

    // dq (T x hs) = dpre @ k; column-major: dq^T = k^T @ dpre^T.
    batched_gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, k, hs, head_ths, dpre, T, head_tt, 0.0f,
                 dq, hs, head_ths, heads, "attention_backward_v1: dpre @ k");
    // dk (T x hs) = dpre^T @ q; column-major: dk^T = q^T @ dpre.
    batched_gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, q, hs, head_ths, dpre, T, head_tt, 0.0f,
                 dk, hs, head_ths, heads, "attention_backward_v1: dpre^T @ q");

    merge_heads(ctx, dqkv, 3 * C, dq, B, T, C, NH, 1);
    merge_heads(ctx, dqkv + C, 3 * C, dk, B, T, C, NH, 1);
    merge_heads(ctx, dqkv + 2 * C, 3 * C, dv, B, T, C, NH, 1);
}
