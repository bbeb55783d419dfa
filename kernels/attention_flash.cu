// attention_flash.cu: see attention_flash.h. Chapter 05.
//
// The work is cut into tiles of rows: a thread block takes a tile of queries
// (forward, dq) or of keys (dk, dv) and walks over the tiles of the other
// side that the causal mask lets it see, loading each into shared memory
// (cp.async, two stages: the next tile arrives while this one is used). Each
// of the block's 4 warps owns 16 or 32 rows of the block's tile and computes
// their products with the tensor cores (mma.cuh); scores and probabilities
// live in registers only, one tile at a time.
#include <math.h>

#include "attention_flash.h"
#include "util/util.h"

#ifdef PRECISION_BF16
#include "attention_tiles.cuh"

namespace {

// The forward pass: 128 queries per block, 32 per warp (two m-tiles of 16,
// which share every fragment of K and V they load), against tiles of 64 keys.
constexpr int FWD_WARPS = 4, FWD_THREADS = FWD_WARPS * WARP_SIZE;
constexpr int FWD_ROWS_PER_WARP = 32, KEYS = 64, FWD_QUERIES = FWD_WARPS * FWD_ROWS_PER_WARP;
// The backward pass: tiles of 64 rows, 16 per warp, on both sides.
constexpr int BWD_WARPS = 4, BWD_THREADS = BWD_WARPS * WARP_SIZE, BWD_ROWS = BWD_WARPS * 16;

// ---- fragments of a tile ------------------------------------------------------------
// The A fragment of rows [row0, row0 + 16) and columns [col0, col0 + 16).
template <int HS>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16 *tile, int row0, int col0) {
    const int lane = threadIdx.x % WARP_SIZE;
    ldmatrix_x4(a, tile + tile_offset<HS>(row0 + lane % 16, col0 / 8 + lane / 16));
}

// B fragments for a product with the tile's transpose (its rows are the n
// index, its columns the k index): b[0], b[1] for n in [n0, n0 + 8), b[2],
// b[3] for [n0 + 8, n0 + 16); k in [k0, k0 + 16).
template <int HS>
__device__ __forceinline__ void load_b_rows(uint32_t (&b)[4], const bf16 *tile, int n0, int k0) {
    const int lane = threadIdx.x % WARP_SIZE;
    ldmatrix_x4(b, tile + tile_offset<HS>(n0 + lane % 8 + lane / 16 * 8, k0 / 8 + lane / 8 % 2));
}

// B fragments for a product with the tile itself (its rows are the k index,
// its columns the n index): the same four registers, through .trans.
template <int HS>
__device__ __forceinline__ void load_b_cols(uint32_t (&b)[4], const bf16 *tile, int k0, int n0) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = k0 + lane % 8 + lane / 8 % 2 * 8, chunk = n0 / 8 + lane / 16;
    ldmatrix_x4_trans(b, tile + tile_offset<HS>(row, chunk));
}

// ---- a warp's two kinds of product --------------------------------------------------
// ANCHOR: warp_products
// acc (MT*16 rows x N) += A (MT*16 rows x HS, fragments) @ tile^T, the tile
// holding N rows of HS: the scores S = Q K^T, and dP = dO V^T.
template <int HS, int MT, int N>
__device__ __forceinline__ void mma_with_rows(float (&acc)[MT][N / 8][4],
                                              const uint32_t (&a)[MT][HS / 16][4],
                                              const bf16 *tile) {
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++)
#pragma unroll
        for (int nn = 0; nn < N / 16; nn++) {
            uint32_t b[4];
            load_b_rows<HS>(b, tile, nn * 16, kk * 16);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma_16816(acc[mt][2 * nn], a[mt][kk], b[0], b[1]);
                mma_16816(acc[mt][2 * nn + 1], a[mt][kk], b[2], b[3]);
            }
        }
}

// acc (MT*16 rows x HS) += P (MT*16 rows x N, fp32 accumulators) @ tile, the
// tile holding N rows of HS: O += P V, and the gradients dV += P^T dO,
// dK += dS^T Q, dQ += dS K. P goes from accumulators to A fragments in
// registers, each value rounded to bf16 (mma.cuh: the layouts match).
template <int HS, int MT, int N>
__device__ __forceinline__ void mma_with_probs(float (&acc)[MT][HS / 8][4],
                                               const float (&p)[MT][N / 8][4], const bf16 *tile) {
#pragma unroll
    for (int kk = 0; kk < N / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            a[mt][0] = pack_bf16(p[mt][2 * kk][0], p[mt][2 * kk][1]);
            a[mt][1] = pack_bf16(p[mt][2 * kk][2], p[mt][2 * kk][3]);
            a[mt][2] = pack_bf16(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
            a[mt][3] = pack_bf16(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int nn = 0; nn < HS / 16; nn++) {
            uint32_t b[4];
            load_b_cols<HS>(b, tile, kk * 16, nn * 16);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma_16816(acc[mt][2 * nn], a[mt], b[0], b[1]);
                mma_16816(acc[mt][2 * nn + 1], a[mt], b[2], b[3]);
            }
        }
    }
}
// ANCHOR_END: warp_products

// ---- the forward pass ---------------------------------------------------------------
// ANCHOR: forward_kernel
// Grid (B*NH, query tiles); the tiles with the most keys to visit (the last
// queries) are started first, so that the short ones fill the gaps at the end.
template <int HS>
__global__ void __launch_bounds__(FWD_THREADS, 2)
    flash_attention_forward_kernel(bf16 *out, float *lse, const bf16 *qkv, int T, int NH) {
    constexpr int MT = FWD_ROWS_PER_WARP / 16;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16 *sq = reinterpret_cast<bf16 *>(smem);  // FWD_QUERIES x HS
    bf16 *sk = sq + FWD_QUERIES * HS;           // 2 stages of KEYS x HS
    bf16 *sv = sk + 2 * KEYS * HS;              // 2 stages of KEYS x HS

    const int C = NH * HS, ld = 3 * C, bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * FWD_QUERIES;
    const bf16 *q = qkv + (size_t)b * T * ld + h * HS, *k = q + C, *v = q + 2 * C;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int row0 = warp * FWD_ROWS_PER_WARP;  // the warp's first row in the tile
    const float scale_log2 = LOG2E / sqrtf((float)HS);
    // Causal: the key tiles up to the one holding the block's last query.
    const int tiles = (min(q0 + FWD_QUERIES, T) - 1) / KEYS + 1;

    load_tile<FWD_QUERIES, HS, FWD_THREADS>(sq, q, ld, q0, T);
    load_tile<KEYS, HS, FWD_THREADS>(sk, k, ld, 0, T);
    load_tile<KEYS, HS, FWD_THREADS>(sv, v, ld, 0, T);
    cp_async_commit();

    uint32_t qf[MT][HS / 16][4];
    float o[MT][HS / 8][4] = {}, m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

    for (int j = 0; j < tiles; j++) {
        const int stage = j % 2;
        if (j + 1 < tiles) {  // the next tile, into the other stage, while this one is used
            const int k0 = (j + 1) * KEYS;
            load_tile<KEYS, HS, FWD_THREADS>(sk + (1 - stage) * KEYS * HS, k, ld, k0, T);
            load_tile<KEYS, HS, FWD_THREADS>(sv + (1 - stage) * KEYS * HS, v, ld, k0, T);
        }
        cp_async_commit();
        cp_async_wait<1>();  // everything but the group just issued has arrived
        __syncthreads();
        if (j == 0)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int kk = 0; kk < HS / 16; kk++)
                    load_a<HS>(qf[mt][kk], sq, row0 + mt * 16, kk * 16);
        // A warp whose rows all come before this tile's first key skips it.
        if (q0 + row0 + FWD_ROWS_PER_WARP - 1 >= j * KEYS) {
            float s[MT][KEYS / 8][4] = {};
            mma_with_rows<HS, MT, KEYS>(s, qf, sk + stage * KEYS * HS);  // S = Q K^T
            const bool mask = (j + 1) * KEYS > q0 + row0;  // the tile crosses the warp's diagonal
            online_softmax<HS, MT, KEYS>(s, m, l, o, q0 + row0, j * KEYS, mask, scale_log2);
            mma_with_probs<HS, MT, KEYS>(o, s, sv + stage * KEYS * HS);  // O += P V
        }
        __syncthreads();  // the stage is free for the load two tiles on
    }

    // The rows' sums across the quad; O / l, and lse = ln(2^m * l).
    const int g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            float sum = l[mt][half];
            sum += __shfl_xor_sync(FULL_MASK, sum, 1);
            sum += __shfl_xor_sync(FULL_MASK, sum, 2);
            const float inv = 1.0f / sum;
#pragma unroll
            for (int nt = 0; nt < HS / 8; nt++) {
                o[mt][nt][2 * half] *= inv;
                o[mt][nt][2 * half + 1] *= inv;
            }
            const int t = q0 + row0 + mt * 16 + g + 8 * half;
            if (t4 == 0 && t < T) lse[(size_t)bh * T + t] = (m[mt][half] + log2f(sum)) * LN2;
        }
    store_warp_rows<HS, MT>(out + (size_t)b * T * C + h * HS, C, q0 + row0, T, o, 1.0f, sq, row0);
}
// ANCHOR_END: forward_kernel

// ---- the backward pass --------------------------------------------------------------
// ANCHOR: dkdv_kernel
// dK and dV of a tile of 64 keys: grid (B*NH, key tiles), key tile 0 (which
// every query sees) first. Each warp owns 16 keys and keeps their K and V as
// A fragments; the block walks over the tiles of queries at and after its
// keys. Per query tile, in the transposed form (keys are the warp's rows):
//   S^T = K Q^T,  P^T = exp(S^T * scale - lse),  dP^T = V dO^T,
//   dV += P^T dO, dS^T = P^T * (dP^T - D),        dK += dS^T Q.
template <int HS>
__global__ void __launch_bounds__(BWD_THREADS, 2)
    flash_attention_backward_dkdv_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                         const float *lse, const float *delta, int T, int NH) {
    constexpr int R = BWD_ROWS;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16 *sk = reinterpret_cast<bf16 *>(smem), *sv = sk + R * HS;  // R x HS each
    bf16 *sq = sv + R * HS, *sdo = sq + 2 * R * HS;                // 2 stages of R x HS each
    float *slse = reinterpret_cast<float *>(sdo + 2 * R * HS), *sdelta = slse + 2 * R;

    const int C = NH * HS, ld = 3 * C, bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int k0 = blockIdx.y * R, first = blockIdx.y, tiles = (T + R - 1) / R;
    const bf16 *q = qkv + (size_t)b * T * ld + h * HS, *k = q + C, *v = q + 2 * C;
    const bf16 *dout_head = dout + (size_t)b * T * C + h * HS;
    const float *lse_row = lse + (size_t)bh * T, *delta_row = delta + (size_t)bh * T;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int g = lane / 4;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;

    load_tile<R, HS, BWD_THREADS>(sk, k, ld, k0, T);
    load_tile<R, HS, BWD_THREADS>(sv, v, ld, k0, T);
    load_tile<R, HS, BWD_THREADS>(sq, q, ld, first * R, T);
    load_tile<R, HS, BWD_THREADS>(sdo, dout_head, C, first * R, T);
    load_row_stats<R>(slse, lse_row, first * R, T);
    load_row_stats<R>(sdelta, delta_row, first * R, T);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    uint32_t kf[1][HS / 16][4], vf[1][HS / 16][4];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        load_a<HS>(kf[0][kk], sk, warp * 16, kk * 16);
        load_a<HS>(vf[0][kk], sv, warp * 16, kk * 16);
    }
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};

    for (int i = first; i < tiles; i++) {
        const int stage = (i - first) % 2, next = 1 - stage, q0 = i * R;
        if (i + 1 < tiles) {
            load_tile<R, HS, BWD_THREADS>(sq + next * R * HS, q, ld, q0 + R, T);
            load_tile<R, HS, BWD_THREADS>(sdo + next * R * HS, dout_head, C, q0 + R, T);
            load_row_stats<R>(slse + next * R, lse_row, q0 + R, T);
            load_row_stats<R>(sdelta + next * R, delta_row, q0 + R, T);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16 *tq = sq + stage * R * HS, *tdo = sdo + stage * R * HS;
        const float *tlse = slse + stage * R, *tdelta = sdelta + stage * R;
        float pt[1][R / 8][4] = {}, dst[1][R / 8][4] = {};
        mma_with_rows<HS, 1, R>(pt, kf, tq);    // S^T = K Q^T
        mma_with_rows<HS, 1, R>(dst, vf, tdo);  // dP^T = V dO^T
        // Keys after a query (the diagonal tile) and queries past T give nothing.
        const bool mask = q0 < k0 + R || q0 + R > T;
        ds_by_key_rows<R>(pt, dst, tlse, tdelta, k0 + warp * 16 + g, q0, T, mask, scale_log2);
        mma_with_probs<HS, 1, R>(dv, pt, tdo);  // dV += P^T dO
        mma_with_probs<HS, 1, R>(dk, dst, tq);  // dK += dS^T Q
        __syncthreads();
    }
    bf16 *dqkv_seq = dqkv + (size_t)b * T * ld + h * HS;
    store_warp_rows<HS, 1>(dqkv_seq + C, ld, k0 + warp * 16, T, dk, scale, sk, warp * 16);
    store_warp_rows<HS, 1>(dqkv_seq + 2 * C, ld, k0 + warp * 16, T, dv, 1.0f, sv, warp * 16);
}
// ANCHOR_END: dkdv_kernel

// ANCHOR: dq_kernel
// dQ of a tile of 64 queries: grid (B*NH, query tiles), the last queries
// (which see the most keys) first. Each warp owns 16 queries and keeps their
// Q and dO as A fragments, and the rows' lse and D in registers; the block
// walks over the key tiles up to its diagonal, computing S and dP again:
//   S = Q K^T,  P = exp(S * scale - lse),  dP = dO V^T,
//   dS = P * (dP - D),  dQ += dS K.
// Computing S and dP a second time (the dk/dv kernel computed them too) is
// what keeps dQ free of atomics: each block owns its rows of dQ outright.
template <int HS>
__global__ void __launch_bounds__(BWD_THREADS, 2)
    flash_attention_backward_dq_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                       const float *lse, const float *delta, int T, int NH) {
    constexpr int R = BWD_ROWS;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16 *sq = reinterpret_cast<bf16 *>(smem), *sdo = sq + R * HS;  // R x HS each
    bf16 *sk = sdo + R * HS, *sv = sk + 2 * R * HS;                  // 2 stages of R x HS each

    const int C = NH * HS, ld = 3 * C, bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * R, tiles = (min(q0 + R, T) - 1) / R + 1;
    const bf16 *q = qkv + (size_t)b * T * ld + h * HS, *k = q + C, *v = q + 2 * C;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int g = lane / 4, row0 = q0 + warp * 16;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;

    load_tile<R, HS, BWD_THREADS>(sq, q, ld, q0, T);
    load_tile<R, HS, BWD_THREADS>(sdo, dout + (size_t)b * T * C + h * HS, C, q0, T);
    load_tile<R, HS, BWD_THREADS>(sk, k, ld, 0, T);
    load_tile<R, HS, BWD_THREADS>(sv, v, ld, 0, T);
    cp_async_commit();
    float row_lse[2], row_delta[2];  // rows g and g + 8 of the warp's 16
    load_query_row_stats(row_lse, row_delta, lse + (size_t)bh * T, delta + (size_t)bh * T,
                         row0 + g, T);
    uint32_t qf[1][HS / 16][4], dof[1][HS / 16][4];
    float dq[1][HS / 8][4] = {};

    for (int j = 0; j < tiles; j++) {
        const int stage = j % 2;
        if (j + 1 < tiles) {
            const int k0 = (j + 1) * R;
            load_tile<R, HS, BWD_THREADS>(sk + (1 - stage) * R * HS, k, ld, k0, T);
            load_tile<R, HS, BWD_THREADS>(sv + (1 - stage) * R * HS, v, ld, k0, T);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (j == 0)
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                load_a<HS>(qf[0][kk], sq, warp * 16, kk * 16);
                load_a<HS>(dof[0][kk], sdo, warp * 16, kk * 16);
            }
        if (row0 + 15 >= j * R) {  // some of the warp's rows see some key of the tile
            const bf16 *tk = sk + stage * R * HS, *tv = sv + stage * R * HS;
            float s[1][R / 8][4] = {}, dp[1][R / 8][4] = {};
            mma_with_rows<HS, 1, R>(s, qf, tk);    // S = Q K^T
            mma_with_rows<HS, 1, R>(dp, dof, tv);  // dP = dO V^T
            const bool mask = (j + 1) * R > row0;  // the tile crosses the warp's diagonal
            ds_by_query_rows<R>(s, dp, row_lse, row_delta, row0 + g, j * R, mask, scale_log2);
            mma_with_probs<HS, 1, R>(dq, s, tk);  // dQ += dS K
        }
        __syncthreads();
    }
    store_warp_rows<HS, 1>(dqkv + (size_t)b * T * ld + h * HS, ld, row0, T, dq, scale, sq,
                           warp * 16);
}
// ANCHOR_END: dq_kernel

// ---- launchers ----------------------------------------------------------------------
template <int HS>
void forward(const GpuContext *ctx, floatX *out, float *lse, const floatX *qkv, int B, int T,
             int NH) {
    const size_t smem = (size_t)(FWD_QUERIES + 4 * KEYS) * HS * sizeof(bf16);
    allow_shared_memory(flash_attention_forward_kernel<HS>, smem);
    dim3 grid(B * NH, (T + FWD_QUERIES - 1) / FWD_QUERIES);
    flash_attention_forward_kernel<HS><<<grid, FWD_THREADS, smem, ctx->stream>>>(out, lse, qkv, T,
                                                                                 NH);
    gpu_check_launch(ctx, "flash_attention_forward_kernel");
}

template <int HS>
void backward(const GpuContext *ctx, floatX *dqkv, float *delta, const floatX *dout,
              const floatX *out, const floatX *qkv, const float *lse, int B, int T, int NH) {
    const int delta_blocks = (B * T + DELTA_WARPS - 1) / DELTA_WARPS;
    flash_attention_delta_kernel<HS><<<delta_blocks, DELTA_WARPS * WARP_SIZE, 0, ctx->stream>>>(
        delta, dout, out, B * T, T, NH);
    gpu_check_launch(ctx, "flash_attention_delta_kernel");
    dim3 grid(B * NH, (T + BWD_ROWS - 1) / BWD_ROWS);
    const size_t dkdv_smem = 6 * BWD_ROWS * HS * sizeof(bf16) + 4 * BWD_ROWS * sizeof(float);
    allow_shared_memory(flash_attention_backward_dkdv_kernel<HS>, dkdv_smem);
    flash_attention_backward_dkdv_kernel<HS><<<grid, BWD_THREADS, dkdv_smem, ctx->stream>>>(
        dqkv, dout, qkv, lse, delta, T, NH);
    gpu_check_launch(ctx, "flash_attention_backward_dkdv_kernel");
    const size_t dq_smem = 6 * BWD_ROWS * HS * sizeof(bf16);
    allow_shared_memory(flash_attention_backward_dq_kernel<HS>, dq_smem);
    flash_attention_backward_dq_kernel<HS><<<grid, BWD_THREADS, dq_smem, ctx->stream>>>(
        dqkv, dout, qkv, lse, delta, T, NH);
    gpu_check_launch(ctx, "flash_attention_backward_dq_kernel");
}

}  // namespace

// The head sizes the kernels are built for; anything else is refused.
static int head_size_of(const char *who, int C, int NH) {
    const int hs = NH > 0 && C % NH == 0 ? C / NH : 0;
    if (hs != 16 && hs != 32 && hs != 64)
        die("%s: C=%d with NH=%d heads: flash attention is built for head sizes 16, 32 and 64",
            who, C, NH);
    return hs;
}

extern "C" void attention_forward_v2(const GpuContext *ctx, floatX *out, float *lse,
                                     const floatX *qkv, int B, int T, int C, int NH) {
    switch (head_size_of("attention_forward_v2", C, NH)) {
    case 16: forward<16>(ctx, out, lse, qkv, B, T, NH); break;
    case 32: forward<32>(ctx, out, lse, qkv, B, T, NH); break;
    default: forward<64>(ctx, out, lse, qkv, B, T, NH); break;
    }
}

extern "C" void attention_backward_v2(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                      const floatX *dout, const floatX *out, const floatX *qkv,
                                      const float *lse, int B, int T, int C, int NH) {
    switch (head_size_of("attention_backward_v2", C, NH)) {
    case 16: backward<16>(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, NH); break;
    case 32: backward<32>(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, NH); break;
    default: backward<64>(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, NH); break;
    }
}

#else  // the fp32 build: the tensor cores' bf16 products have no fp32 version here

extern "C" void attention_forward_v2(const GpuContext *ctx, floatX *out, float *lse,
                                     const floatX *qkv, int B, int T, int C, int NH) {
    (void)ctx, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)C, (void)NH;
    die("attention_forward_v2: flash attention runs on bf16 tensor cores: the bf16 build's "
        "(chapter 05, --flash-attention)");
}

extern "C" void attention_backward_v2(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                      const floatX *dout, const floatX *out, const floatX *qkv,
                                      const float *lse, int B, int T, int C, int NH) {
    (void)ctx, (void)dqkv, (void)scratch, (void)dout, (void)out, (void)qkv, (void)lse;
    (void)B, (void)T, (void)C, (void)NH;
    die("attention_backward_v2: flash attention runs on bf16 tensor cores: the bf16 build's "
        "(chapter 05, --flash-attention)");
}

#endif

extern "C" size_t attention_backward_v2_scratch_floats(int B, int T, int NH) {
    return (size_t)B * NH * T;
}
