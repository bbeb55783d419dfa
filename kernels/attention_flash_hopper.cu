// attention_flash_hopper.cu: see attention_flash.h. Chapter 05's flash
// attention on Hopper's warpgroup products (wgmma.cuh), for heads of 64:
// the algorithm of attention_flash.cu, tile for tile and sum for sum, with
// its products issued by warpgroups of 4 warps instead of by single warps.
//
// What changes against attention_flash.cu:
//   - a warpgroup owns 64 rows of a tile (a warp of it, 16 of them), and one
//     wgmma multiplies them by a whole 64-row tile: 16 columns of K at a
//     time (Q K^T), or 16 rows of V (P V);
//   - the right factor, and the left one when it is a tile (Q, K, V, dO),
//     is read by the tensor cores from shared memory; no ldmatrix. The tiles
//     are stored exactly as before: their swizzle is the one wgmma reads;
//   - P and dS go from the accumulators to the next product in registers,
//     as with mma.sync: a warp's 16 rows, in mma.sync's A layout;
//   - before the tensor cores read a tile the threads copied in, each
//     thread fences its copies to the tensor cores' path (fence_proxy_async).
// The two products are attention_wgmma.cuh's (chapter 12's kernels use them
// too); the online softmax, the masks, D, and the stores attention_tiles.cuh's.
// Built for sm_90a (Makefile, GPU_ARCH=90, which defines WITH_WGMMA): code
// that runs on the H100 and H200 only. Other builds get launchers that say so.
#include <math.h>

#include "attention_flash.h"
#include "util/util.h"

#if defined(PRECISION_BF16) && defined(WITH_WGMMA)
#include "attention_wgmma.cuh"

namespace {

// Three stages of the tiles a block walks over: the next tile is copied into
// one while the threads use another, and the third is the one the slowest
// warpgroup may still be reading, so that one barrier per tile is enough.
constexpr int STAGES = 3;
// The forward pass: two warpgroups, 128 queries, share each tile of keys.
constexpr int FWD_GROUPS = 2, FWD_THREADS = FWD_GROUPS * GROUP, FWD_QUERIES = FWD_GROUPS * ROWS;

// The tiles copied in by this thread are complete and visible to the tensor
// cores of every warpgroup: wait for the copies, fence them, then a barrier.
// Past the barrier, every thread has also finished with the tile before the
// last, whose stage the next copy reuses.
__device__ __forceinline__ void tiles_ready() {
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
}

// ---- the forward pass ---------------------------------------------------------------
// ANCHOR: forward_kernel_wgmma
template <AttentionBlockOrder ORDER>
__global__ void __launch_bounds__(FWD_THREADS, 2)
    flash_attention_forward_wgmma_kernel(bf16 *out, float *lse, const bf16 *qkv, int B, int T,
                                         int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    bf16 *sq = aligned_smem(smem_raw);             // FWD_QUERIES x HS
    bf16 *sk = sq + FWD_QUERIES * HS;              // STAGES stages of ROWS x HS
    bf16 *sv = sk + STAGES * TILE_ELEMENTS;        // STAGES stages of ROWS x HS

    const int queries = (T + FWD_QUERIES - 1) / FWD_QUERIES;  // tiles of queries
    const TilePlace at = tile_place<ORDER>(queries, B * NH, group_heads);
    const int C = NH * HS, ld = 3 * C, bh = at.bh, b = bh / NH, h = bh % NH;
    const int q0 = (queries - 1 - at.tile) * FWD_QUERIES;
    const bf16 *q = qkv + (size_t)b * T * ld + h * HS, *k = q + C, *v = q + 2 * C;
    const int group = threadIdx.x / GROUP, warp = threadIdx.x % GROUP / WARP_SIZE;
    const int group_row0 = group * ROWS;         // the warpgroup's first row in the Q tile
    const int row0 = q0 + group_row0 + warp * 16;  // the warp's first query
    const float scale_log2 = LOG2E / sqrtf((float)HS);
    const int tiles = (min(q0 + FWD_QUERIES, T) - 1) / ROWS + 1;

    load_tile<FWD_QUERIES, HS, FWD_THREADS>(sq, q, ld, q0, T);
    load_tile<ROWS, HS, FWD_THREADS>(sk, k, ld, 0, T);
    load_tile<ROWS, HS, FWD_THREADS>(sv, v, ld, 0, T);
    cp_async_commit();

    float o[1][HS / 8][4] = {}, m[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {};
    for (int j = 0; j < tiles; j++) {
        const int stage = j % STAGES, next = (j + 1) % STAGES;
        if (j + 1 < tiles) {
            const int k0 = (j + 1) * ROWS;
            load_tile<ROWS, HS, FWD_THREADS>(sk + next * TILE_ELEMENTS, k, ld, k0, T);
            load_tile<ROWS, HS, FWD_THREADS>(sv + next * TILE_ELEMENTS, v, ld, k0, T);
        }
        cp_async_commit();
        tiles_ready();
        // Every warpgroup takes every tile, even one whose keys all come after
        // its rows (the last, for the first warpgroup): wgmma must not sit in
        // a branch that differs between warpgroups, or the compiler
        // serializes the products. The mask makes such a tile's
        // probabilities 0.
        float s[1][ROWS / 8][4];
        wg_mma_with_rows(s[0], sq + group_row0 * HS, sk + stage * TILE_ELEMENTS);  // S = Q K^T
        wgmma_commit();
        wgmma_wait<0>();
        const bool mask = (j + 1) * ROWS > row0;
        online_softmax<HS, 1, ROWS>(s, m, l, o, row0, j * ROWS, mask, scale_log2);
        wg_mma_with_probs(o[0], s[0], sv + stage * TILE_ELEMENTS);  // O += P V
        wgmma_commit();
        wgmma_wait<0>();
    }

    finish_rows(o, m, l, lse + (size_t)bh * T, row0, T);
    store_warp_rows<HS, 1>(out + (size_t)b * T * C + h * HS, C, row0, T, o, 1.0f, sq,
                           group_row0 + warp * 16);
}
// ANCHOR_END: forward_kernel_wgmma

// ---- the backward pass --------------------------------------------------------------
// ANCHOR: dkdv_kernel_wgmma
// dK and dV of a tile of 64 keys, one warpgroup: as
// flash_attention_backward_dkdv_kernel, the four products by wgmma.
template <AttentionBlockOrder ORDER>
__global__ void __launch_bounds__(GROUP, 3)
    flash_attention_backward_dkdv_wgmma_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                               const float *lse, const float *delta, int B,
                                               int T, int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    bf16 *sk = aligned_smem(smem_raw), *sv = sk + TILE_ELEMENTS;  // ROWS x HS each
    bf16 *sq = sv + TILE_ELEMENTS, *sdo = sq + STAGES * TILE_ELEMENTS;  // STAGES of ROWS x HS each
    float *slse = reinterpret_cast<float *>(sdo + STAGES * TILE_ELEMENTS);
    float *sdelta = slse + STAGES * ROWS;

    const int tiles = (T + ROWS - 1) / ROWS;
    const TilePlace at = tile_place<ORDER>(tiles, B * NH, group_heads);
    const int C = NH * HS, ld = 3 * C, bh = at.bh, b = bh / NH, h = bh % NH;
    const int k0 = at.tile * ROWS, first = at.tile;
    const bf16 *q = qkv + (size_t)b * T * ld + h * HS, *k = q + C, *v = q + 2 * C;
    const bf16 *dout_head = dout + (size_t)b * T * C + h * HS;
    const float *lse_row = lse + (size_t)bh * T, *delta_row = delta + (size_t)bh * T;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int g = lane / 4;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;

    load_tile<ROWS, HS, GROUP>(sk, k, ld, k0, T);
    load_tile<ROWS, HS, GROUP>(sv, v, ld, k0, T);
    load_tile<ROWS, HS, GROUP>(sq, q, ld, first * ROWS, T);
    load_tile<ROWS, HS, GROUP>(sdo, dout_head, C, first * ROWS, T);
    load_row_stats<ROWS>(slse, lse_row, first * ROWS, T);
    load_row_stats<ROWS>(sdelta, delta_row, first * ROWS, T);
    cp_async_commit();
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};

    for (int i = first; i < tiles; i++) {
        const int stage = (i - first) % STAGES, next = (i - first + 1) % STAGES, q0 = i * ROWS;
        if (i + 1 < tiles) {
            load_tile<ROWS, HS, GROUP>(sq + next * TILE_ELEMENTS, q, ld, q0 + ROWS, T);
            load_tile<ROWS, HS, GROUP>(sdo + next * TILE_ELEMENTS, dout_head, C, q0 + ROWS, T);
            load_row_stats<ROWS>(slse + next * ROWS, lse_row, q0 + ROWS, T);
            load_row_stats<ROWS>(sdelta + next * ROWS, delta_row, q0 + ROWS, T);
        }
        cp_async_commit();
        tiles_ready();
        const bf16 *tq = sq + stage * TILE_ELEMENTS, *tdo = sdo + stage * TILE_ELEMENTS;
        const float *tlse = slse + stage * ROWS, *tdelta = sdelta + stage * ROWS;
        float pt[1][ROWS / 8][4], dst[1][ROWS / 8][4];
        wg_mma_with_rows(pt[0], sk, tq);    // S^T = K Q^T
        wg_mma_with_rows(dst[0], sv, tdo);  // dP^T = V dO^T
        wgmma_commit();
        wgmma_wait<0>();
        const bool mask = q0 < k0 + ROWS || q0 + ROWS > T;
        ds_by_key_rows<ROWS>(pt, dst, tlse, tdelta, k0 + warp * 16 + g, q0, T, mask, scale_log2);
        wg_mma_with_probs(dv[0], pt[0], tdo);  // dV += P^T dO
        wg_mma_with_probs(dk[0], dst[0], tq);  // dK += dS^T Q
        wgmma_commit();
        wgmma_wait<0>();
    }
    bf16 *dqkv_seq = dqkv + (size_t)b * T * ld + h * HS;
    store_warp_rows<HS, 1>(dqkv_seq + C, ld, k0 + warp * 16, T, dk, scale, sk, warp * 16);
    store_warp_rows<HS, 1>(dqkv_seq + 2 * C, ld, k0 + warp * 16, T, dv, 1.0f, sv, warp * 16);
}
// ANCHOR_END: dkdv_kernel_wgmma

// ANCHOR: dq_kernel_wgmma
// dQ of a tile of 64 queries, one warpgroup: as
// flash_attention_backward_dq_kernel, the three products by wgmma.
template <AttentionBlockOrder ORDER>
__global__ void __launch_bounds__(GROUP, 3)
    flash_attention_backward_dq_wgmma_kernel(bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                                             const float *lse, const float *delta, int B, int T,
                                             int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    bf16 *sq = aligned_smem(smem_raw), *sdo = sq + TILE_ELEMENTS;   // ROWS x HS each
    bf16 *sk = sdo + TILE_ELEMENTS, *sv = sk + STAGES * TILE_ELEMENTS;  // STAGES of ROWS x HS each

    const int queries = (T + ROWS - 1) / ROWS;
    const TilePlace at = tile_place<ORDER>(queries, B * NH, group_heads);
    const int C = NH * HS, ld = 3 * C, bh = at.bh, b = bh / NH, h = bh % NH;
    const int q0 = (queries - 1 - at.tile) * ROWS, tiles = (min(q0 + ROWS, T) - 1) / ROWS + 1;
    const bf16 *q = qkv + (size_t)b * T * ld + h * HS, *k = q + C, *v = q + 2 * C;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int g = lane / 4, row0 = q0 + warp * 16;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;

    load_tile<ROWS, HS, GROUP>(sq, q, ld, q0, T);
    load_tile<ROWS, HS, GROUP>(sdo, dout + (size_t)b * T * C + h * HS, C, q0, T);
    load_tile<ROWS, HS, GROUP>(sk, k, ld, 0, T);
    load_tile<ROWS, HS, GROUP>(sv, v, ld, 0, T);
    cp_async_commit();
    float row_lse[2], row_delta[2];  // rows g and g + 8 of the warp's 16
    load_query_row_stats(row_lse, row_delta, lse + (size_t)bh * T, delta + (size_t)bh * T,
                         row0 + g, T);
    float dq[1][HS / 8][4] = {};

    for (int j = 0; j < tiles; j++) {
        const int stage = j % STAGES, next = (j + 1) % STAGES;
        if (j + 1 < tiles) {
            load_tile<ROWS, HS, GROUP>(sk + next * TILE_ELEMENTS, k, ld, (j + 1) * ROWS, T);
            load_tile<ROWS, HS, GROUP>(sv + next * TILE_ELEMENTS, v, ld, (j + 1) * ROWS, T);
        }
        cp_async_commit();
        tiles_ready();
        const bf16 *tk = sk + stage * TILE_ELEMENTS, *tv = sv + stage * TILE_ELEMENTS;
        float s[1][ROWS / 8][4], dp[1][ROWS / 8][4];
        wg_mma_with_rows(s[0], sq, tk);    // S = Q K^T
        wg_mma_with_rows(dp[0], sdo, tv);  // dP = dO V^T
        wgmma_commit();
        wgmma_wait<0>();
        const bool mask = (j + 1) * ROWS > row0;
        ds_by_query_rows<ROWS>(s, dp, row_lse, row_delta, row0 + g, j * ROWS, mask, scale_log2);
        wg_mma_with_probs(dq[0], s[0], tk);  // dQ += dS K
        wgmma_commit();
        wgmma_wait<0>();
    }
    store_warp_rows<HS, 1>(dqkv + (size_t)b * T * ld + h * HS, ld, row0, T, dq, scale, sq,
                           warp * 16);
}
// ANCHOR_END: dq_kernel_wgmma

// ---- launchers ----------------------------------------------------------------------
}  // namespace

template <AttentionBlockOrder ORDER>
static void forward_v3(const GpuContext *ctx, floatX *out, float *lse, const floatX *qkv, int B,
                       int T, int C, int NH) {
    check_head_size("attention_forward_v3", C, NH);
    const size_t smem = (FWD_QUERIES + 2 * STAGES * ROWS) * HS * sizeof(bf16) + 1024;
    auto kernel = flash_attention_forward_wgmma_kernel<ORDER>;
    allow_shared_memory(kernel, smem);
    const dim3 grid = grid_for(ORDER, B * NH, (T + FWD_QUERIES - 1) / FWD_QUERIES);
    kernel<<<grid, FWD_THREADS, smem, ctx->stream>>>(out, lse, qkv, B, T, NH,
                                                     heads_per_group(T));
    gpu_check_launch(ctx, "flash_attention_forward_wgmma_kernel");
}

template <AttentionBlockOrder ORDER>
static void backward_v3(const GpuContext *ctx, floatX *dqkv, float *scratch, const floatX *dout,
                        const floatX *out, const floatX *qkv, const float *lse, int B, int T,
                        int C, int NH) {
    check_head_size("attention_backward_v3", C, NH);
    float *delta = scratch;
    flash_attention_delta_kernel<HS><<<(B * T + DELTA_WARPS - 1) / DELTA_WARPS,
                                       DELTA_WARPS * WARP_SIZE, 0, ctx->stream>>>(delta, dout,
                                                                                  out, B * T, T,
                                                                                  NH);
    gpu_check_launch(ctx, "flash_attention_delta_kernel");
    const dim3 grid = grid_for(ORDER, B * NH, (T + ROWS - 1) / ROWS);
    const int group_heads = heads_per_group(T);
    const size_t dkdv_smem = (2 + 2 * STAGES) * TILE_ELEMENTS * sizeof(bf16) +
                             2 * STAGES * ROWS * sizeof(float) + 1024;
    auto dkdv = flash_attention_backward_dkdv_wgmma_kernel<ORDER>;
    allow_shared_memory(dkdv, dkdv_smem);
    dkdv<<<grid, GROUP, dkdv_smem, ctx->stream>>>(dqkv, dout, qkv, lse, delta, B, T, NH,
                                                  group_heads);
    gpu_check_launch(ctx, "flash_attention_backward_dkdv_wgmma_kernel");
    const size_t dq_smem = (2 + 2 * STAGES) * TILE_ELEMENTS * sizeof(bf16) + 1024;
    auto dq = flash_attention_backward_dq_wgmma_kernel<ORDER>;
    allow_shared_memory(dq, dq_smem);
    dq<<<grid, GROUP, dq_smem, ctx->stream>>>(dqkv, dout, qkv, lse, delta, B, T, NH,
                                              group_heads);
    gpu_check_launch(ctx, "flash_attention_backward_dq_wgmma_kernel");
}

extern "C" void attention_forward_v3_ordered(const GpuContext *ctx, AttentionBlockOrder order,
                                             floatX *out, float *lse, const floatX *qkv, int B,
                                             int T, int C, int NH) {
    switch (order) {
    case ATTENTION_BY_HEAD: forward_v3<ATTENTION_BY_HEAD>(ctx, out, lse, qkv, B, T, C, NH); break;
    case ATTENTION_HEAD_GROUPS:
        forward_v3<ATTENTION_HEAD_GROUPS>(ctx, out, lse, qkv, B, T, C, NH);
        break;
    default: forward_v3<ATTENTION_HEAD_FASTEST>(ctx, out, lse, qkv, B, T, C, NH);
    }
}

extern "C" void attention_backward_v3_ordered(const GpuContext *ctx, AttentionBlockOrder order,
                                              floatX *dqkv, float *scratch, const floatX *dout,
                                              const floatX *out, const floatX *qkv,
                                              const float *lse, int B, int T, int C, int NH) {
    switch (order) {
    case ATTENTION_BY_HEAD:
        backward_v3<ATTENTION_BY_HEAD>(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
        break;
    case ATTENTION_HEAD_GROUPS:
        backward_v3<ATTENTION_HEAD_GROUPS>(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
        break;
    default:
        backward_v3<ATTENTION_HEAD_FASTEST>(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
    }
}

#else  // the fp32 build, or a build for a GPU other than compute capability 9.0

// Why there are no wgmma kernels in this build.
static const char *without_wgmma(void) {
#ifndef PRECISION_BF16
    return "flash attention runs on bf16 tensor cores: the bf16 build's (chapter 05, "
           "--flash-attention)";
#else
    return "the wgmma kernels run on compute capability 9.0 only (H100, H200), and this "
           "build is for another GPU (make GPU_ARCH=90 builds them; attention_forward_v2 "
           "runs everywhere)";
#endif
}

extern "C" void attention_forward_v3_ordered(const GpuContext *ctx, AttentionBlockOrder order,
                                             floatX *out, float *lse, const floatX *qkv, int B,
                                             int T, int C, int NH) {
    (void)ctx, (void)order, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)C, (void)NH;
    die("attention_forward_v3: %s", without_wgmma());
}

extern "C" void attention_backward_v3_ordered(const GpuContext *ctx, AttentionBlockOrder order,
                                              floatX *dqkv, float *scratch, const floatX *dout,
                                              const floatX *out, const floatX *qkv,
                                              const float *lse, int B, int T, int C, int NH) {
    (void)ctx, (void)order, (void)dqkv, (void)scratch, (void)dout, (void)out, (void)qkv;
    (void)lse, (void)B, (void)T, (void)C, (void)NH;
    die("attention_backward_v3: %s", without_wgmma());
}

#endif

// ---- v3: the model's order (chapter 05) ---------------------------------------------
extern "C" void attention_forward_v3(const GpuContext *ctx, floatX *out, float *lse,
                                     const floatX *qkv, int B, int T, int C, int NH) {
    attention_forward_v3_ordered(ctx, ATTENTION_HEAD_FASTEST, out, lse, qkv, B, T, C, NH);
}

extern "C" void attention_backward_v3(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                      const floatX *dout, const floatX *out, const floatX *qkv,
                                      const float *lse, int B, int T, int C, int NH) {
    attention_backward_v3_ordered(ctx, ATTENTION_HEAD_FASTEST, dqkv, scratch, dout, out, qkv,
                                  lse, B, T, C, NH);
}
