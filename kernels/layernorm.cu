// layernorm.cu: see layernorm.h. The backward pass; the forward pass is
// chapter 00's exercise, solutions/00_baseline/layernorm_forward.cu.
#include "layernorm.h"
#include "layernorm_row.cuh"
#include "reduce.cuh"
#include "util/util.h"

// Rows whose parameter gradients one block sums before writing a partial.
// A shape constant, not a function of the GPU, so that every GPU adds the
// same partials in the same order.
#define LN_ROWS_PER_CHUNK 128
// Column-sum blocks: 32 channels (one coalesced 128-byte row segment per
// warp) by 8 warps that take every 8th row of the chunk.
#define LN_COLS 32
#define LN_ROW_LANES 8

static int num_chunks(int BT) { return (BT + LN_ROWS_PER_CHUNK - 1) / LN_ROWS_PER_CHUNK; }

// dinp, one warp per row. With xhat = (x - mean) * rstd and g = dout * weight:
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat))
// (the derivation is in the CPU reference, common/model/gpt2_cpu_layers.inc).
// Loads go through x2f, the row's sums are fp32, dinp is rounded once.
__global__ void layernorm_backward_dinp_kernel_v1(floatX *dinp, const floatX *dout,
                                                  const floatX *inp, const floatX *weight,
                                                  const float *mean, const float *rstd, int BT,
                                                  int C) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= BT) return;
    const floatX *dy = dout + (size_t)row * C, *x = inp + (size_t)row * C;
    floatX *dx = dinp + (size_t)row * C;
    const float m = mean[row], s = rstd[row];
    float g_sum = 0.0f, g_xhat_sum = 0.0f;
    for (int i = lane; i < C; i += WARP_SIZE) {
        float xhat = (x2f(x[i]) - m) * s, g = x2f(dy[i]) * x2f(weight[i]);
        g_sum += g;
        g_xhat_sum += g * xhat;
    }
    const float g_mean = warp_sum(g_sum) / C, g_xhat_mean = warp_sum(g_xhat_sum) / C;
    for (int i = lane; i < C; i += WARP_SIZE) {
        float xhat = (x2f(x[i]) - m) * s, g = x2f(dy[i]) * x2f(weight[i]);
        dx[i] = f2x(x2f(dx[i]) + s * (g - g_mean - xhat * g_xhat_mean));
    }
}

// Partial column sums of xhat*dout (dweight) and dout (dbias) over one chunk
// of rows. Block (LN_COLS, LN_ROW_LANES): threadIdx.x is the channel, so a
// warp reads 32 consecutive channels of one row; threadIdx.y takes every 8th
// row. The 8 per-thread sums are then added in y order through shared memory.
// The partials are fp32.
__global__ void layernorm_backward_params_partial_kernel_v1(float *partial_dw, float *partial_db,
                                                            const floatX *dout,
                                                            const floatX *inp, const float *mean,
                                                            const float *rstd, int BT, int C) {
    __shared__ float sum_dw[LN_ROW_LANES][LN_COLS], sum_db[LN_ROW_LANES][LN_COLS];
    const int c = blockIdx.x * LN_COLS + threadIdx.x;
    const int chunk = blockIdx.y;
    const int row_end = min(BT, (chunk + 1) * LN_ROWS_PER_CHUNK);
    float dw = 0.0f, db = 0.0f;
    if (c < C) {
        for (int r = chunk * LN_ROWS_PER_CHUNK + threadIdx.y; r < row_end; r += LN_ROW_LANES) {
            float dy = x2f(dout[(size_t)r * C + c]);
            float xhat = (x2f(inp[(size_t)r * C + c]) - mean[r]) * rstd[r];
            dw += xhat * dy;
            db += dy;
        }
    }
    sum_dw[threadIdx.y][threadIdx.x] = dw;
    sum_db[threadIdx.y][threadIdx.x] = db;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int k = 1; k < LN_ROW_LANES; k++) {
            dw += sum_dw[k][threadIdx.x];
            db += sum_db[k][threadIdx.x];
        }
        partial_dw[(size_t)chunk * C + c] = dw;
        partial_db[(size_t)chunk * C + c] = db;
    }
}

// One thread per channel adds the chunks' partials in chunk order, in fp32,
// then adds the total to the floatX gradient.
__global__ void layernorm_backward_params_reduce_kernel_v1(floatX *dweight, floatX *dbias,
                                                           const float *partial_dw,
                                                           const float *partial_db, int chunks,
                                                           int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float dw = 0.0f, db = 0.0f;
    for (int k = 0; k < chunks; k++) {
        dw += partial_dw[(size_t)k * C + c];
        db += partial_db[(size_t)k * C + c];
    }
    dweight[c] = f2x(x2f(dweight[c]) + dw);
    dbias[c] = f2x(x2f(dbias[c]) + db);
}

extern "C" size_t layernorm_backward_scratch_floats(int B, int T, int C) {
    return 2 * (size_t)num_chunks(B * T) * C;
}

// dweight and dbias += their column sums over the B*T rows: per-chunk
// partials into scratch, then the chunks added in order (v1 and v2 share it).
static void launch_param_grads(const GpuContext *ctx, floatX *dweight, floatX *dbias,
                               float *scratch, const floatX *dout, const floatX *inp,
                               const float *mean, const float *rstd, int BT, int C) {
    const int chunks = num_chunks(BT), threads = 256;
    float *partial_dw = scratch, *partial_db = scratch + (size_t)chunks * C;
    dim3 grid(blocks_for(C, LN_COLS), chunks), block(LN_COLS, LN_ROW_LANES);
    layernorm_backward_params_partial_kernel_v1<<<grid, block, 0, ctx->stream>>>(
        partial_dw, partial_db, dout, inp, mean, rstd, BT, C);
    gpu_check_launch(ctx, "layernorm_backward_params_partial_kernel_v1");
    layernorm_backward_params_reduce_kernel_v1<<<blocks_for(C, threads), threads, 0,
                                                 ctx->stream>>>(dweight, dbias, partial_dw,
                                                                partial_db, chunks, C);
    gpu_check_launch(ctx, "layernorm_backward_params_reduce_kernel_v1");
}

extern "C" void layernorm_backward_v1(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                                      floatX *dbias, float *scratch, const floatX *dout,
                                      const floatX *inp, const floatX *weight, const float *mean,
                                      const float *rstd, int B, int T, int C) {
    // ANCHOR: layernorm_dinp_launch
    const int BT = B * T;
    const int threads = 256, rows_per_block = threads / WARP_SIZE;
    layernorm_backward_dinp_kernel_v1<<<blocks_for(BT, rows_per_block), threads, 0,
                                        ctx->stream>>>(dinp, dout, inp, weight, mean, rstd, BT,
                                                       C);
    gpu_check_launch(ctx, "layernorm_backward_dinp_kernel_v1");
    // ANCHOR_END: layernorm_dinp_launch

    launch_param_grads(ctx, dweight, dbias, scratch, dout, inp, mean, rstd, BT, C);
}

// ---- chapter 04 ------------------------------------------------------------------

extern "C" void layernorm_check_vector_width(int C, const char *kernel) {
    if (C % VEC_X != 0)
        die("%s: C = %d is not a multiple of %d: its rows cannot be read in 16-byte vectors",
            kernel, C, VEC_X);
}

__global__ void layernorm_forward_kernel_v2(floatX *out, float *mean, float *rstd,
                                            const floatX *inp, const floatX *weight,
                                            const floatX *bias, int BT, int C) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= BT) return;
    const floatX *x = inp + (size_t)row * C;
    float m, s;
    row_mean_rstd(x, C, lane, &m, &s);
    row_normalize(out + (size_t)row * C, x, weight, bias, m, s, C, lane);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

extern "C" void layernorm_forward_v2(const GpuContext *ctx, floatX *out, float *mean,
                                     float *rstd, const floatX *inp, const floatX *weight,
                                     const floatX *bias, int B, int T, int C) {
    layernorm_check_vector_width(C, "layernorm_forward_v2");
    const int threads = 256, rows_per_block = threads / WARP_SIZE;
    layernorm_forward_kernel_v2<<<blocks_for((size_t)B * T, rows_per_block), threads, 0,
                                  ctx->stream>>>(out, mean, rstd, inp, weight, bias, B * T, C);
    gpu_check_launch(ctx, "layernorm_forward_kernel_v2");
}

// v1's dinp kernel in 16-byte vectors: the first pass takes both row sums
// (g and g*xhat) at once, the second recomputes g and xhat from the vectors,
// which come back from L1, and read-modify-writes dinp a vector at a time.
__global__ void layernorm_backward_dinp_kernel_v2(floatX *dinp, const floatX *dout,
                                                  const floatX *inp, const floatX *weight,
                                                  const float *mean, const float *rstd, int BT,
                                                  int C) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= BT) return;
    const floatX *dy = dout + (size_t)row * C, *x = inp + (size_t)row * C;
    floatX *dx = dinp + (size_t)row * C;
    const float m = mean[row], s = rstd[row];
    float g_sum = 0.0f, g_xhat_sum = 0.0f;
    for (int i = lane * VEC_X; i < C; i += WARP_SIZE * VEC_X) {
        const Vec vx = load_vec(x + i), vdy = load_vec(dy + i), vw = load_vec(weight + i);
        for (int k = 0; k < VEC_X; k++) {
            const float xhat = (x2f(vx.x[k]) - m) * s, g = x2f(vdy.x[k]) * x2f(vw.x[k]);
            g_sum += g;
            g_xhat_sum += g * xhat;
        }
    }
    const float g_mean = warp_sum(g_sum) / C, g_xhat_mean = warp_sum(g_xhat_sum) / C;
    for (int i = lane * VEC_X; i < C; i += WARP_SIZE * VEC_X) {
        const Vec vx = load_vec(x + i), vdy = load_vec(dy + i), vw = load_vec(weight + i);
        Vec vdx = load_vec(dx + i);
        for (int k = 0; k < VEC_X; k++) {
            const float xhat = (x2f(vx.x[k]) - m) * s, g = x2f(vdy.x[k]) * x2f(vw.x[k]);
            vdx.x[k] = f2x(x2f(vdx.x[k]) + s * (g - g_mean - xhat * g_xhat_mean));
        }
        store_vec(dx + i, vdx);
    }
}

extern "C" void layernorm_backward_v2(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                                      floatX *dbias, float *scratch, const floatX *dout,
                                      const floatX *inp, const floatX *weight, const float *mean,
                                      const float *rstd, int B, int T, int C) {
    layernorm_check_vector_width(C, "layernorm_backward_v2");
    const int BT = B * T;
    const int threads = 256, rows_per_block = threads / WARP_SIZE;
    layernorm_backward_dinp_kernel_v2<<<blocks_for(BT, rows_per_block), threads, 0,
                                        ctx->stream>>>(dinp, dout, inp, weight, mean, rstd, BT,
                                                       C);
    gpu_check_launch(ctx, "layernorm_backward_dinp_kernel_v2");
    // The parameter gradients: v1's kernels, whose warps already read 32
    // consecutive channels of a row, and which were never the slow part.
    launch_param_grads(ctx, dweight, dbias, scratch, dout, inp, mean, rstd, BT, C);
}

// ---- chapter 11: the parameter gradients, tuned by the profile ----------------------
// ANCHOR: layernorm_params_v2
// v1's column sums, the same float operations in the same order, read 16
// bytes at a time: a thread owns VEC_X consecutive channels instead of one,
// and still adds every 8th row of the chunk, then the 8 row lanes in order.
// v1's warps read 64 bytes of a row, 2 a thread, and the kernel took half
// again the time its bytes need (the profile: 101 us a call at B=64).
__global__ void layernorm_backward_params_partial_kernel_v2(float *partial_dw, float *partial_db,
                                                            const floatX *dout,
                                                            const floatX *inp, const float *mean,
                                                            const float *rstd, int BT, int C) {
    __shared__ float sum_dw[LN_ROW_LANES][LN_COLS * VEC_X], sum_db[LN_ROW_LANES][LN_COLS * VEC_X];
    const int x = threadIdx.x * VEC_X;                   // the thread's first channel in the block
    const int c = blockIdx.x * LN_COLS * VEC_X + x;      // ...and in the row
    const int chunk = blockIdx.y;
    const int row_end = min(BT, (chunk + 1) * LN_ROWS_PER_CHUNK);
    float dw[VEC_X], db[VEC_X];
    for (int k = 0; k < VEC_X; k++) dw[k] = 0.0f, db[k] = 0.0f;
    if (c < C) {
        for (int r = chunk * LN_ROWS_PER_CHUNK + threadIdx.y; r < row_end; r += LN_ROW_LANES) {
            const size_t at = (size_t)r * C + c;
            const Vec vdy = load_vec(dout + at), vx = load_vec(inp + at);
            const float m = mean[r], s = rstd[r];
            for (int k = 0; k < VEC_X; k++) {
                float dy = x2f(vdy.x[k]);
                float xhat = (x2f(vx.x[k]) - m) * s;
                dw[k] += xhat * dy;
                db[k] += dy;
            }
        }
    }
    for (int k = 0; k < VEC_X; k++) {
        sum_dw[threadIdx.y][x + k] = dw[k];
        sum_db[threadIdx.y][x + k] = db[k];
    }
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    for (int k = 0; k < VEC_X; k++) {
        for (int lane = 1; lane < LN_ROW_LANES; lane++) {
            dw[k] += sum_dw[lane][x + k];
            db[k] += sum_db[lane][x + k];
        }
        partial_dw[(size_t)chunk * C + c + k] = dw[k];
        partial_db[(size_t)chunk * C + c + k] = db[k];
    }
}

// v1's reduce is one thread per channel, 768 threads: three blocks on three
// of the H100's 132 SMs, each thread adding 512 partials one after another
// at B=64, every load waited for before the next add (39 us a call). The
// order of the adds is the bits, so it stays; what changes is the waiting:
// dw and db get threads of their own, and the loads are issued UNROLL at a
// time, ahead of the adds that consume them in order.
#define LN_REDUCE_UNROLL 16
__global__ void layernorm_backward_params_reduce_kernel_v2(floatX *dweight, floatX *dbias,
                                                           const float *partial_dw,
                                                           const float *partial_db, int chunks,
                                                           int C) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // [0, C): dweight; [C, 2C): dbias
    if (i >= 2 * C) return;
    const int c = i < C ? i : i - C;
    const float *partial = i < C ? partial_dw : partial_db;
    float sum = 0.0f;
    int k = 0;
    for (; k + LN_REDUCE_UNROLL <= chunks; k += LN_REDUCE_UNROLL) {
        float v[LN_REDUCE_UNROLL];
#pragma unroll
        for (int u = 0; u < LN_REDUCE_UNROLL; u++) v[u] = partial[(size_t)(k + u) * C + c];
#pragma unroll
        for (int u = 0; u < LN_REDUCE_UNROLL; u++) sum += v[u];
    }
    for (; k < chunks; k++) sum += partial[(size_t)k * C + c];
    floatX *grad = i < C ? dweight : dbias;
    grad[c] = f2x(x2f(grad[c]) + sum);
}
// ANCHOR_END: layernorm_params_v2

extern "C" void layernorm_backward_v3(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                                      floatX *dbias, float *scratch, const floatX *dout,
                                      const floatX *inp, const floatX *weight, const float *mean,
                                      const float *rstd, int B, int T, int C) {
    layernorm_check_vector_width(C, "layernorm_backward_v3");
    const int BT = B * T, threads = 256, rows_per_block = threads / WARP_SIZE;
    layernorm_backward_dinp_kernel_v2<<<blocks_for(BT, rows_per_block), threads, 0,
                                        ctx->stream>>>(dinp, dout, inp, weight, mean, rstd, BT,
                                                       C);
    gpu_check_launch(ctx, "layernorm_backward_dinp_kernel_v2");
    const int chunks = num_chunks(BT);
    float *partial_dw = scratch, *partial_db = scratch + (size_t)chunks * C;
    dim3 grid(blocks_for(C, LN_COLS * VEC_X), chunks), block(LN_COLS, LN_ROW_LANES);
    layernorm_backward_params_partial_kernel_v2<<<grid, block, 0, ctx->stream>>>(
        partial_dw, partial_db, dout, inp, mean, rstd, BT, C);
    gpu_check_launch(ctx, "layernorm_backward_params_partial_kernel_v2");
    const int reduce_threads = 64;  // 24 blocks at C = 768: as many SMs as there is work for
    layernorm_backward_params_reduce_kernel_v2<<<blocks_for(2 * (size_t)C, reduce_threads),
                                                 reduce_threads, 0, ctx->stream>>>(
        dweight, dbias, partial_dw, partial_db, chunks, C);
    gpu_check_launch(ctx, "layernorm_backward_params_reduce_kernel_v2");
}
