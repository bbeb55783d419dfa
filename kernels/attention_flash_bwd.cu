// attention_flash_bwd.cu: see attention_flash.h. Chapter 12's candidates for
// the backward pass past v4's (backward variants 5 to 8). Each is still v3's
// two kernels, one per tile of 64 queries (dQ) and one per tile of 64 keys
// (dK, dV), one warpgroup a block, three blocks an SM, in groups of heads:
// every value is made by v3's operations in v3's order, so each gives v3's
// bits. What each changes:
//
//   5  No delta kernel. D = rowsum(dO * O) is needed by both kernels, for
//      the rows of queries: the dQ kernel computes it for its own 64 rows
//      (it holds them all, and nobody else does) with the delta kernel's own
//      arithmetic (attention_tiles.cuh: delta_part, delta_of_parts), keeps
//      it in registers and writes it to the scratch; the dK/dV kernel runs
//      after it and reads it there. One launch less, and dO is read once
//      where it was read twice.
//   6  + each tile's probabilities P = 2^(S - lse) computed while the tensor
//      cores still multiply dP (S and dP committed as two groups, the first
//      waited for alone). In v3 a tile's 32 exponentials a thread wait for
//      both products; here only for the first.
//   7  5, with the tiles copied by the TMA into a ring of mbarriers (below:
//      why without a producer warp).
//   8  6 and 7 together.
//
// Why the TMA copies are issued by a consumer thread, and no producer warp:
// the registers. v3's backward blocks are one warpgroup each, three to an
// SM: 12 warps, 3 on each of the 4 schedulers, 16384 / (3 x 32) = 170
// registers a thread (168 as the compiler counts them), and the dK/dV
// kernel holds 4 tiles of accumulators (128 registers) before it addresses
// anything. One producer warp more per block makes 15 warps: 4 on one
// scheduler, 128 registers a thread; less than dK/dV needs. A producer warp
// serving two consumer warpgroups (9 warps a block) fits one block an SM
// (two would leave 96 registers): 8 multiplying warps where v3 has 12.
// setmaxnreg needs a whole producer warpgroup: two blocks of 3 warpgroups
// leave the consumers (65536 / 2 - 128 x 24) / 256 = 116 registers, one
// block of 4 (three consumers) 160, the same 12 warps multiplying as v3 but
// three tiles of queries sharing each tile of keys, which is another kernel.
// So here the warpgroup's thread 0 hands the TMA the next tile (one
// instruction), and the 128 threads wait on mbarriers instead of meeting at
// a __syncthreads: v3's occupancy, without its per-thread address
// arithmetic, its cp.async waits and its proxy fences.
#include <math.h>

#include "attention_flash.h"
#include "util/util.h"

#if defined(PRECISION_BF16) && defined(WITH_WGMMA)
#include <cuda.h>

#include "attention_wgmma.cuh"
#include "tma.cuh"

// attention_flash_ws.cu's tensor maps: a (B, T, width) bf16 tensor of row
// stride ld, as boxes of 64 rows x 64 columns in the 128-byte swizzle, rows
// past T filled with zeros.
CUtensorMap attention_tile_map(const bf16 *tensor, int B, int T, int width, int ld,
                               const char *who);

namespace {

// Three stages of the tiles a block walks over, as v3: the next tile is
// copied into one while the block uses another, and the third is the one
// the slowest warp may still be reading.
constexpr int STAGES = 3;
static_assert(ROWS == 64 && HS == 64 && GROUP == 4 * WARP_SIZE && ROWS == 4 * 16,
              "a warpgroup of 4 warps, 16 rows each, tiles of 64 x 64");

// v3's: the tiles copied in by this thread are complete and visible to the
// tensor cores of the warpgroup, and every thread is done with the tile
// before the last, whose stage the next copy reuses.
__device__ __forceinline__ void tiles_ready() {
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
}

// ---- D in the dQ kernel ---------------------------------------------------------------
// ANCHOR: own_delta
// D of the warp's 16 rows of queries, from row0 on: the delta kernel's
// arithmetic (delta_part, delta_of_parts), so the same bits. The 8 lanes of
// each quarter of the warp take one row, 4 rows a pass, 4 passes; each
// row's first lane writes its D out for the dK/dV kernel. Then each thread
// takes D of its own two rows, g and g + 8 (the accumulators' layout), from
// the lanes that hold them: row g is pass g / 4's, quarter g % 4. 0 past T,
// as load_query_row_stats gives.
__device__ __forceinline__ void own_query_row_delta(float (&row_delta)[2], float *delta_row,
                                                    const bf16 *dout_head, const bf16 *out_head,
                                                    int C, int row0, int T) {
    constexpr int CHUNKS = HS / 8, ROWS_PER_PASS = WARP_SIZE / CHUNKS;
    constexpr int PASSES = 16 / ROWS_PER_PASS;
    static_assert(CHUNKS == 8 && ROWS_PER_PASS == 4 && PASSES == 4, "heads of 64");
    const int lane = threadIdx.x % WARP_SIZE, c = lane % CHUNKS, quarter = lane / CHUNKS;
    const int g = lane / 4;
    float d[PASSES];
#pragma unroll
    for (int p = 0; p < PASSES; p++) {
        const int t = row0 + p * ROWS_PER_PASS + quarter;
        float part = 0.0f;
        if (t < T)
            part = delta_part(dout_head + (size_t)t * C + c * 8, out_head + (size_t)t * C + c * 8);
        d[p] = delta_of_parts<HS>(part);
        if (c == 0 && t < T) delta_row[t] = d[p];
    }
    float mine[PASSES];
#pragma unroll
    for (int p = 0; p < PASSES; p++)
        mine[p] = __shfl_sync(FULL_MASK, d[p], (g % ROWS_PER_PASS) * CHUNKS);
    row_delta[0] = g < ROWS_PER_PASS ? mine[0] : mine[1];
    row_delta[1] = g < ROWS_PER_PASS ? mine[2] : mine[3];
#pragma unroll
    for (int half = 0; half < 2; half++)
        if (row0 + g + 8 * half >= T) row_delta[half] = 0.0f;
}
// ANCHOR_END: own_delta

// The lse of the thread's two rows (units of log2), 0 past T: as
// load_query_row_stats.
__device__ __forceinline__ void load_query_row_lse(float (&row_lse)[2], const float *lse_row,
                                                   int row, int T) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int t = row + 8 * half;
        row_lse[half] = t < T ? lse_row[t] * LOG2E : 0.0f;
    }
}

// ---- the step between the products, in two halves ------------------------------------
// attention_tiles.cuh's ds_by_query_rows and ds_by_key_rows, split where
// dP is first needed: the probabilities from S alone, then dS = P (dP - D).
// Each value is made by the same operations as there, in the same order.
template <bool MASK>
__device__ __forceinline__ void probs_by_query_rows_tile(float (&s)[1][ROWS / 8][4],
                                                         const float (&row_lse)[2], int row0,
                                                         int key0, float scale_log2) {
    const int t4 = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < ROWS / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int half = e / 2, key = key0 + nt * 8 + 2 * t4 + e % 2;
            float p = fast_exp2(fmaf(s[0][nt][e], scale_log2, -row_lse[half]));
            if (MASK && key > row0 + 8 * half) p = 0.0f;
            s[0][nt][e] = p;
        }
}

__device__ __forceinline__ void probs_by_query_rows(float (&s)[1][ROWS / 8][4],
                                                    const float (&row_lse)[2], int row0,
                                                    int key0, bool mask, float scale_log2) {
    if (mask) probs_by_query_rows_tile<true>(s, row_lse, row0, key0, scale_log2);
    else probs_by_query_rows_tile<false>(s, row_lse, row0, key0, scale_log2);
}

__device__ __forceinline__ void ds_from_probs_by_query_rows(float (&s)[1][ROWS / 8][4],
                                                            const float (&dp)[1][ROWS / 8][4],
                                                            const float (&row_delta)[2]) {
#pragma unroll
    for (int nt = 0; nt < ROWS / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[0][nt][e] = s[0][nt][e] * (dp[0][nt][e] - row_delta[e / 2]);
}

template <bool MASK>
__device__ __forceinline__ void probs_by_key_rows_tile(float (&pt)[1][ROWS / 8][4],
                                                       const float *tile_lse, int key0, int q0,
                                                       int T, float scale_log2) {
    const int t4 = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < ROWS / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int key = key0 + 8 * (e / 2), col = nt * 8 + 2 * t4 + e % 2;
            float p = fast_exp2(fmaf(pt[0][nt][e], scale_log2, -tile_lse[col] * LOG2E));
            if (MASK && (q0 + col < key || q0 + col >= T)) p = 0.0f;
            pt[0][nt][e] = p;
        }
}

__device__ __forceinline__ void probs_by_key_rows(float (&pt)[1][ROWS / 8][4],
                                                  const float *tile_lse, int key0, int q0, int T,
                                                  bool mask, float scale_log2) {
    if (mask) probs_by_key_rows_tile<true>(pt, tile_lse, key0, q0, T, scale_log2);
    else probs_by_key_rows_tile<false>(pt, tile_lse, key0, q0, T, scale_log2);
}

__device__ __forceinline__ void ds_from_probs_by_key_rows(const float (&pt)[1][ROWS / 8][4],
                                                          float (&dst)[1][ROWS / 8][4],
                                                          const float *tile_delta) {
    const int t4 = threadIdx.x % 4;
#pragma unroll
    for (int nt = 0; nt < ROWS / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dst[0][nt][e] = pt[0][nt][e] * (dst[0][nt][e] - tile_delta[nt * 8 + 2 * t4 + e % 2]);
}

// ---- one tile of each kernel's walk ---------------------------------------------------
// ANCHOR: dq_step
// The dQ kernel's step for one tile of keys (tk, tv): S = Q K^T and
// dP = dO V^T, then dS, then dQ += dS K. With OVERLAP, S and dP are two
// groups of products, and the probabilities are computed as soon as S's
// group is done (wgmma_wait<1>: one group, dP's, may still run).
template <bool OVERLAP>
__device__ __forceinline__ void dq_step(float (&dq)[1][HS / 8][4], const bf16 *sq,
                                        const bf16 *sdo, const bf16 *tk, const bf16 *tv,
                                        const float (&row_lse)[2], const float (&row_delta)[2],
                                        int row, int key0, bool mask, float scale_log2) {
    float s[1][ROWS / 8][4], dp[1][ROWS / 8][4];
    wg_mma_with_rows(s[0], sq, tk);  // S = Q K^T
    if (OVERLAP) wgmma_commit();
    wg_mma_with_rows(dp[0], sdo, tv);  // dP = dO V^T
    wgmma_commit();
    if (OVERLAP) {
        wgmma_wait<1>();
        wgmma_fence_operands(s[0]);
        probs_by_query_rows(s, row_lse, row, key0, mask, scale_log2);
        wgmma_wait<0>();
        wgmma_fence_operands(dp[0]);
        ds_from_probs_by_query_rows(s, dp, row_delta);
    } else {  // v3's
        wgmma_wait<0>();
        ds_by_query_rows<ROWS>(s, dp, row_lse, row_delta, row, key0, mask, scale_log2);
    }
    wg_mma_with_probs(dq[0], s[0], tk);  // dQ += dS K
    wgmma_commit();
    wgmma_wait<0>();
}
// ANCHOR_END: dq_step

// The dK/dV kernel's step for one tile of queries (tq, tdo, and the tile's
// lse and D): S^T = K Q^T and dP^T = V dO^T, then P^T and dS^T, then
// dV += P^T dO and dK += dS^T Q. OVERLAP as dq_step's.
template <bool OVERLAP>
__device__ __forceinline__ void dkdv_step(float (&dk)[1][HS / 8][4], float (&dv)[1][HS / 8][4],
                                          const bf16 *sk, const bf16 *sv, const bf16 *tq,
                                          const bf16 *tdo, const float *tlse,
                                          const float *tdelta, int key, int q0, int T, bool mask,
                                          float scale_log2) {
    float pt[1][ROWS / 8][4], dst[1][ROWS / 8][4];
    wg_mma_with_rows(pt[0], sk, tq);  // S^T = K Q^T
    if (OVERLAP) wgmma_commit();
    wg_mma_with_rows(dst[0], sv, tdo);  // dP^T = V dO^T
    wgmma_commit();
    if (OVERLAP) {
        wgmma_wait<1>();
        wgmma_fence_operands(pt[0]);
        probs_by_key_rows(pt, tlse, key, q0, T, mask, scale_log2);
        wgmma_wait<0>();
        wgmma_fence_operands(dst[0]);
        ds_from_probs_by_key_rows(pt, dst, tdelta);
    } else {  // v3's
        wgmma_wait<0>();
        ds_by_key_rows<ROWS>(pt, dst, tlse, tdelta, key, q0, T, mask, scale_log2);
    }
    wg_mma_with_probs(dv[0], pt[0], tdo);  // dV += P^T dO
    wg_mma_with_probs(dk[0], dst[0], tq);  // dK += dS^T Q
    wgmma_commit();
    wgmma_wait<0>();
}

// ---- where a block is -----------------------------------------------------------------
// A block of either kernel: its (b, h) and its tile (0 the heaviest).
struct BlockPlace {
    int bh, b, h, C, ld, tile;  // ld: qkv's row stride, 3C
};

__device__ __forceinline__ BlockPlace block_place(int B, int T, int NH, int group_heads) {
    const int tiles = (T + ROWS - 1) / ROWS;
    const TilePlace at = tile_place<ATTENTION_HEAD_GROUPS>(tiles, B * NH, group_heads);
    BlockPlace p;
    p.bh = at.bh, p.b = at.bh / NH, p.h = at.bh % NH, p.C = NH * HS, p.ld = 3 * p.C;
    p.tile = at.tile;
    return p;
}

// The block's head in row 0 of its sequence of a (B,T,·) tensor of row
// stride ld, from column `col` on (0: q, dout, out; C: k; 2C: v).
__device__ __forceinline__ const bf16 *head_of(const bf16 *tensor, const BlockPlace &at, int T,
                                               int ld, int col) {
    return tensor + (size_t)at.b * T * ld + col + at.h * HS;
}

// ---- the kernels, tiles copied by the threads (variants 5 and 6) -----------------------
// ANCHOR: dq_kernel_delta
// v3's dQ kernel, which also computes D for its rows (own_query_row_delta)
// and writes it out, while its first tiles are on their way.
template <bool OVERLAP>
__global__ void __launch_bounds__(GROUP, 3)
    flash_attention_backward_dq_delta_kernel(bf16 *dqkv, float *delta, const bf16 *dout,
                                             const bf16 *out, const bf16 *qkv, const float *lse,
                                             int B, int T, int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    bf16 *sq = aligned_smem(smem_raw), *sdo = sq + TILE_ELEMENTS;   // ROWS x HS each
    bf16 *sk = sdo + TILE_ELEMENTS, *sv = sk + STAGES * TILE_ELEMENTS;  // STAGES of ROWS x HS each

    const BlockPlace at = block_place(B, T, NH, group_heads);
    const int queries = (T + ROWS - 1) / ROWS;
    const int q0 = (queries - 1 - at.tile) * ROWS, tiles = (min(q0 + ROWS, T) - 1) / ROWS + 1;
    const bf16 *q = head_of(qkv, at, T, at.ld, 0), *k = head_of(qkv, at, T, at.ld, at.C);
    const bf16 *v = head_of(qkv, at, T, at.ld, 2 * at.C);
    const bf16 *dout_head = head_of(dout, at, T, at.C, 0), *out_head = head_of(out, at, T, at.C, 0);
    const int warp = threadIdx.x / WARP_SIZE, g = threadIdx.x % WARP_SIZE / 4;
    const int row0 = q0 + warp * 16;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;

    load_tile<ROWS, HS, GROUP>(sq, q, at.ld, q0, T);
    load_tile<ROWS, HS, GROUP>(sdo, dout_head, at.C, q0, T);
    load_tile<ROWS, HS, GROUP>(sk, k, at.ld, 0, T);
    load_tile<ROWS, HS, GROUP>(sv, v, at.ld, 0, T);
    cp_async_commit();
    float row_lse[2], row_delta[2];  // rows g and g + 8 of the warp's 16
    own_query_row_delta(row_delta, delta + (size_t)at.bh * T, dout_head, out_head, at.C, row0, T);
    load_query_row_lse(row_lse, lse + (size_t)at.bh * T, row0 + g, T);
    float dq[1][HS / 8][4] = {};

    for (int j = 0; j < tiles; j++) {
        const int stage = j % STAGES, next = (j + 1) % STAGES;
        if (j + 1 < tiles) {
            load_tile<ROWS, HS, GROUP>(sk + next * TILE_ELEMENTS, k, at.ld, (j + 1) * ROWS, T);
            load_tile<ROWS, HS, GROUP>(sv + next * TILE_ELEMENTS, v, at.ld, (j + 1) * ROWS, T);
        }
        cp_async_commit();
        tiles_ready();
        dq_step<OVERLAP>(dq, sq, sdo, sk + stage * TILE_ELEMENTS, sv + stage * TILE_ELEMENTS,
                         row_lse, row_delta, row0 + g, j * ROWS, (j + 1) * ROWS > row0,
                         scale_log2);
    }
    store_warp_rows<HS, 1>(dqkv + (size_t)at.b * T * at.ld + at.h * HS, at.ld, row0, T, dq,
                           scale, sq, warp * 16);
}
// ANCHOR_END: dq_kernel_delta

// v3's dK/dV kernel, reading the D that the dQ kernel wrote.
template <bool OVERLAP>
__global__ void __launch_bounds__(GROUP, 3)
    flash_attention_backward_dkdv_split_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                               const float *lse, const float *delta, int B,
                                               int T, int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    bf16 *sk = aligned_smem(smem_raw), *sv = sk + TILE_ELEMENTS;  // ROWS x HS each
    bf16 *sq = sv + TILE_ELEMENTS, *sdo = sq + STAGES * TILE_ELEMENTS;  // STAGES of ROWS x HS each
    float *slse = reinterpret_cast<float *>(sdo + STAGES * TILE_ELEMENTS);
    float *sdelta = slse + STAGES * ROWS;

    const BlockPlace at = block_place(B, T, NH, group_heads);
    const int tiles = (T + ROWS - 1) / ROWS, k0 = at.tile * ROWS, first = at.tile;
    const bf16 *q = head_of(qkv, at, T, at.ld, 0), *k = head_of(qkv, at, T, at.ld, at.C);
    const bf16 *v = head_of(qkv, at, T, at.ld, 2 * at.C), *dout_head = head_of(dout, at, T, at.C, 0);
    const float *lse_row = lse + (size_t)at.bh * T, *delta_row = delta + (size_t)at.bh * T;
    const int warp = threadIdx.x / WARP_SIZE, g = threadIdx.x % WARP_SIZE / 4;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;

    load_tile<ROWS, HS, GROUP>(sk, k, at.ld, k0, T);
    load_tile<ROWS, HS, GROUP>(sv, v, at.ld, k0, T);
    load_tile<ROWS, HS, GROUP>(sq, q, at.ld, first * ROWS, T);
    load_tile<ROWS, HS, GROUP>(sdo, dout_head, at.C, first * ROWS, T);
    load_row_stats<ROWS>(slse, lse_row, first * ROWS, T);
    load_row_stats<ROWS>(sdelta, delta_row, first * ROWS, T);
    cp_async_commit();
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};

    for (int i = first; i < tiles; i++) {
        const int stage = (i - first) % STAGES, next = (i - first + 1) % STAGES, q0 = i * ROWS;
        if (i + 1 < tiles) {
            load_tile<ROWS, HS, GROUP>(sq + next * TILE_ELEMENTS, q, at.ld, q0 + ROWS, T);
            load_tile<ROWS, HS, GROUP>(sdo + next * TILE_ELEMENTS, dout_head, at.C, q0 + ROWS, T);
            load_row_stats<ROWS>(slse + next * ROWS, lse_row, q0 + ROWS, T);
            load_row_stats<ROWS>(sdelta + next * ROWS, delta_row, q0 + ROWS, T);
        }
        cp_async_commit();
        tiles_ready();
        dkdv_step<OVERLAP>(dk, dv, sk, sv, sq + stage * TILE_ELEMENTS, sdo + stage * TILE_ELEMENTS,
                           slse + stage * ROWS, sdelta + stage * ROWS, k0 + warp * 16 + g, q0, T,
                           q0 < k0 + ROWS || q0 + ROWS > T, scale_log2);
    }
    bf16 *dqkv_seq = dqkv + (size_t)at.b * T * at.ld + at.h * HS;
    store_warp_rows<HS, 1>(dqkv_seq + at.C, at.ld, k0 + warp * 16, T, dk, scale, sk, warp * 16);
    store_warp_rows<HS, 1>(dqkv_seq + 2 * at.C, at.ld, k0 + warp * 16, T, dv, 1.0f, sv,
                           warp * 16);
}

// ---- the kernels, tiles copied by the TMA (variants 7 and 8) ---------------------------
// ANCHOR: tma_ring
// The ring: tile n of a block's walk goes into stage n % STAGES, whose
// "full" barrier completes when its bytes have landed (and, in the dK/dV
// kernel, its 64 values of lse and D are stored), and whose "empty" barrier
// when all 128 threads are done with it (each arrives after its products'
// wait). The warpgroup's thread 0 hands the TMA tile n + 1 at the start of
// step n, into the stage of tile n - 2: it first waits for that tile's
// "empty" phase (the slowest warp is at most a step behind, as after v3's
// barrier). Phases, by parity: tile n is its stage's (n / STAGES)-th use.
__device__ __forceinline__ int use_parity(int n) { return (n / STAGES) & 1; }

// Before a stage is refilled with tile n (n >= STAGES): every thread is
// done with tile n - STAGES.
__device__ __forceinline__ void wait_stage_empty(uint64_t *empty, int n) {
    if (n >= STAGES) mbarrier_wait(&empty[n % STAGES], use_parity(n - STAGES));
}
// ANCHOR_END: tma_ring

// The dQ kernel's shared memory: Q and dO, STAGES of K and of V, then the
// barriers.
struct DqSmem {
    bf16 *q, *dout, *k, *v;
    uint64_t *full, *empty, *qdo_full;
};

__device__ __forceinline__ DqSmem dq_smem(unsigned char *raw) {
    DqSmem sm;
    sm.q = aligned_smem(raw);
    sm.dout = sm.q + TILE_ELEMENTS;
    sm.k = sm.dout + TILE_ELEMENTS;
    sm.v = sm.k + STAGES * TILE_ELEMENTS;
    sm.full = reinterpret_cast<uint64_t *>(sm.v + STAGES * TILE_ELEMENTS);
    sm.empty = sm.full + STAGES;
    sm.qdo_full = sm.empty + STAGES;
    return sm;
}
constexpr size_t DQ_TMA_SMEM_BYTES =
    (2 + 2 * STAGES) * TILE_ELEMENTS * sizeof(bf16) + (2 * STAGES + 1) * 8 + 1024;

// ANCHOR: dq_kernel_tma
// The qkv map's coordinates are (column, row t, sequence b): q, k and v of
// head h at columns h*HS, C + h*HS, 2C + h*HS; dout's at h*HS.
template <bool OVERLAP>
__global__ void __launch_bounds__(GROUP, 3)
    flash_attention_backward_dq_tma_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                           const __grid_constant__ CUtensorMap dout_map,
                                           bf16 *dqkv, float *delta, const bf16 *dout,
                                           const bf16 *out, const float *lse, int B, int T,
                                           int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    const DqSmem sm = dq_smem(smem_raw);
    const BlockPlace at = block_place(B, T, NH, group_heads);
    const bf16 *dout_head = head_of(dout, at, T, at.C, 0), *out_head = head_of(out, at, T, at.C, 0);
    const int queries = (T + ROWS - 1) / ROWS;
    const int q0 = (queries - 1 - at.tile) * ROWS, tiles = (min(q0 + ROWS, T) - 1) / ROWS + 1;
    const int warp = threadIdx.x / WARP_SIZE, g = threadIdx.x % WARP_SIZE / 4;
    const int row0 = q0 + warp * 16;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;
    const int kcol = at.C + at.h * HS, vcol = 2 * at.C + at.h * HS;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbarrier_init(&sm.full[s], 1);
            mbarrier_init(&sm.empty[s], GROUP);
        }
        mbarrier_init(sm.qdo_full, 1);
        mbarrier_init_fence();
    }
    __syncthreads();  // the last block-wide barrier: from here on, mbarriers only
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(sm.qdo_full, 2 * TILE_BYTES);
        tma_load_3d(sm.q, &qkv_map, at.h * HS, q0, at.b, sm.qdo_full);
        tma_load_3d(sm.dout, &dout_map, at.h * HS, q0, at.b, sm.qdo_full);
        mbarrier_arrive_expect_tx(&sm.full[0], 2 * TILE_BYTES);
        tma_load_3d(sm.k, &qkv_map, kcol, 0, at.b, &sm.full[0]);
        tma_load_3d(sm.v, &qkv_map, vcol, 0, at.b, &sm.full[0]);
    }
    float row_lse[2], row_delta[2];  // rows g and g + 8 of the warp's 16
    own_query_row_delta(row_delta, delta + (size_t)at.bh * T, dout_head, out_head, at.C, row0, T);
    load_query_row_lse(row_lse, lse + (size_t)at.bh * T, row0 + g, T);
    float dq[1][HS / 8][4] = {};
    mbarrier_wait(sm.qdo_full, 0);

    // ANCHOR: dq_tma_loop
    for (int j = 0; j < tiles; j++) {
        const int stage = j % STAGES;
        if (threadIdx.x == 0 && j + 1 < tiles) {
            const int next = (j + 1) % STAGES;
            wait_stage_empty(sm.empty, j + 1);
            mbarrier_arrive_expect_tx(&sm.full[next], 2 * TILE_BYTES);
            tma_load_3d(sm.k + next * TILE_ELEMENTS, &qkv_map, kcol, (j + 1) * ROWS, at.b,
                        &sm.full[next]);
            tma_load_3d(sm.v + next * TILE_ELEMENTS, &qkv_map, vcol, (j + 1) * ROWS, at.b,
                        &sm.full[next]);
        }
        mbarrier_wait(&sm.full[stage], use_parity(j));
        dq_step<OVERLAP>(dq, sm.q, sm.dout, sm.k + stage * TILE_ELEMENTS,
                         sm.v + stage * TILE_ELEMENTS, row_lse, row_delta, row0 + g, j * ROWS,
                         (j + 1) * ROWS > row0, scale_log2);
        mbarrier_arrive(&sm.empty[stage]);
    }
    // ANCHOR_END: dq_tma_loop
    // The warp's own 16 rows of Q, read by the warpgroup's products only,
    // all finished: they stage the output.
    store_warp_rows<HS, 1>(dqkv + (size_t)at.b * T * at.ld + at.h * HS, at.ld, row0, T, dq,
                           scale, sm.q, warp * 16);
}
// ANCHOR_END: dq_kernel_tma

// The dK/dV kernel's: K and V, STAGES of Q, of dO, of lse and of D, then the
// barriers.
struct DkdvSmem {
    bf16 *k, *v, *q, *dout;
    float *lse, *delta;
    uint64_t *full, *empty, *kv_full;
};

__device__ __forceinline__ DkdvSmem dkdv_smem(unsigned char *raw) {
    DkdvSmem sm;
    sm.k = aligned_smem(raw);
    sm.v = sm.k + TILE_ELEMENTS;
    sm.q = sm.v + TILE_ELEMENTS;
    sm.dout = sm.q + STAGES * TILE_ELEMENTS;
    sm.lse = reinterpret_cast<float *>(sm.dout + STAGES * TILE_ELEMENTS);
    sm.delta = sm.lse + STAGES * ROWS;
    sm.full = reinterpret_cast<uint64_t *>(sm.delta + STAGES * ROWS);
    sm.empty = sm.full + STAGES;
    sm.kv_full = sm.empty + STAGES;
    return sm;
}
constexpr size_t DKDV_TMA_SMEM_BYTES = (2 + 2 * STAGES) * TILE_ELEMENTS * sizeof(bf16) +
                                       2 * STAGES * ROWS * sizeof(float) +
                                       (2 * STAGES + 1) * 8 + 1024;
static_assert((2 * STAGES * ROWS * sizeof(float)) % 8 == 0, "the barriers on 8 bytes");

// ANCHOR: dkdv_kernel_tma
// A tile's lse and D are 64 floats each, from rows of T floats that need not
// start on the 16 bytes a bulk copy wants: the warpgroup's first 64 threads
// copy one value of each, and those 64 arrivals, with the TMA's bytes, make
// the stage's "full" phase. Each thread reads its values for tile n + 1
// when step n starts and stores them when it ends, so that the loads'
// latency hides behind the step; before the stores it waits, as thread 0
// did before the TMA, for the stage's "empty" phase.
template <bool OVERLAP>
__global__ void __launch_bounds__(GROUP, 3)
    flash_attention_backward_dkdv_tma_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                             const __grid_constant__ CUtensorMap dout_map,
                                             bf16 *dqkv, const float *lse, const float *delta,
                                             int B, int T, int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    const DkdvSmem sm = dkdv_smem(smem_raw);
    const BlockPlace at = block_place(B, T, NH, group_heads);
    const int tiles = (T + ROWS - 1) / ROWS, k0 = at.tile * ROWS, first = at.tile;
    const float *lse_row = lse + (size_t)at.bh * T, *delta_row = delta + (size_t)at.bh * T;
    const int warp = threadIdx.x / WARP_SIZE, g = threadIdx.x % WARP_SIZE / 4;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;
    const int qcol = at.h * HS;
    const bool copies_stats = threadIdx.x < ROWS;  // thread r copies row r of lse and D

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbarrier_init(&sm.full[s], ROWS);
            mbarrier_init(&sm.empty[s], GROUP);
        }
        mbarrier_init(sm.kv_full, 1);
        mbarrier_init_fence();
    }
    __syncthreads();  // the last block-wide barrier: from here on, mbarriers only
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(sm.kv_full, 2 * TILE_BYTES);
        tma_load_3d(sm.k, &qkv_map, at.C + qcol, k0, at.b, sm.kv_full);
        tma_load_3d(sm.v, &qkv_map, 2 * at.C + qcol, k0, at.b, sm.kv_full);
        mbarrier_expect_tx(&sm.full[0], 2 * TILE_BYTES);
        tma_load_3d(sm.q, &qkv_map, qcol, first * ROWS, at.b, &sm.full[0]);
        tma_load_3d(sm.dout, &dout_map, qcol, first * ROWS, at.b, &sm.full[0]);
    }
    if (copies_stats) {
        const int t = first * ROWS + threadIdx.x;
        sm.lse[threadIdx.x] = t < T ? lse_row[t] : 0.0f;
        sm.delta[threadIdx.x] = t < T ? delta_row[t] : 0.0f;
        mbarrier_arrive(&sm.full[0]);
    }
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};
    mbarrier_wait(sm.kv_full, 0);

    for (int i = first; i < tiles; i++) {
        const int n = i - first, stage = n % STAGES, next = (n + 1) % STAGES, q0 = i * ROWS;
        const bool more = i + 1 < tiles;
        if (threadIdx.x == 0 && more) {
            wait_stage_empty(sm.empty, n + 1);
            mbarrier_expect_tx(&sm.full[next], 2 * TILE_BYTES);
            tma_load_3d(sm.q + next * TILE_ELEMENTS, &qkv_map, qcol, q0 + ROWS, at.b,
                        &sm.full[next]);
            tma_load_3d(sm.dout + next * TILE_ELEMENTS, &dout_map, qcol, q0 + ROWS, at.b,
                        &sm.full[next]);
        }
        float next_lse = 0.0f, next_delta = 0.0f;
        if (copies_stats && more && q0 + ROWS + (int)threadIdx.x < T) {
            next_lse = lse_row[q0 + ROWS + threadIdx.x];
            next_delta = delta_row[q0 + ROWS + threadIdx.x];
        }
        mbarrier_wait(&sm.full[stage], use_parity(n));
        dkdv_step<OVERLAP>(dk, dv, sm.k, sm.v, sm.q + stage * TILE_ELEMENTS,
                           sm.dout + stage * TILE_ELEMENTS, sm.lse + stage * ROWS,
                           sm.delta + stage * ROWS, k0 + warp * 16 + g, q0, T,
                           q0 < k0 + ROWS || q0 + ROWS > T, scale_log2);
        mbarrier_arrive(&sm.empty[stage]);
        if (copies_stats && more) {
            wait_stage_empty(sm.empty, n + 1);
            sm.lse[next * ROWS + threadIdx.x] = next_lse;
            sm.delta[next * ROWS + threadIdx.x] = next_delta;
            mbarrier_arrive(&sm.full[next]);
        }
    }
    bf16 *dqkv_seq = dqkv + (size_t)at.b * T * at.ld + at.h * HS;
    store_warp_rows<HS, 1>(dqkv_seq + at.C, at.ld, k0 + warp * 16, T, dk, scale, sm.k,
                           warp * 16);
    store_warp_rows<HS, 1>(dqkv_seq + 2 * at.C, at.ld, k0 + warp * 16, T, dv, 1.0f, sm.v,
                           warp * 16);
}
// ANCHOR_END: dkdv_kernel_tma

}  // namespace

// ---- launchers ------------------------------------------------------------------------
constexpr size_t SPLIT_DQ_SMEM_BYTES = (2 + 2 * STAGES) * TILE_ELEMENTS * sizeof(bf16) + 1024;
constexpr size_t SPLIT_DKDV_SMEM_BYTES = (2 + 2 * STAGES) * TILE_ELEMENTS * sizeof(bf16) +
                                         2 * STAGES * ROWS * sizeof(float) + 1024;

// ANCHOR: split_launcher
// dQ first, writing D; then dK and dV, reading it. Both grids in groups of
// heads, the heaviest tiles of a group first.
template <bool OVERLAP, bool TMA>
static void launch_split_backward(const GpuContext *ctx, bf16 *dqkv, float *delta,
                                  const bf16 *dout, const bf16 *out, const bf16 *qkv,
                                  const float *lse, int B, int T, int C, int NH) {
    const dim3 grid = grid_for(ATTENTION_HEAD_GROUPS, B * NH, (T + ROWS - 1) / ROWS);
    const int group_heads = heads_per_group(T);
    if (TMA) {
        const CUtensorMap qkv_map = attention_tile_map(qkv, B, T, 3 * C, 3 * C,
                                                       "attention backward (qkv)");
        const CUtensorMap dout_map = attention_tile_map(dout, B, T, C, C,
                                                        "attention backward (dout)");
        auto dq = flash_attention_backward_dq_tma_kernel<OVERLAP>;
        allow_shared_memory(dq, DQ_TMA_SMEM_BYTES);
        dq<<<grid, GROUP, DQ_TMA_SMEM_BYTES, ctx->stream>>>(qkv_map, dout_map, dqkv, delta, dout,
                                                            out, lse, B, T, NH, group_heads);
        gpu_check_launch(ctx, "flash_attention_backward_dq_tma_kernel");
        auto dkdv = flash_attention_backward_dkdv_tma_kernel<OVERLAP>;
        allow_shared_memory(dkdv, DKDV_TMA_SMEM_BYTES);
        dkdv<<<grid, GROUP, DKDV_TMA_SMEM_BYTES, ctx->stream>>>(qkv_map, dout_map, dqkv, lse,
                                                                delta, B, T, NH, group_heads);
        gpu_check_launch(ctx, "flash_attention_backward_dkdv_tma_kernel");
        return;
    }
    auto dq = flash_attention_backward_dq_delta_kernel<OVERLAP>;
    allow_shared_memory(dq, SPLIT_DQ_SMEM_BYTES);
    dq<<<grid, GROUP, SPLIT_DQ_SMEM_BYTES, ctx->stream>>>(dqkv, delta, dout, out, qkv, lse, B, T,
                                                          NH, group_heads);
    gpu_check_launch(ctx, "flash_attention_backward_dq_delta_kernel");
    auto dkdv = flash_attention_backward_dkdv_split_kernel<OVERLAP>;
    allow_shared_memory(dkdv, SPLIT_DKDV_SMEM_BYTES);
    dkdv<<<grid, GROUP, SPLIT_DKDV_SMEM_BYTES, ctx->stream>>>(dqkv, dout, qkv, lse, delta, B, T,
                                                              NH, group_heads);
    gpu_check_launch(ctx, "flash_attention_backward_dkdv_split_kernel");
}
// ANCHOR_END: split_launcher

extern "C" void attention_backward_split_variant(const GpuContext *ctx, int variant,
                                                 floatX *dqkv, float *scratch,
                                                 const floatX *dout, const floatX *out,
                                                 const floatX *qkv, const float *lse, int B,
                                                 int T, int C, int NH) {
    check_head_size("attention_backward_split", C, NH);
    if (B * NH > 65535) die("attention_backward_split: B*NH = %d past the grid's 65535", B * NH);
    float *delta = scratch;  // (B, NH, T): v2's scratch
    switch (variant) {
    case 5: launch_split_backward<false, false>(ctx, dqkv, delta, dout, out, qkv, lse, B, T, C, NH); break;
    case 6: launch_split_backward<true, false>(ctx, dqkv, delta, dout, out, qkv, lse, B, T, C, NH); break;
    case 7: launch_split_backward<false, true>(ctx, dqkv, delta, dout, out, qkv, lse, B, T, C, NH); break;
    case 8: launch_split_backward<true, true>(ctx, dqkv, delta, dout, out, qkv, lse, B, T, C, NH); break;
    default: die("attention_backward_split_variant: variant %d, not 5..8", variant);
    }
}

#else  // the fp32 build, or a build for a GPU other than compute capability 9.0

extern "C" void attention_backward_split_variant(const GpuContext *ctx, int variant,
                                                 floatX *dqkv, float *scratch,
                                                 const floatX *dout, const floatX *out,
                                                 const floatX *qkv, const float *lse, int B,
                                                 int T, int C, int NH) {
    (void)ctx, (void)variant, (void)dqkv, (void)scratch, (void)dout, (void)out, (void)qkv;
    (void)lse, (void)B, (void)T, (void)C, (void)NH;
    die("attention_backward_split: the wgmma and TMA kernels run on compute capability 9.0 "
        "only (H100, H200), in the bf16 build made with GPU_ARCH=90");
}

#endif
