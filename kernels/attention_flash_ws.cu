// attention_flash_ws.cu: see attention_flash.h. Chapter 12's attention, v4,
// and the steps the kernel lab measures on the way to it (the header lists
// them). What each step changes against chapter 05's wgmma kernels (v3):
//
// The order of the blocks (attention_wgmma.cuh, steps 1 and 2): v3's grid
// runs one tile of every head at a time, so no two running blocks share
// their K and V, and at B = 64 the kernels stream them from HBM again for
// every tile. Ordered by head, a head's tiles run together and read them
// from L2. This is most of v4's backward pass: v3's two kernels, ordered.
//
// The forward pass, step 3 (v4's before chapter 12's tiles of 128 keys,
// steps 6 and 7 in attention_flash_wide.cu):
//   - the TMA (tma.cuh) copies every tile: one thread names a box, and the
//     copy engine moves it, swizzled, zero-filled past T, and counts its
//     bytes on an mbarrier;
//   - warp specialization: that thread is a warp of its own, the producer,
//     which runs ahead filling a ring of FWD_STAGES stages while the two
//     consumer warpgroups multiply; they wait on mbarriers, never at a
//     block-wide barrier;
//   - two blocks per SM, as v3 has: 96 registers a thread. (A block of 9
//     warps puts 5 of the SM's 18 on one of its four schedulers, and each
//     scheduler has 16384 registers.)
// Steps 4 and 5 go where FlashAttention-3 went, and at heads of 64 lose:
//   - intra-warpgroup overlap: S_j = Q K_j^T and O += P_{j-1} V_{j-1} issued
//     together, tile j's softmax computed while the second runs;
//   - ping-pong: the two warpgroups take turns at the tensor cores (named
//     barriers), one's softmax beside the other's products.
//   Both keep a second tile of scores in registers: 140 a thread, one block
//   per SM, half the warps to hide latency with.
// Every step's arithmetic is v3's, operation for operation (with the
// overlap, O's rescaling by tile j's factor still follows P_{j-1} V_{j-1}),
// so the forward pass gives v3's bits at every step.
//
// The backward pass, the fused variants (3 and 4): one kernel per 128 keys
// (two warpgroups of 64), each computing P^T and dS^T once, adding into dK
// and dV in registers, and writing dS^T to shared memory, from which one
// warpgroup multiplies dQ_i = dS K for the block's 128 keys and adds it into
// fp32 sums in global memory: in a fixed order (a counter per tile of
// queries says whose turn it is: the same bits on every run), or by atomics
// in any order. No recomputation of S and dP, but one block per SM and a
// wait per tile: slower than recomputing, as the lab shows.
#include <math.h>
#include <stdlib.h>

#include "attention_flash.h"
#include "util/util.h"

#if defined(PRECISION_BF16) && defined(WITH_WGMMA)
#include "attention_wgmma.cuh"
#include "gpu/tma_box.h"
#include "tensor_map.cuh"
#include "tma.cuh"

namespace {

// A block: `groups` consumer warpgroups that multiply, then one producer warp.
constexpr int block_threads(int groups) { return groups * GROUP + WARP_SIZE; }
// Named barrier ids (0 is __syncthreads'): the forward pass's warpgroups'
// turns (one each); the backward pass's "both dS tiles written", and each of
// its warpgroups' own.
constexpr int BAR_TURN = 1, BAR_DS_READY = 4, BAR_GROUP = 5;

// ---- the forward pass ---------------------------------------------------------------
constexpr int FWD_STAGES = 4;  // tiles of K and V in flight

struct ForwardSmem {
    bf16 *q, *k, *v;                  // groups x (ROWS x HS); FWD_STAGES x (ROWS x HS) each
    uint64_t *full, *empty, *q_full;  // FWD_STAGES, FWD_STAGES, 1
};

__device__ __forceinline__ ForwardSmem forward_smem(unsigned char *raw, int groups) {
    ForwardSmem sm;
    sm.q = aligned_smem(raw);
    sm.k = sm.q + groups * TILE_ELEMENTS;
    sm.v = sm.k + FWD_STAGES * TILE_ELEMENTS;
    sm.full = reinterpret_cast<uint64_t *>(sm.v + FWD_STAGES * TILE_ELEMENTS);
    sm.empty = sm.full + FWD_STAGES;
    sm.q_full = sm.empty + FWD_STAGES;
    return sm;
}
constexpr size_t forward_smem_bytes(int groups) {
    return (groups + 2 * FWD_STAGES) * TILE_ELEMENTS * sizeof(bf16) + (2 * FWD_STAGES + 1) * 8 +
           1024;
}

// ANCHOR: forward_producer
// The producer: one thread. Q once, then K and V tile by tile, each into the
// next stage of the ring once both warpgroups have released it. The map's
// coordinates are (column of qkv, row t, sequence b): q, k and v are the
// same map at columns h*HS, C + h*HS, 2C + h*HS.
__device__ __forceinline__ void produce_forward_tiles(const ForwardSmem &sm,
                                                      const CUtensorMap *qkv_map, int groups,
                                                      int b, int h, int C, int q0, int tiles) {
    mbarrier_arrive_expect_tx(sm.q_full, groups * TILE_BYTES);
    for (int g = 0; g < groups; g++)
        tma_load_3d(sm.q + g * TILE_ELEMENTS, qkv_map, h * HS, q0 + g * ROWS, b, sm.q_full);
    for (int j = 0; j < tiles; j++) {
        const int stage = j % FWD_STAGES;
        if (j >= FWD_STAGES) mbarrier_wait(&sm.empty[stage], (j / FWD_STAGES - 1) & 1);
        mbarrier_arrive_expect_tx(&sm.full[stage], 2 * TILE_BYTES);
        tma_load_3d(sm.k + stage * TILE_ELEMENTS, qkv_map, C + h * HS, j * ROWS, b,
                    &sm.full[stage]);
        tma_load_3d(sm.v + stage * TILE_ELEMENTS, qkv_map, 2 * C + h * HS, j * ROWS, b,
                    &sm.full[stage]);
    }
}
// ANCHOR_END: forward_producer

// A consumer thread is done with a stage. Every thread arrives (the empty
// barriers count all consumer threads): each arrival releases that thread's
// own reads of the stage to the producer, which overwrites it next.
__device__ __forceinline__ void release_stage(uint64_t *empty) { mbarrier_arrive(empty); }

// What one consumer warpgroup needs to know of its rows.
struct ForwardRows {
    const bf16 *q;   // the warpgroup's 64 rows of Q in shared memory
    int row0;        // the warp's first query
};

// Step 1: v3's loop, fed by the producer. Every warpgroup takes every tile,
// as in v3 (the mask makes a tile after its rows contribute 0).
__device__ __forceinline__ void consume_forward_serial(const ForwardSmem &sm, const ForwardRows &r, int tiles,
                                       float scale_log2, float (&o)[1][HS / 8][4],
                                       float (&m)[1][2], float (&l)[1][2]) {
    for (int j = 0; j < tiles; j++) {
        const int stage = j % FWD_STAGES;
        mbarrier_wait(&sm.full[stage], (j / FWD_STAGES) & 1);
        float s[1][ROWS / 8][4];
        wg_mma_with_rows(s[0], r.q, sm.k + stage * TILE_ELEMENTS);  // S = Q K^T
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(s[0]);
        online_softmax<HS, 1, ROWS>(s, m, l, o, r.row0, j * ROWS, (j + 1) * ROWS > r.row0,
                                    scale_log2);
        wg_mma_with_probs(o[0], s[0], sm.v + stage * TILE_ELEMENTS);  // O += P V
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(o[0]);
        release_stage(&sm.empty[stage]);
    }
}

// ANCHOR: forward_overlap
// Steps 2 and 3. Iteration j issues S_j = Q K_j^T and O += P_{j-1} V_{j-1}
// as one batch, waits for S_j only (wgmma_wait<1>: one group may still run),
// computes P_j and its row factors while P_{j-1} V_{j-1} runs, then waits for
// that and rescales O. With PINGPONG each batch of products is issued in the
// warpgroup's turn: it waits for its turn (BAR_TURN + group), issues, and
// hands the turn to the next warpgroup (round robin), which issues while
// this one computes its softmax. Every warpgroup issues tiles + 1 batches;
// the last does not hand on its last turn, which nobody would take.
template <int GROUPS, bool PINGPONG>
__device__ __forceinline__ void consume_forward_overlapped(const ForwardSmem &sm,
                                                           const ForwardRows &r, int group,
                                                           int tiles, float scale_log2,
                                                           float (&o)[1][HS / 8][4],
                                                           float (&m)[1][2], float (&l)[1][2]) {
    const int mine = BAR_TURN + group, next = BAR_TURN + (group + 1) % GROUPS;
    const int pair = 2 * GROUP;  // the warpgroup that waits and the one that hands over
    int batch = 0;
    auto take_turn = [&]() {
        if (PINGPONG) named_barrier_sync(mine, pair);
    };
    auto hand_over = [&]() {
        if (PINGPONG && !(group == GROUPS - 1 && batch == tiles)) named_barrier_arrive(next, pair);
        batch++;
    };
    if (PINGPONG && group == GROUPS - 1) named_barrier_arrive(next, pair);  // the first starts

    float p[1][ROWS / 8][4], rescale[1][2];
    mbarrier_wait(&sm.full[0], 0);
    take_turn();
    wg_mma_with_rows(p[0], r.q, sm.k);  // S_0
    wgmma_commit();
    hand_over();
    wgmma_wait<0>();
    wgmma_fence_operands(p[0]);
    online_softmax_probs<1, ROWS>(p, m, l, rescale, r.row0, 0, ROWS > r.row0, scale_log2);

    for (int j = 1; j < tiles; j++) {
        const int stage = j % FWD_STAGES, last = (j - 1) % FWD_STAGES;
        mbarrier_wait(&sm.full[stage], (j / FWD_STAGES) & 1);
        float s[1][ROWS / 8][4];
        take_turn();
        wg_mma_with_rows(s[0], r.q, sm.k + stage * TILE_ELEMENTS);  // S_j = Q K_j^T
        wgmma_commit();
        wg_mma_with_probs(o[0], p[0], sm.v + last * TILE_ELEMENTS);  // O += P_{j-1} V_{j-1}
        wgmma_commit();
        hand_over();
        wgmma_wait<1>();
        wgmma_fence_operands(s[0]);
        online_softmax_probs<1, ROWS>(s, m, l, rescale, r.row0, j * ROWS,
                                      (j + 1) * ROWS > r.row0, scale_log2);
        wgmma_wait<0>();
        wgmma_fence_operands(o[0]);
        release_stage(&sm.empty[last]);
        rescale_rows<HS, 1>(o, rescale);
#pragma unroll
        for (int nt = 0; nt < ROWS / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) p[0][nt][e] = s[0][nt][e];
    }
    const int last = (tiles - 1) % FWD_STAGES;
    take_turn();
    wg_mma_with_probs(o[0], p[0], sm.v + last * TILE_ELEMENTS);  // O += P_last V_last
    wgmma_commit();
    hand_over();
    wgmma_wait<0>();
    wgmma_fence_operands(o[0]);
    release_stage(&sm.empty[last]);
}
// ANCHOR_END: forward_overlap

// ANCHOR: forward_kernel_ws
// One block per GROUPS x 64 queries of one (b, h), the heaviest tiles of
// queries (the last, which see the most keys) first within each head; a
// head's blocks are neighbours in the grid, so the K and V they all read are
// read from HBM about once and then from L2.
template <int GROUPS, bool OVERLAP, bool PINGPONG, int BLOCKS_PER_SM, AttentionBlockOrder ORDER>
__global__ void __launch_bounds__(block_threads(GROUPS), BLOCKS_PER_SM)
    flash_attention_forward_ws_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16 *out,
                                      float *lse, int B, int T, int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    const ForwardSmem sm = forward_smem(smem_raw, GROUPS);
    const int queries = (T + GROUPS * ROWS - 1) / (GROUPS * ROWS);  // tiles of queries
    const TilePlace at = tile_place<ORDER>(queries, B * NH, group_heads);
    const int C = NH * HS, bh = at.bh, b = bh / NH, h = bh % NH;
    const int q0 = (queries - 1 - at.tile) * GROUPS * ROWS;
    const int tiles = (min(q0 + GROUPS * ROWS, T) - 1) / ROWS + 1;
    const int warp_id = threadIdx.x / WARP_SIZE;

    if (threadIdx.x == 0) {
        for (int s = 0; s < FWD_STAGES; s++) {
            mbarrier_init(&sm.full[s], 1);
            mbarrier_init(&sm.empty[s], GROUPS * GROUP);
        }
        mbarrier_init(sm.q_full, 1);
        mbarrier_init_fence();
    }
    __syncthreads();  // the last block-wide barrier: from here on, mbarriers only

    if (warp_id == GROUPS * GROUP / WARP_SIZE) {  // the producer warp
        if (threadIdx.x % WARP_SIZE == 0)
            produce_forward_tiles(sm, &qkv_map, GROUPS, b, h, C, q0, tiles);
        return;
    }
    const int group = warp_id / 4, warp = warp_id % 4;
    const ForwardRows rows = {sm.q + group * TILE_ELEMENTS, q0 + group * ROWS + warp * 16};
    const float scale_log2 = LOG2E / sqrtf((float)HS);
    float o[1][HS / 8][4] = {}, m[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {};
    mbarrier_wait(sm.q_full, 0);
    if (OVERLAP)
        consume_forward_overlapped<GROUPS, PINGPONG>(sm, rows, group, tiles, scale_log2, o, m,
                                                     l);
    else
        consume_forward_serial(sm, rows, tiles, scale_log2, o, m, l);
    // The warp's own 16 rows of Q, read by its warpgroup's products only,
    // all finished: they stage the output.
    finish_rows(o, m, l, lse + (size_t)bh * T, rows.row0, T);
    store_warp_rows<HS, 1>(out + (size_t)b * T * C + h * HS, C, rows.row0, T, o, 1.0f, sm.q,
                           group * ROWS + warp * 16);
}
// ANCHOR_END: forward_kernel_ws

// ---- the backward pass --------------------------------------------------------------
constexpr int BWD_GROUPS = 2;              // consumer warpgroups: 64 keys each
constexpr int BWD_KEYS = BWD_GROUPS * ROWS; // 128 keys per block
constexpr int BWD_STAGES = 3;              // tiles of Q and dO (with lse and D) in flight

struct BackwardSmem {
    bf16 *k, *v;        // BWD_KEYS x HS each: the warpgroups' keys, 64 rows each
    bf16 *q, *dout;     // BWD_STAGES x (ROWS x HS) each
    bf16 *ds;           // 2 x BWD_GROUPS tiles of dS^T (ROWS x ROWS): two iterations' worth
    float *lse, *delta; // BWD_STAGES x ROWS each
    uint64_t *full, *empty, *kv_full;
};

__device__ __forceinline__ BackwardSmem backward_smem(unsigned char *raw) {
    BackwardSmem sm;
    sm.k = aligned_smem(raw);
    sm.v = sm.k + BWD_KEYS * HS;
    sm.q = sm.v + BWD_KEYS * HS;
    sm.dout = sm.q + BWD_STAGES * TILE_ELEMENTS;
    sm.ds = sm.dout + BWD_STAGES * TILE_ELEMENTS;
    sm.lse = reinterpret_cast<float *>(sm.ds + 2 * BWD_GROUPS * TILE_ELEMENTS);
    sm.delta = sm.lse + BWD_STAGES * ROWS;
    sm.full = reinterpret_cast<uint64_t *>(sm.delta + BWD_STAGES * ROWS);
    sm.empty = sm.full + BWD_STAGES;
    sm.kv_full = sm.empty + BWD_STAGES;
    return sm;
}
constexpr size_t BWD_SMEM_BYTES =
    (2 * BWD_KEYS * HS + 2 * BWD_STAGES * TILE_ELEMENTS + 2 * BWD_GROUPS * TILE_ELEMENTS) *
        sizeof(bf16) +
    2 * BWD_STAGES * ROWS * sizeof(float) + (2 * BWD_STAGES + 1) * 8 + 1024;

// The scratch: dQ's fp32 sums (B,NH,T,HS) first (their rows start on 256
// bytes, for 8- and 16-byte accesses), then D (B,NH,T), then one counter per
// (b, h, tile of 64 queries): how many blocks have added into that tile.
struct BackwardScratch {
    float *delta, *dq_sum;
    int *added;
};

__host__ __device__ inline BackwardScratch backward_scratch(float *scratch, int B, int T, int NH) {
    BackwardScratch s;
    s.dq_sum = scratch;
    s.delta = scratch + (size_t)B * NH * T * HS;
    s.added = reinterpret_cast<int *>(s.delta + (size_t)B * NH * T);
    return s;
}

// ANCHOR: backward_producer
// The producer warp: the block's K and V once, then tile by tile Q and dO by
// the TMA (lane 0) and the tile's 64 values of lse and D by the 32 lanes
// (rows of T floats need not start on the 16 bytes a bulk copy wants). The
// full barrier of a stage waits for the TMA's bytes and the 32 lanes'
// arrivals, each after its own stores.
__device__ __forceinline__ void produce_backward_tiles(const BackwardSmem &sm, const CUtensorMap *qkv_map,
                                       const CUtensorMap *dout_map, const float *lse_row,
                                       const float *delta_row, int b, int h, int C, int k0,
                                       int first, int tiles, int T) {
    const int lane = threadIdx.x % WARP_SIZE;
    if (lane == 0) {
        mbarrier_arrive_expect_tx(sm.kv_full, 2 * BWD_KEYS * HS * sizeof(bf16));
        for (int g = 0; g < BWD_GROUPS; g++) {
            tma_load_3d(sm.k + g * TILE_ELEMENTS, qkv_map, C + h * HS, k0 + g * ROWS, b,
                        sm.kv_full);
            tma_load_3d(sm.v + g * TILE_ELEMENTS, qkv_map, 2 * C + h * HS, k0 + g * ROWS, b,
                        sm.kv_full);
        }
    }
    for (int i = first; i < tiles; i++) {
        const int it = i - first, stage = it % BWD_STAGES, q0 = i * ROWS;
        if (it >= BWD_STAGES) mbarrier_wait(&sm.empty[stage], (it / BWD_STAGES - 1) & 1);
        if (lane == 0) {
            mbarrier_expect_tx(&sm.full[stage], 2 * TILE_BYTES);
            tma_load_3d(sm.q + stage * TILE_ELEMENTS, qkv_map, h * HS, q0, b, &sm.full[stage]);
            tma_load_3d(sm.dout + stage * TILE_ELEMENTS, dout_map, h * HS, q0, b,
                        &sm.full[stage]);
        }
        for (int r = lane; r < ROWS; r += WARP_SIZE) {
            const int t = q0 + r;
            sm.lse[stage * ROWS + r] = t < T ? lse_row[t] : 0.0f;
            sm.delta[stage * ROWS + r] = t < T ? delta_row[t] : 0.0f;
        }
        mbarrier_arrive(&sm.full[stage]);
    }
}
// ANCHOR_END: backward_producer

// A warp's 16 rows of dS^T (keys x queries, accumulator layout) into the
// warpgroup's tile, in bf16, in the swizzled layout the tensor cores read.
__device__ __forceinline__ void store_ds_tile(bf16 *tile, const float (&ds)[ROWS / 8][4],
                                              int warp) {
    const int lane = threadIdx.x % WARP_SIZE, g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int nt = 0; nt < ROWS / 8; nt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int r = warp * 16 + g + 8 * half;
            *reinterpret_cast<uint32_t *>(tile + tile_offset<ROWS>(r, nt) + 2 * t4) =
                pack_bf16(ds[nt][2 * half], ds[nt][2 * half + 1]);
        }
}

// dQ_i (64 queries x HS) = dS K over the block's 128 keys: for each
// warpgroup's 64 keys, its dS^T tile (keys x queries) is the left factor
// read MN-major, its K tile (keys x HS) the right, MN-major as well.
__device__ __forceinline__ void wg_mma_dq(float (&dq)[8][4], const bf16 *ds, const bf16 *k) {
    wgmma_fence();
#pragma unroll
    for (int g = 0; g < BWD_GROUPS; g++) {
        const uint64_t da = smem_descriptor(ds + g * TILE_ELEMENTS);
        const uint64_t db = smem_descriptor(k + g * TILE_ELEMENTS);
#pragma unroll
        for (int kk = 0; kk < ROWS / 16; kk++)
            wgmma_64x64_smem_mn(dq, da + DESC_MN_STEP * kk, db + DESC_MN_STEP * kk,
                                g > 0 || kk > 0);
    }
}

// ANCHOR: ordered_dq
// Adds this block's dQ of one tile of queries into the fp32 sums, in its
// turn: the blocks that meet tile i are n = 0 .. i/2 (128 keys each), and
// they add from the diagonal down, i/2 first, so block n waits until
// i/2 - n blocks have added. The block nearest the diagonal reaches a tile
// first anyway (it starts there), so the turns cost little waiting. The
// first stores instead of adding, so the sums need no zeroing; the others
// add by reductions that the memory system performs (no value comes back
// to wait for), and the fence waits until they are done before the counter
// says so. Each block only waits for blocks launched before it (the grid
// puts a head's blocks from the diagonal's end first), so the wait ends.
// ORDERED false (the kernel lab's measure of what the order costs) adds
// whenever it gets there: atomics in any order, sums that differ in their
// last bits from run to run.
template <bool ORDERED>
__device__ __forceinline__ void add_dq_in_order(float *dq_sum, int *added,
                                                const float (&dq)[8][4], int turn, int warp,
                                                int q0, int T) {
    const int lane = threadIdx.x % WARP_SIZE, g = lane / 4, t4 = lane % 4;
    const int group_thread = threadIdx.x % GROUP, bar = BAR_GROUP + threadIdx.x / GROUP;
    if (ORDERED) {
        if (group_thread == 0) {
            int seen;
            do {
                asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(seen) : "l"(added));
            } while (seen != turn);
        }
        named_barrier_sync(bar, GROUP);
    }
#pragma unroll
    for (int nt = 0; nt < HS / 8; nt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int t = q0 + warp * 16 + g + 8 * half;
            if (t >= T) continue;
            float2 *p = reinterpret_cast<float2 *>(dq_sum + (size_t)t * HS + nt * 8 + 2 * t4);
            const float2 part = make_float2(dq[nt][2 * half], dq[nt][2 * half + 1]);
            if (ORDERED && turn == 0) __stcg(p, part);
            else atomicAdd(p, part);
        }
    if (ORDERED) {
        __threadfence();
        named_barrier_sync(bar, GROUP);
        if (group_thread == 0)
            asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(added) : "memory");
    }
}
// ANCHOR_END: ordered_dq

// ANCHOR: backward_kernel_ws
// One block per 128 keys of one (b, h), warpgroup g owning keys
// k0 + 64g .. k0 + 64g + 63. The block walks the tiles of 64 queries from
// the diagonal (tile 2n, for block n) to the end of the sequence; at each:
//   S^T = K Q^T, dP^T = V dO^T      (both warpgroups, their own keys)
//   P^T, dS^T                       (ds_by_key_rows, chapter 05's)
//   dV += P^T dO, dK += dS^T Q      (in registers, for the whole walk)
//   dS^T -> shared memory; both warpgroups meet (BAR_DS_READY)
//   dQ_i = dS K                     (warpgroup i % 2, all 128 keys), added in turn
template <bool ORDERED>
__global__ void __launch_bounds__(block_threads(BWD_GROUPS), 1)
    flash_attention_backward_ws_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                       const __grid_constant__ CUtensorMap dout_map, bf16 *dqkv,
                                       const float *lse, BackwardScratch scratch, int B, int T,
                                       int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    const BackwardSmem sm = backward_smem(smem_raw);
    const int blocks = (T + BWD_KEYS - 1) / BWD_KEYS;  // of a head
    const TilePlace at = tile_place<ATTENTION_HEAD_GROUPS>(blocks, B * NH, group_heads);
    const int C = NH * HS, ld = 3 * C, bh = at.bh, b = bh / NH, h = bh % NH;
    const int n = blocks - 1 - at.tile, k0 = n * BWD_KEYS;  // the diagonal's end first
    const int first = 2 * n, tiles = (T + ROWS - 1) / ROWS;
    const int warp_id = threadIdx.x / WARP_SIZE;

    if (threadIdx.x == 0) {
        for (int s = 0; s < BWD_STAGES; s++) {
            mbarrier_init(&sm.full[s], WARP_SIZE);
            mbarrier_init(&sm.empty[s], BWD_GROUPS * GROUP);
        }
        mbarrier_init(sm.kv_full, 1);
        mbarrier_init_fence();
    }
    __syncthreads();

    if (warp_id == BWD_GROUPS * GROUP / WARP_SIZE) {  // the producer warp
        produce_backward_tiles(sm, &qkv_map, &dout_map, lse + (size_t)bh * T,
                               scratch.delta + (size_t)bh * T, b, h, C, k0, first, tiles, T);
        return;
    }
    const int group = warp_id / 4, warp = warp_id % 4, g = threadIdx.x % WARP_SIZE / 4;
    const int key_first = k0 + group * ROWS;  // the warpgroup's first key
    const bf16 *gk = sm.k + group * TILE_ELEMENTS, *gv = sm.v + group * TILE_ELEMENTS;
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * LOG2E;
    float *dq_sum = scratch.dq_sum + (size_t)bh * T * HS;
    int *added = scratch.added + (size_t)bh * tiles;
    float dk[1][HS / 8][4] = {}, dv[1][HS / 8][4] = {};
    mbarrier_wait(sm.kv_full, 0);

    for (int i = first; i < tiles; i++) {
        const int it = i - first, stage = it % BWD_STAGES, q0 = i * ROWS;
        mbarrier_wait(&sm.full[stage], (it / BWD_STAGES) & 1);
        const bf16 *tq = sm.q + stage * TILE_ELEMENTS, *tdo = sm.dout + stage * TILE_ELEMENTS;
        float pt[1][ROWS / 8][4], dst[1][ROWS / 8][4];
        wg_mma_with_rows(pt[0], gk, tq);   // S^T = K Q^T
        wg_mma_with_rows(dst[0], gv, tdo); // dP^T = V dO^T
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(pt[0]);
        wgmma_fence_operands(dst[0]);
        const bool mask = q0 < key_first + ROWS || q0 + ROWS > T;
        ds_by_key_rows<ROWS>(pt, dst, sm.lse + stage * ROWS, sm.delta + stage * ROWS,
                             key_first + warp * 16 + g, q0, T, mask, scale_log2);
        bf16 *ds = sm.ds + (it % 2) * BWD_GROUPS * TILE_ELEMENTS;
        store_ds_tile(ds + group * TILE_ELEMENTS, dst[0], warp);
        wg_mma_with_probs(dv[0], pt[0], tdo);  // dV += P^T dO
        wg_mma_with_probs(dk[0], dst[0], tq);  // dK += dS^T Q
        wgmma_commit();
        fence_proxy_async();  // dS^T's stores, visible to the tensor cores
        named_barrier_sync(BAR_DS_READY, BWD_GROUPS * GROUP);
        if (it % 2 == group) {
            float dq[HS / 8][4];
            wg_mma_dq(dq, ds, sm.k);  // dQ_i = dS K
            wgmma_commit();
            wgmma_wait<0>();
            wgmma_fence_operands(dq);
            add_dq_in_order<ORDERED>(dq_sum, added + i, dq, i / 2 - n, warp, q0, T);
        } else {
            wgmma_wait<0>();
        }
        wgmma_fence_operands(dk[0]);
        wgmma_fence_operands(dv[0]);
        release_stage(&sm.empty[stage]);
    }
    // The last dQ product may still read the other warpgroup's K tile, which
    // stages its dK below: wait for both warpgroups to be done.
    named_barrier_sync(BAR_DS_READY, BWD_GROUPS * GROUP);
    bf16 *dqkv_seq = dqkv + (size_t)b * T * ld + h * HS;
    bf16 *stage_k = sm.k + group * TILE_ELEMENTS, *stage_v = sm.v + group * TILE_ELEMENTS;
    store_warp_rows<HS, 1>(dqkv_seq + C, ld, key_first + warp * 16, T, dk, scale, stage_k,
                           warp * 16);
    store_warp_rows<HS, 1>(dqkv_seq + 2 * C, ld, key_first + warp * 16, T, dv, 1.0f, stage_v,
                           warp * 16);
}
// ANCHOR_END: backward_kernel_ws

// dQ's fp32 sums (B,NH,T,HS), times the softmax's scale, into dqkv's q
// columns: one thread per 8 values.
__global__ void dq_sums_to_dqkv_kernel(bf16 *dqkv, const float *dq_sum, float scale, int B,
                                       int T, int NH) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t chunks = (size_t)B * NH * T * (HS / 8);
    if (i >= chunks) return;
    const int c = (int)(i % (HS / 8));
    const size_t row = i / (HS / 8);  // (b, h, t)
    const int t = (int)(row % T), h = (int)(row / T % NH), b = (int)(row / T / NH);
    const float4 *src = reinterpret_cast<const float4 *>(dq_sum + row * HS + c * 8);
    const float4 x = __ldcs(src), y = __ldcs(src + 1);
    uint4 packed;
    packed.x = pack_bf16(x.x * scale, x.y * scale);
    packed.y = pack_bf16(x.z * scale, x.w * scale);
    packed.z = pack_bf16(y.x * scale, y.y * scale);
    packed.w = pack_bf16(y.z * scale, y.w * scale);
    *reinterpret_cast<uint4 *>(dqkv + ((size_t)b * T + t) * 3 * NH * HS + h * HS + c * 8) =
        packed;
}

}  // namespace

// ---- the tensor maps ------------------------------------------------------------------
// ANCHOR: tensor_map
// A (B, T, width) bf16 tensor whose rows are `ld` elements apart, as boxes of
// 64 rows x 64 columns (one head's tile; tma_box_for_heads, chapter 12's
// exercise, works out the numbers): the TMA writes a box in the 128-byte
// swizzle the tiles use (attention_tiles.cuh) and fills rows at or past T
// with zeros, as load_tile did.
static CUtensorMap tile_map(const bf16 *tensor, int B, int T, int width, int ld, const char *who) {
    TmaBox d;
    char err[ERR_LEN];
    if (tma_box_for_heads(&d, B, T, width, ld, HS, ROWS, err) != 0) die("%s: %s", who, err);
    CUtensorMap map;
    const cuuint32_t element_strides[3] = {1, 1, 1};
    const CUresult r = tensor_map_encoder()(
        &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)tensor, d.dims, d.strides, d.box,
        element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        die("%s: cuTensorMapEncodeTiled refused a (%d, %d, %d) tensor (CUresult %d)", who, B, T,
            width, (int)r);
    return map;
}
// ANCHOR_END: tensor_map

// The same maps for chapter 12's backward candidates (attention_flash_bwd.cu).
CUtensorMap attention_tile_map(const bf16 *tensor, int B, int T, int width, int ld,
                               const char *who) {
    return tile_map(tensor, B, T, width, ld, who);
}

template <int GROUPS, bool OVERLAP, bool PINGPONG, int BLOCKS_PER_SM, AttentionBlockOrder ORDER>
static void launch_forward(const GpuContext *ctx, bf16 *out, float *lse, const bf16 *qkv, int B,
                           int T, int NH) {
    const char *name = "flash_attention_forward_ws_kernel";
    const CUtensorMap map = tile_map(qkv, B, T, 3 * NH * HS, 3 * NH * HS, name);
    auto kernel = flash_attention_forward_ws_kernel<GROUPS, OVERLAP, PINGPONG, BLOCKS_PER_SM, ORDER>;
    const size_t smem = forward_smem_bytes(GROUPS);
    allow_shared_memory(kernel, smem);
    const dim3 grid = grid_for(ORDER, B * NH, (T + GROUPS * ROWS - 1) / (GROUPS * ROWS));
    kernel<<<grid, block_threads(GROUPS), smem, ctx->stream>>>(map, out, lse, B, T, NH,
                                                               heads_per_group(T));
    gpu_check_launch(ctx, name);
}

// ANCHOR: forward_steps
extern "C" void attention_forward_v4_step(const GpuContext *ctx, int step, floatX *out,
                                          float *lse, const floatX *qkv, int B, int T, int C,
                                          int NH) {
    check_head_size("attention_forward_v4", C, NH);
    if (B * NH > 65535) die("attention_forward_v4: B*NH = %d past the grid's 65535", B * NH);
    switch (step) {
    case 1: attention_forward_v3_ordered(ctx, ATTENTION_BY_HEAD, out, lse, qkv, B, T, C, NH); break;
    case 2:
        attention_forward_v3_ordered(ctx, ATTENTION_HEAD_GROUPS, out, lse, qkv, B, T, C, NH);
        break;
    // The TMA and a producer warp: two blocks per SM fit (96 registers a
    // thread), as many warpgroups as v3 has.
    case 3: launch_forward<2, false, false, 2, ATTENTION_HEAD_GROUPS>(ctx, out, lse, qkv, B, T, NH); break;
    // The overlap needs a second tile of scores in registers: one block per SM.
    case 4: launch_forward<2, true, false, 1, ATTENTION_HEAD_GROUPS>(ctx, out, lse, qkv, B, T, NH); break;
    case 5: launch_forward<2, true, true, 1, ATTENTION_HEAD_GROUPS>(ctx, out, lse, qkv, B, T, NH); break;
    // Tiles of 128 keys, a warpgroup a block (attention_flash_wide.cu); then
    // the same, persistent.
    case 6:
    case 7: attention_forward_wide_step(ctx, step, out, lse, qkv, B, T, C, NH); break;
    default: die("attention_forward_v4_step: step %d, not 1..%d", step, ATTENTION_V4_STEPS);
    }
}
// ANCHOR_END: forward_steps

// The fused backward pass's scratch (BackwardScratch), in floats.
static size_t fused_scratch_floats(int B, int T, int NH) {
    const size_t counters = (size_t)B * NH * ((T + ROWS - 1) / ROWS);  // ints, 4 bytes each
    return (size_t)B * NH * T * (1 + HS) + counters;
}

template <bool ORDERED>
static void launch_fused_backward(const GpuContext *ctx, bf16 *dqkv, float *scratch,
                                  const bf16 *dout, const bf16 *out, const bf16 *qkv,
                                  const float *lse, int B, int T, int C, int NH) {
    const BackwardScratch s = backward_scratch(scratch, B, T, NH);
    flash_attention_delta_kernel<HS><<<(B * T + DELTA_WARPS - 1) / DELTA_WARPS,
                                       DELTA_WARPS * WARP_SIZE, 0, ctx->stream>>>(
        s.delta, dout, out, B * T, T, NH);
    gpu_check_launch(ctx, "flash_attention_delta_kernel");
    const size_t counters = (size_t)B * NH * ((T + ROWS - 1) / ROWS);
    if (ORDERED) gpu_zero(ctx, s.added, counters * sizeof(int), "memset (attention dQ turns)");
    else gpu_zero(ctx, s.dq_sum, (size_t)B * NH * T * HS * sizeof(float), "memset (dQ sums)");

    const CUtensorMap qkv_map = tile_map(qkv, B, T, 3 * C, 3 * C, "attention backward (qkv)");
    const CUtensorMap dout_map = tile_map(dout, B, T, C, C, "attention backward (dout)");
    auto kernel = flash_attention_backward_ws_kernel<ORDERED>;
    allow_shared_memory(kernel, BWD_SMEM_BYTES);
    const dim3 grid = grid_for(ATTENTION_HEAD_GROUPS, B * NH, (T + BWD_KEYS - 1) / BWD_KEYS);
    kernel<<<grid, block_threads(BWD_GROUPS), BWD_SMEM_BYTES, ctx->stream>>>(
        qkv_map, dout_map, dqkv, lse, s, B, T, NH, heads_per_group(T));
    gpu_check_launch(ctx, "flash_attention_backward_ws_kernel");

    const size_t chunks = (size_t)B * NH * T * (HS / 8);
    const int threads = 256;
    dq_sums_to_dqkv_kernel<<<(unsigned)((chunks + threads - 1) / threads), threads, 0,
                             ctx->stream>>>(dqkv, s.dq_sum, 1.0f / sqrtf((float)HS), B, T, NH);
    gpu_check_launch(ctx, "dq_sums_to_dqkv_kernel");
}

extern "C" size_t attention_backward_v4_variant_scratch_floats(int variant, int B, int T,
                                                              int NH) {
    if (variant == 3 || variant == 4) return fused_scratch_floats(B, T, NH);
    return attention_backward_v2_scratch_floats(B, T, NH);
}

extern "C" void attention_backward_v4_variant(const GpuContext *ctx, int variant, floatX *dqkv,
                                              float *scratch, const floatX *dout,
                                              const floatX *out, const floatX *qkv,
                                              const float *lse, int B, int T, int C, int NH) {
    check_head_size("attention_backward_v4", C, NH);
    if (B * NH > 65535) die("attention_backward_v4: B*NH = %d past the grid's 65535", B * NH);
    switch (variant) {
    case 1:
    case 2: {
        const AttentionBlockOrder order = variant == 1 ? ATTENTION_BY_HEAD : ATTENTION_HEAD_GROUPS;
        attention_backward_v3_ordered(ctx, order, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
        break;
    }
    case 3: launch_fused_backward<true>(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH); break;
    case 4: launch_fused_backward<false>(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH); break;
    case 5:
    case 6:
    case 7:
    case 8:
        attention_backward_split_variant(ctx, variant, dqkv, scratch, dout, out, qkv, lse, B, T,
                                         C, NH);
        break;
    default:
        die("attention_backward_v4_variant: variant %d, not 1..%d", variant,
            ATTENTION_V4_BACKWARD_VARIANTS);
    }
}

#else  // the fp32 build, or a build for a GPU other than compute capability 9.0

// Why there are no v4 kernels in this build.
static const char *without_v4(void) {
#ifndef PRECISION_BF16
    return "flash attention runs on bf16 tensor cores: the bf16 build's (chapter 12, "
           "--fast-attention)";
#else
    return "the TMA and wgmma kernels run on compute capability 9.0 only (H100, H200), and "
           "this build is for another GPU (make GPU_ARCH=90 builds them; "
           "attention_forward_v2 runs everywhere)";
#endif
}

extern "C" void attention_forward_v4_step(const GpuContext *ctx, int step, floatX *out,
                                          float *lse, const floatX *qkv, int B, int T, int C,
                                          int NH) {
    (void)ctx, (void)step, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)C, (void)NH;
    die("attention_forward_v4: %s", without_v4());
}

extern "C" size_t attention_backward_v4_variant_scratch_floats(int variant, int B, int T,
                                                              int NH) {
    (void)variant;
    return attention_backward_v2_scratch_floats(B, T, NH);
}

extern "C" void attention_backward_v4_variant(const GpuContext *ctx, int variant, floatX *dqkv,
                                              float *scratch, const floatX *dout,
                                              const floatX *out, const floatX *qkv,
                                              const float *lse, int B, int T, int C, int NH) {
    (void)ctx, (void)variant, (void)dqkv, (void)scratch, (void)dout, (void)out, (void)qkv;
    (void)lse, (void)B, (void)T, (void)C, (void)NH;
    die("attention_backward_v4: %s", without_v4());
}

#endif

// ---- v4: the steps the model runs ---------------------------------------------------
extern "C" void attention_forward_v4(const GpuContext *ctx, floatX *out, float *lse,
                                     const floatX *qkv, int B, int T, int C, int NH) {
    attention_forward_v4_step(ctx, ATTENTION_V4_FORWARD, out, lse, qkv, B, T, C, NH);
}

// ANCHOR: model_backward_variant
// ATTENTION_V4_BACKWARD, or the variant GPT2_ATTENTION_V4_BACKWARD names: one
// of those with v3's scratch (the fused ones need more than the model plans).
static int model_backward_variant(void) {
    const char *named = getenv("GPT2_ATTENTION_V4_BACKWARD");
    if (!named || !*named) return ATTENTION_V4_BACKWARD;
    const int v = atoi(named);
    if (v < 1 || v > ATTENTION_V4_BACKWARD_VARIANTS || v == 3 || v == 4)
        die("GPT2_ATTENTION_V4_BACKWARD=%s: not one of the backward variants 1, 2, 5..%d "
            "(attention_flash.h)", named, ATTENTION_V4_BACKWARD_VARIANTS);
    return v;
}
// ANCHOR_END: model_backward_variant

extern "C" size_t attention_backward_v4_scratch_floats(int B, int T, int NH) {
    return attention_backward_v4_variant_scratch_floats(model_backward_variant(), B, T, NH);
}

extern "C" void attention_backward_v4(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                      const floatX *dout, const floatX *out, const floatX *qkv,
                                      const float *lse, int B, int T, int C, int NH) {
    attention_backward_v4_variant(ctx, model_backward_variant(), dqkv, scratch, dout, out, qkv,
                                  lse, B, T, C, NH);
}
