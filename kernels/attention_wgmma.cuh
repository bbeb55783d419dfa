// attention_wgmma.cuh: what chapter 05's wgmma attention
// (attention_flash_hopper.cu, v3) and chapter 12's (attention_flash_ws.cu,
// v4) share: heads of 64 in tiles of 64 rows, a warpgroup's two kinds of
// product over them, and the check of the head size. For .cu files of the
// bf16 build compiled for sm_90a (WITH_WGMMA).
#ifndef ATTENTION_WGMMA_CUH
#define ATTENTION_WGMMA_CUH

#include "attention_flash.h"  // AttentionBlockOrder
#include "attention_tiles.cuh"
#include "util/util.h"
#include "wgmma.cuh"

namespace {

constexpr int HS = 64, GROUP = 128, ROWS = 64;  // a warpgroup: 128 threads, 64 rows
constexpr int TILE_ELEMENTS = ROWS * HS;         // one tile of 64 rows: 8 KB
constexpr uint32_t TILE_BYTES = TILE_ELEMENTS * sizeof(bf16);
// Dynamic shared memory, rounded up to the 1024 bytes the swizzle needs.
__device__ __forceinline__ bf16 *aligned_smem(unsigned char *raw) {
    return reinterpret_cast<bf16 *>(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
}

// ---- a warpgroup's two kinds of product --------------------------------------------
// ANCHOR: warpgroup_products
// acc (64 x 8NT) = a @ b^T, a a tile of 64 rows of HS = 64 and b one of
// 8NT rows (64, or chapter 12's 128 keys): their rows are the product's rows
// and columns, their columns the sum (K-major both): the scores S = Q K^T,
// and dP = dO V^T. Four steps of 16 columns, issued, not waited for: the
// caller commits the group and waits.
template <int NT>
__device__ __forceinline__ void wg_mma_with_rows(float (&acc)[NT][4], const bf16 *a,
                                                 const bf16 *b) {
    static_assert(NT == 8 || NT == 16, "products of 64 or 128 columns");
    const uint64_t da = smem_descriptor(a), db = smem_descriptor(b);
    wgmma_fence();
    if constexpr (NT == 8) wgmma_64x64_smem_first(acc, da, db);
    else wgmma_64x128_smem_first(acc, da, db);
#pragma unroll
    for (int kk = 1; kk < HS / 16; kk++) {
        if constexpr (NT == 8) wgmma_64x64_smem(acc, da + DESC_K_STEP * kk, db + DESC_K_STEP * kk);
        else wgmma_64x128_smem(acc, da + DESC_K_STEP * kk, db + DESC_K_STEP * kk);
    }
}

// acc (64x64) += P @ tile, P (64 x 8NT) in fp32 accumulators, the tile 8NT
// rows of HS = 64 (MN-major): O += P V, dV += P^T dO, dK += dS^T Q, dQ += dS
// K. P is rounded to bf16 A fragments first, all the steps' (the fence then
// tells the tensor cores that the registers are ready), then the NT/2 steps
// of 16 rows of the tile are issued.
template <int NT>
__device__ __forceinline__ void wg_mma_with_probs(float (&acc)[8][4], const float (&p)[NT][4],
                                                  const bf16 *tile) {
    uint32_t a[NT / 2][4];
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        a[kk][0] = pack_bf16(p[2 * kk][0], p[2 * kk][1]);
        a[kk][1] = pack_bf16(p[2 * kk][2], p[2 * kk][3]);
        a[kk][2] = pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]);
        a[kk][3] = pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3]);
    }
    const uint64_t db = smem_descriptor(tile);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) wgmma_64x64_regs(acc, a[kk], db + DESC_MN_STEP * kk);
}
// ANCHOR_END: warpgroup_products


// The end of a forward pass for a warp's 16 rows from row0: o divided by
// each row's sum l (its quad's four parts added first), and each row's
// log-sum-exp, m + log2(l) back in natural units, into lse_row (one (b, h)
// row of lse) by the quad's first thread. Rows at or past T write nothing.
__device__ __forceinline__ void finish_rows(float (&o)[1][HS / 8][4], const float (&m)[1][2],
                                            const float (&l)[1][2], float *lse_row, int row0,
                                            int T) {
    const int lane = threadIdx.x % WARP_SIZE, g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        float sum = l[0][half];
        sum += __shfl_xor_sync(FULL_MASK, sum, 1);
        sum += __shfl_xor_sync(FULL_MASK, sum, 2);
        const float inv = 1.0f / sum;
#pragma unroll
        for (int nt = 0; nt < HS / 8; nt++) {
            o[0][nt][2 * half] *= inv;
            o[0][nt][2 * half + 1] *= inv;
        }
        const int t = row0 + g + 8 * half;
        if (t4 == 0 && t < T) lse_row[t] = (m[0][half] + log2f(sum)) * LN2;
    }
}

// ---- the order of the blocks (chapter 12) ------------------------------------------
// A kernel over (b, h, tile) has B*NH*tiles blocks, and the order in which
// the GPU starts them decides two things: which blocks share L2 (the
// blocks of one head read the same K and V, or Q and dO), and whether the
// heaviest blocks (a causal tile's work grows with its distance from the
// start) start first, so that the light ones fill the end of the run.
// The orders (AttentionBlockOrder, attention_flash.h):
//   ATTENTION_HEAD_FASTEST  chapter 05's grid (B*NH, tiles): one tile of
//       every head, heaviest first over the whole grid, but a head's tiles
//       far apart in time: each block reads its head from HBM.
//   ATTENTION_BY_HEAD  (tiles, B*NH): a head's tiles together, sharing L2,
//       but the heavy and the light tiles of the grid's last heads at the end.
//   ATTENTION_HEAD_GROUPS  groups of heads_per_group heads: inside a group
//       the tiles in order of weight, heaviest first, each tile of every head
//       of the group together. A group's tensors fit in L2, and the light
//       tiles of one group run beside the heavy ones of the next.

struct TilePlace {
    int bh, tile;  // tile 0 is the heaviest
};

// ANCHOR: block_order
// Item `item` of ATTENTION_HEAD_GROUPS' order (a block's index in its grid,
// or the piece a persistent block takes).
__device__ __forceinline__ TilePlace head_group_place(int item, int tiles, int heads,
                                                      int heads_per_group) {
    const int per_group = heads_per_group * tiles, group = item / per_group;
    const int rank = item % per_group;
    const int here = min(heads_per_group, heads - group * heads_per_group);
    return {group * heads_per_group + rank % here, rank / here};
}

// Where this block is, for a grid made by grid_for() below.
template <AttentionBlockOrder ORDER>
__device__ __forceinline__ TilePlace tile_place(int tiles, int heads, int heads_per_group) {
    if (ORDER == ATTENTION_HEAD_FASTEST) return {(int)blockIdx.x, (int)blockIdx.y};
    if (ORDER == ATTENTION_BY_HEAD) return {(int)blockIdx.y, (int)blockIdx.x};
    return head_group_place(blockIdx.x, tiles, heads, heads_per_group);
}
// ANCHOR_END: block_order

}  // namespace

// The grid of B*NH heads of `tiles` tiles in each order.
static inline dim3 grid_for(AttentionBlockOrder order, int heads, int tiles) {
    if (order == ATTENTION_HEAD_FASTEST) return dim3(heads, tiles);
    if (order == ATTENTION_BY_HEAD) return dim3(tiles, heads);
    return dim3(heads * tiles);
}

// Heads per group: 16 at T = 1024, so that a group's K and V (16 heads x
// 1024 rows x 64 x 2 tensors x 2 bytes = 4 MiB), or Q, dO, K and V in the
// backward pass, stay in L2 (50 MiB) beside everything else a step holds.
static inline int heads_per_group(int T) { return T >= 16384 ? 1 : 16384 / T; }

// The wgmma kernels' one head size, checked by every launcher.
static inline void check_head_size(const char *who, int C, int NH) {
    if (NH <= 0 || C % NH != 0 || C / NH != HS)
        die("%s: C=%d with NH=%d heads: the wgmma kernels are built for heads of %d", who, C, NH,
            HS);
}

#endif
