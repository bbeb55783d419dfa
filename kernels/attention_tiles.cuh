// attention_tiles.cuh: what chapter 05's two flash attention files share
// (attention_flash.cu, mma.sync, and attention_flash_hopper.cu, wgmma): the
// tiles of rows in shared memory and how they are loaded and stored, the
// online softmax of a thread's rows, the backward pass's first kernel and
// the step between its products.
// For the .cu files of the bf16 build only.
//
// Both files lay their products out the same way: a warp owns 16 rows of a
// tile (or 32: two m-tiles), and a thread holds rows g and g + 8 of each
// m-tile, g = lane / 4, and columns 2t and 2t + 1, t = lane % 4, of every
// 8-column n-tile (mma.cuh has the fragment layouts). mma.sync's
// accumulators are laid out that way per warp, and wgmma's per warp of its
// warpgroup, so the code between the products serves both.
#ifndef ATTENTION_TILES_CUH
#define ATTENTION_TILES_CUH

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "gpu_context.h"
#include "mma.cuh"
#include "reduce.cuh"

namespace {

typedef __nv_bfloat16 bf16;

constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

// 2^x, by the SFU's approximation (2 ulp), results below 2^-126 flushed to 0:
// one instruction, where exp2f adds a few to keep denormal results.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// ---- tiles in shared memory ------------------------------------------------------
// A tile of rows of HS bf16 values, row-major, with each row's 16-byte
// chunks permuted: chunk c of row r is stored at chunk c ^ (r % 8) (c ^ (r %
// chunks) in rows of fewer than 8 chunks). ldmatrix reads one chunk of each
// of 8 consecutive rows: in rows of 128 bytes, unpermuted, those 8 chunks sit
// in the same 4 of the 32 banks and are served one after another; permuted,
// they cover all 32 banks and are served at once.
template <int HS>
__device__ __forceinline__ int tile_offset(int row, int chunk) {
    constexpr int CHUNKS = HS / 8, MASK = (CHUNKS < 8 ? CHUNKS : 8) - 1;
    return row * HS + ((chunk ^ (row & MASK)) << 3);
}

// Rows [row0, row0 + ROWS) of one head of a (B,T,·) tensor into a tile, all
// THREADS threads of the block together, 16 bytes per copy. `head` is the
// head's first column in row 0 of the sequence; `ld` the tensor's row
// stride. Rows at or past T become zeros: they are computed with and never
// stored. Thread i always copies chunk i % (HS/8) of rows i / (HS/8),
// i / (HS/8) + THREADS / (HS/8), ...: with THREADS known when compiling, the
// chunk's place in the tile is worked out once per kernel, not per copy.
template <int ROWS, int HS, int THREADS>
__device__ __forceinline__ void load_tile(bf16 *tile, const bf16 *head, int ld, int row0, int T) {
    constexpr int CHUNKS = HS / 8, ROWS_PER_PASS = THREADS / CHUNKS;
    static_assert(THREADS % CHUNKS == 0 && ROWS % ROWS_PER_PASS == 0, "whole passes only");
    const int c = threadIdx.x % CHUNKS;
#pragma unroll
    for (int r = threadIdx.x / CHUNKS; r < ROWS; r += ROWS_PER_PASS) {
        const int t = row0 + r;
        cp_async_16(tile + tile_offset<HS>(r, c), head + (size_t)min(t, T - 1) * ld + c * 8,
                    t < T ? 16 : 0);
    }
}

// A warp's rows of accumulators (MT*16 rows x HS), times `factor`, into rows
// [t0, t0 + MT*16) of one head of a (B,T,·) tensor (`head`, `ld` as
// load_tile's). They go through the warp's own rows of a tile, `staging`
// (rows no other warp reads), as bf16 pairs, and then out 16 bytes per lane,
// whole rows at a time. Rows at or past T are not written.
template <int HS, int MT>
__device__ __forceinline__ void store_warp_rows(bf16 *head, int ld, int t0, int T,
                                                float (&acc)[MT][HS / 8][4], float factor,
                                                bf16 *staging, int staging_row0) {
    constexpr int CHUNKS = HS / 8;
    const int lane = threadIdx.x % WARP_SIZE, g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < HS / 8; nt++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int r = staging_row0 + mt * 16 + g + 8 * half;
                *reinterpret_cast<uint32_t *>(staging + tile_offset<HS>(r, nt) + 2 * t4) =
                    pack_bf16(acc[mt][nt][2 * half] * factor, acc[mt][nt][2 * half + 1] * factor);
            }
    __syncwarp();
    for (int i = lane; i < MT * 16 * CHUNKS; i += WARP_SIZE) {
        const int r = i / CHUNKS, c = i % CHUNKS, t = t0 + r;
        if (t < T)
            *reinterpret_cast<uint4 *>(head + (size_t)t * ld + c * 8) =
                *reinterpret_cast<const uint4 *>(staging + tile_offset<HS>(staging_row0 + r, c));
    }
}

// ---- the online softmax ------------------------------------------------------------
// ANCHOR: online_softmax
// One tile of KEYS scores into probabilities, with the running statistics of each
// of the thread's rows: the maximum m (in units of log2: scores x times
// scale_log2 = log2(e) / sqrt(hs)) and the sum l of 2^(x scale_log2 - m)
// over the keys seen so far. When a
// tile raises a row's maximum, what was summed so far, l and the row's
// output o, is rescaled by 2^(m_old - m_new): the online softmax. Keys after
// a row's query (causal mask, `mask` on tiles that cross the diagonal) count
// as -infinity. A thread holds rows g and g + 8 of each m-tile, and 2 of the
// 8 columns of every n-tile: the 4 threads of a quad (lanes 4g..4g+3) share
// rows, so a row's maximum is reduced across the quad.
// The two halves are separate functions so that chapter 12's kernel can
// compute a tile's probabilities while the product that adds the previous
// tile into o is still running, and rescale o once it has finished.
template <int MT, int KEYS>
__device__ __forceinline__ void online_softmax_probs(float (&s)[MT][KEYS / 8][4],
                                                     float (&m)[MT][2], float (&l)[MT][2],
                                                     float (&rescale)[MT][2], int row0,
                                                     int key0, bool mask, float scale_log2) {
    const int t4 = threadIdx.x % 4, g = threadIdx.x % WARP_SIZE / 4;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            // Only tiles that cross the diagonal compare keys with rows: a
            // branch, not a predicate, so the other tiles spend no integer
            // instructions on it.
            if (mask) {
                const int row = row0 + mt * 16 + g + 8 * half;
#pragma unroll
                for (int nt = 0; nt < KEYS / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        if (key0 + nt * 8 + 2 * t4 + e > row) s[mt][nt][2 * half + e] = -INFINITY;
            }
            float tile_max = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < KEYS / 8; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) tile_max = fmaxf(tile_max, s[mt][nt][2 * half + e]);
            tile_max = fmaxf(tile_max, __shfl_xor_sync(FULL_MASK, tile_max, 1));
            tile_max = fmaxf(tile_max, __shfl_xor_sync(FULL_MASK, tile_max, 2));
            // Every row sees key 0 in the first tile, so m_new is finite from
            // then on; on the first tile m is -inf and the rescaling is by 0.
            const float m_new = fmaxf(m[mt][half], tile_max * scale_log2);
            rescale[mt][half] = fast_exp2(m[mt][half] - m_new);
            m[mt][half] = m_new;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < KEYS / 8; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float p = fast_exp2(fmaf(s[mt][nt][2 * half + e], scale_log2, -m_new));
                    s[mt][nt][2 * half + e] = p;
                    sum += p;
                }
            l[mt][half] = l[mt][half] * rescale[mt][half] + sum;  // this thread's columns only
        }
}

// o's rows times their factors (the online softmax's rescaling). Once the
// rows' maxima have settled, most tiles raise none of them and every factor
// is exactly 1: the warp checks that together (one vote) and skips the
// multiplications, which would change nothing.
template <int HS, int MT>
__device__ __forceinline__ void rescale_rows(float (&o)[MT][HS / 8][4],
                                             const float (&rescale)[MT][2]) {
    bool unchanged = true;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) unchanged &= rescale[mt][0] == 1.0f && rescale[mt][1] == 1.0f;
    if (__all_sync(FULL_MASK, unchanged)) return;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++)
#pragma unroll
            for (int nt = 0; nt < HS / 8; nt++) {
                o[mt][nt][2 * half] *= rescale[mt][half];
                o[mt][nt][2 * half + 1] *= rescale[mt][half];
            }
}

template <int HS, int MT, int KEYS>
__device__ __forceinline__ void online_softmax(float (&s)[MT][KEYS / 8][4], float (&m)[MT][2],
                                               float (&l)[MT][2], float (&o)[MT][HS / 8][4],
                                               int row0, int key0, bool mask, float scale_log2) {
    float rescale[MT][2];
    online_softmax_probs<MT, KEYS>(s, m, l, rescale, row0, key0, mask, scale_log2);
    rescale_rows<HS, MT>(o, rescale);
}
// ANCHOR_END: online_softmax

// ---- the backward pass's helpers --------------------------------------------------
// ANCHOR: delta_kernel
// D[b,h,t] = sum over the head's channels of dout * out: the dot product of
// each row of P with its row of dP (sum_j P_tj dP_tj = dO_t . O_t), which
// every dS = P * (dP - D) needs. One warp per (b, t) row of C values; each
// lane multiplies 8 pairs, then the HS/8 lanes of each head add theirs.
// Blocks of DELTA_WARPS warps. The two steps are functions of their own
// because chapter 12's dQ kernel computes D too (attention_flash_bwd.cu),
// and its D must have these bits: the same operations in the same order.
constexpr int DELTA_WARPS = 4;

// One lane's part of a row's D: the 8 products of its 16 bytes of dout and
// of out, added in order.
__device__ __forceinline__ float delta_part(const bf16 *dout8, const bf16 *out8) {
    uint4 x = *reinterpret_cast<const uint4 *>(dout8);
    uint4 y = *reinterpret_cast<const uint4 *>(out8);
    const bf16 *dx = reinterpret_cast<const bf16 *>(&x);
    const bf16 *dy = reinterpret_cast<const bf16 *>(&y);
    float sum = 0.0f;
    for (int i = 0; i < 8; i++) sum += __bfloat162float(dx[i]) * __bfloat162float(dy[i]);
    return sum;
}

// The HS/8 lanes that hold one head's row (neighbours, the first a multiple
// of HS/8) add their parts; every one of them gets the row's D.
template <int HS>
__device__ __forceinline__ float delta_of_parts(float part) {
    constexpr int CHUNKS = HS / 8;  // lanes per head: a power of two that divides 32
    for (int offset = 1; offset < CHUNKS; offset *= 2)
        part += __shfl_xor_sync(FULL_MASK, part, offset);
    return part;
}

template <int HS>
__global__ void flash_attention_delta_kernel(float *delta, const bf16 *dout, const bf16 *out,
                                             int BT, int T, int NH) {
    constexpr int CHUNKS = HS / 8;
    const int row = blockIdx.x * DELTA_WARPS + threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    if (row >= BT) return;
    const int C = NH * HS, b = row / T, t = row % T;
    for (int base = 0; base < C / 8; base += WARP_SIZE) {
        const int c = base + lane;
        float sum = 0.0f;
        if (c < C / 8) sum = delta_part(dout + (size_t)row * C + c * 8, out + (size_t)row * C + c * 8);
        sum = delta_of_parts<HS>(sum);
        if (c < C / 8 && c % CHUNKS == 0) delta[((size_t)b * NH + c / CHUNKS) * T + t] = sum;
    }
}
// ANCHOR_END: delta_kernel

// Rows [row0, row0 + ROWS) of one (b, h) row of lse or of D into shared
// memory, 0 past T, 4 bytes per copy (rows of T floats need not start on 16
// bytes), asynchronously with the tiles.
template <int ROWS>
__device__ __forceinline__ void load_row_stats(float *dst, const float *src, int row0, int T) {
    for (int i = threadIdx.x; i < ROWS; i += blockDim.x)
        cp_async_4(dst + i, src + (row0 + i < T ? row0 + i : 0), row0 + i < T ? 4 : 0);
}

// ANCHOR: backward_probs
// The step between the backward pass's products, for a warp's 16 rows of
// one tile, as the dQ kernels hold them (queries are rows, keys columns):
// S and dP in, the probabilities P = 2^(S scale_log2 - lse) rebuilt
// (row_lse in units of log2), keys after the row's query set to 0 (`mask`,
// on tiles that cross the diagonal), and dS = P * (dP - D) written over S.
// row0 is the thread's first row (its second is row0 + 8), key0 the tile's
// first key.
// Both come in two versions, chosen per tile by a branch: with the mask
// (tiles that cross the diagonal, or T) and without it, so that the tiles
// off the diagonal spend no integer instructions comparing keys with
// queries. The arithmetic is the same in both.
template <int N, bool MASK>
__device__ __forceinline__ void ds_by_query_rows_tile(float (&s)[1][N / 8][4],
                                                      const float (&dp)[1][N / 8][4],
                                                      const float (&row_lse)[2],
                                                      const float (&row_delta)[2], int row0,
                                                      int key0, float scale_log2) {
    const int t4 = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < N / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int half = e / 2, key = key0 + nt * 8 + 2 * t4 + e % 2;
            float p = fast_exp2(fmaf(s[0][nt][e], scale_log2, -row_lse[half]));
            if (MASK && key > row0 + 8 * half) p = 0.0f;
            s[0][nt][e] = p * (dp[0][nt][e] - row_delta[half]);
        }
}

template <int N>
__device__ __forceinline__ void ds_by_query_rows(float (&s)[1][N / 8][4],
                                                 const float (&dp)[1][N / 8][4],
                                                 const float (&row_lse)[2],
                                                 const float (&row_delta)[2], int row0, int key0,
                                                 bool mask, float scale_log2) {
    if (mask)
        ds_by_query_rows_tile<N, true>(s, dp, row_lse, row_delta, row0, key0, scale_log2);
    else
        ds_by_query_rows_tile<N, false>(s, dp, row_lse, row_delta, row0, key0, scale_log2);
}

// The same step transposed, as the dK/dV kernels hold it (keys are rows,
// queries columns): S^T and dP^T in, P^T and dS^T out, in place. The
// columns' lse (natural units) and D come from the tile's rows in shared
// memory; a query before the row's key, or at or past T, gives 0. key0 is
// the thread's first key (its second is key0 + 8), q0 the tile's first
// query; `mask` on tiles that cross the diagonal or T.
template <int N, bool MASK>
__device__ __forceinline__ void ds_by_key_rows_tile(float (&pt)[1][N / 8][4],
                                                    float (&dst)[1][N / 8][4],
                                                    const float *tile_lse,
                                                    const float *tile_delta, int key0, int q0,
                                                    int T, float scale_log2) {
    const int t4 = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < N / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int key = key0 + 8 * (e / 2), col = nt * 8 + 2 * t4 + e % 2;
            float p = fast_exp2(fmaf(pt[0][nt][e], scale_log2, -tile_lse[col] * LOG2E));
            if (MASK && (q0 + col < key || q0 + col >= T)) p = 0.0f;
            pt[0][nt][e] = p;
            dst[0][nt][e] = p * (dst[0][nt][e] - tile_delta[col]);
        }
}

template <int N>
__device__ __forceinline__ void ds_by_key_rows(float (&pt)[1][N / 8][4], float (&dst)[1][N / 8][4],
                                               const float *tile_lse, const float *tile_delta,
                                               int key0, int q0, int T, bool mask,
                                               float scale_log2) {
    if (mask)
        ds_by_key_rows_tile<N, true>(pt, dst, tile_lse, tile_delta, key0, q0, T, scale_log2);
    else
        ds_by_key_rows_tile<N, false>(pt, dst, tile_lse, tile_delta, key0, q0, T, scale_log2);
}
// ANCHOR_END: backward_probs

// The lse (in units of log2) and D of the thread's two rows of a dQ tile,
// row0 and row0 + 8, from the (b, h) rows of lse and D; 0 past T.
__device__ __forceinline__ void load_query_row_stats(float (&row_lse)[2], float (&row_delta)[2],
                                                     const float *lse_row,
                                                     const float *delta_row, int row0, int T) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int t = row0 + 8 * half;
        row_lse[half] = t < T ? lse_row[t] * LOG2E : 0.0f;
        row_delta[half] = t < T ? delta_row[t] : 0.0f;
    }
}

}  // namespace

// A kernel's dynamic shared memory above 48 KB must be allowed first, once.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)bytes));
}

#endif
