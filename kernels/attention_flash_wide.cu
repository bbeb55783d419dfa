// attention_flash_wide.cu: chapter 12's forward pass at 128 keys a tile, the
// kernel lab's steps 6 and 7 (attention_flash.h); step 7 is v4's forward
// pass. Heads of 64, bf16, compute capability 9.0.
//
// What step 3 (attention_flash_ws.cu) leaves. It runs at 30% of the tensor
// cores' peak at B = 64, T = 1024 (the kernel lab), under what a serial
// warpgroup could reach with four of them an SM to cover each other. Each
// warpgroup runs S, softmax, P V one after the other, and what is left of
// every tile is latency: the wait for a product, the quad's shuffles for
// the row maxima, the check and rescaling of O.
//
// Step 6, tiles of 128 keys. S is 64 x 128 a warpgroup: one product of N =
// 128, which reads each slice of Q once for 128 keys, not twice, and the
// fixed costs of a tile are paid once per 128 keys. The scores take 64
// registers a thread, O 32: with a producer warp beside a warpgroup, a
// block of 5 warps, three blocks fit an SM at 128 registers (15 warps, 4 on
// one scheduler: 16384 / (4 x 32)), so a block is one warpgroup, 64 queries,
// and three warpgroups share an SM, where step 3 had four. A block's last
// tile holds 64 keys when its queries start on a multiple of 128 (the keys
// after the diagonal are not needed): it runs as a tile of 64.
//
// Step 7, persistent blocks. A block of step 6 starts by initializing its
// barriers and waiting for its Q and first tiles to land, once per 64
// queries: at B = 64 that is 12288 blocks, 31 after one another in each of
// an SM's three places. Step 7 launches three blocks per SM for the whole
// run; each takes the next 64 queries from a counter in global memory (in
// ATTENTION_HEAD_GROUPS' order, heaviest first) as it finishes the last.
// Its producer takes the next piece of work and loads its Q as soon as the
// consumers have computed the last scores of the current one, and its K
// and V into the ring as the stages free: the next piece's tiles land while
// the current one's last product, softmax and output run. The output goes
// from registers straight to global memory, since Q's tile is by then the
// next piece's. Launches on one GPU must follow one another (one stream):
// they share the counter, which the last block of each sets back to 0.
//
// Both compute every value with the same operations in the same order: step
// 7 gives step 6's bits. Against v3 (tiles of 64 keys) they differ in the
// rounding: the running maximum moves per 128 keys, not per 64, so the
// exponentials and the sums are taken from other places.
#include <math.h>

#include "attention_flash.h"
#include "util/util.h"

#if defined(PRECISION_BF16) && defined(WITH_WGMMA)
#include <cuda.h>

#include "attention_wgmma.cuh"
#include "tma.cuh"

// attention_flash_ws.cu's tensor maps: boxes of 64 rows x 64 columns.
CUtensorMap attention_tile_map(const bf16 *tensor, int B, int T, int width, int ld,
                               const char *who);

namespace {

constexpr int KEYS = 2 * ROWS;                    // keys in a tile: two boxes of the map
constexpr int STAGES = 2;                         // tiles of K and V in flight
constexpr int THREADS = GROUP + WARP_SIZE;        // a consumer warpgroup and a producer warp
constexpr int BLOCKS_PER_SM = 3;
constexpr int STAGE_ELEMENTS = KEYS * HS;         // one tile of K (or of V): 16 KB

// Q (64 x HS), then STAGES tiles of K and STAGES of V (each 128 x HS: two
// boxes of 64 rows, one after the other, which is one tile of 128 rows in
// the 128-byte swizzle), then the barriers.
struct WideSmem {
    bf16 *q, *k, *v;
    uint64_t *full, *empty;    // STAGES each: a stage's K and V landed / released
    uint64_t *q_full, *q_empty;  // Q landed / Q read for the last time (step 7)
};

__device__ __forceinline__ WideSmem wide_smem(unsigned char *raw) {
    WideSmem sm;
    sm.q = aligned_smem(raw);
    sm.k = sm.q + TILE_ELEMENTS;
    sm.v = sm.k + STAGES * STAGE_ELEMENTS;
    sm.full = reinterpret_cast<uint64_t *>(sm.v + STAGES * STAGE_ELEMENTS);
    sm.empty = sm.full + STAGES;
    sm.q_full = sm.empty + STAGES;
    sm.q_empty = sm.q_full + 1;
    return sm;
}
constexpr size_t SMEM_BYTES = (TILE_ELEMENTS + 2 * STAGES * STAGE_ELEMENTS) * sizeof(bf16) +
                              (2 * STAGES + 2) * sizeof(uint64_t) + 1024;
static_assert(BLOCKS_PER_SM * (SMEM_BYTES + 1024) <= 228 * 1024, "three blocks an SM");

// 64 queries of one head: where they are and the keys they see.
struct Piece {
    int bh, b, h, q0;
    int keys;   // the keys the queries see: 0 .. keys - 1
    int tiles;  // of 128 keys; the last may hold 64 or fewer
};

__device__ __forceinline__ Piece piece_of(int item, int B, int T, int NH, int group_heads) {
    const int queries = (T + ROWS - 1) / ROWS;  // tiles of 64 queries
    const TilePlace at = head_group_place(item, queries, B * NH, group_heads);
    Piece p;
    p.bh = at.bh;
    p.b = at.bh / NH;
    p.h = at.bh % NH;
    p.q0 = (queries - 1 - at.tile) * ROWS;
    p.keys = min(p.q0 + ROWS, T);
    p.tiles = (p.keys + KEYS - 1) / KEYS;
    return p;
}

// Boxes of 64 rows in tile j of a piece: 2, or 1 for a last tile of 64 keys
// or fewer.
__device__ __forceinline__ int boxes_of(const Piece &p, int j) {
    return p.keys - j * KEYS > ROWS ? 2 : 1;
}

__device__ __forceinline__ void init_barriers(const WideSmem &sm) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbarrier_init(&sm.full[s], 1);
            mbarrier_init(&sm.empty[s], GROUP);
        }
        mbarrier_init(sm.q_full, 1);
        mbarrier_init(sm.q_empty, GROUP);
        mbarrier_init_fence();
    }
    __syncthreads();  // the last block-wide barrier: from here on, mbarriers only
}

// ANCHOR: wide_producer
// The producer's part of a piece: Q, then its tiles of K and V into the
// ring. `loaded` counts the tiles loaded before, over every piece the block
// has had: the ring's position.
__device__ __forceinline__ void load_piece(const WideSmem &sm, const CUtensorMap *map,
                                           const Piece &p, int NH, int &loaded) {
    const int C = NH * HS;
    mbarrier_arrive_expect_tx(sm.q_full, TILE_BYTES);
    tma_load_3d(sm.q, map, p.h * HS, p.q0, p.b, sm.q_full);
    for (int j = 0; j < p.tiles; j++, loaded++) {
        const int stage = loaded % STAGES, boxes = boxes_of(p, j);
        if (loaded >= STAGES) mbarrier_wait(&sm.empty[stage], (loaded / STAGES - 1) & 1);
        mbarrier_arrive_expect_tx(&sm.full[stage], 2 * boxes * TILE_BYTES);
        bf16 *k = sm.k + stage * STAGE_ELEMENTS, *v = sm.v + stage * STAGE_ELEMENTS;
        for (int x = 0; x < boxes; x++) {
            const int row = j * KEYS + x * ROWS;
            tma_load_3d(k + x * TILE_ELEMENTS, map, C + p.h * HS, row, p.b, &sm.full[stage]);
            tma_load_3d(v + x * TILE_ELEMENTS, map, 2 * C + p.h * HS, row, p.b, &sm.full[stage]);
        }
    }
}
// ANCHOR_END: wide_producer

// ANCHOR: wide_tile
// One tile of N keys from key0 (N = 128, or 64 for a short last tile): S =
// Q K^T as one product of 64 x N, the online softmax over all N keys at
// once, O += P V in N / 16 steps. With `last`, the scores are the piece's
// last: Q's tile is released to the producer (step 7) as soon as they are.
template <int N>
__device__ __forceinline__ void consume_tile(const WideSmem &sm, const bf16 *k, const bf16 *v,
                                             bool last, int row0, int key0, float scale_log2,
                                             float (&o)[1][HS / 8][4], float (&m)[1][2],
                                             float (&l)[1][2]) {
    float s[1][N / 8][4];
    wg_mma_with_rows(s[0], sm.q, k);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(s[0]);
    if (last) mbarrier_arrive(sm.q_empty);
    online_softmax<HS, 1, N>(s, m, l, o, row0, key0, key0 + N > row0, scale_log2);
    wg_mma_with_probs(o[0], s[0], v);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(o[0]);
}

// The consumers' part of a piece: every tile, each released to the
// producer once its P V is done. `used` counts the tiles before, as
// load_piece's `loaded`.
__device__ __forceinline__ void consume_piece(const WideSmem &sm, const Piece &p, int warp,
                                              int &used, float (&o)[1][HS / 8][4],
                                              float (&m)[1][2], float (&l)[1][2]) {
    const float scale_log2 = LOG2E / sqrtf((float)HS);
    const int row0 = p.q0 + warp * 16;
    for (int j = 0; j < p.tiles; j++, used++) {
        const int stage = used % STAGES;
        const bf16 *k = sm.k + stage * STAGE_ELEMENTS, *v = sm.v + stage * STAGE_ELEMENTS;
        const bool last = j == p.tiles - 1;
        mbarrier_wait(&sm.full[stage], (used / STAGES) & 1);
        if (boxes_of(p, j) == 2)
            consume_tile<KEYS>(sm, k, v, last, row0, j * KEYS, scale_log2, o, m, l);
        else
            consume_tile<ROWS>(sm, k, v, last, row0, j * KEYS, scale_log2, o, m, l);
        mbarrier_arrive(&sm.empty[stage]);
    }
}
// ANCHOR_END: wide_tile

// ---- step 6: a block per 64 queries ---------------------------------------------------
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
    flash_attention_forward_wide_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16 *out,
                                        float *lse, int B, int T, int NH, int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    const WideSmem sm = wide_smem(smem_raw);
    const Piece p = piece_of(blockIdx.x, B, T, NH, group_heads);
    const int warp = threadIdx.x / WARP_SIZE, row0 = p.q0 + warp * 16;
    init_barriers(sm);
    int ring = 0;  // the block's one piece starts the ring
    if (warp == GROUP / WARP_SIZE) {  // the producer warp
        if (threadIdx.x % WARP_SIZE == 0) load_piece(sm, &qkv_map, p, NH, ring);
        return;
    }
    float o[1][HS / 8][4] = {}, m[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {};
    mbarrier_wait(sm.q_full, 0);
    consume_piece(sm, p, warp, ring, o, m, l);
    // The warp's own 16 rows of Q, read by its warpgroup's products only,
    // all finished: they stage the output.
    finish_rows(o, m, l, lse + (size_t)p.bh * T, row0, T);
    store_warp_rows<HS, 1>(out + (size_t)p.b * T * NH * HS + p.h * HS, NH * HS, row0, T, o, 1.0f,
                           sm.q, warp * 16);
}

// ---- step 7: persistent blocks ----------------------------------------------------------
// The pieces taken so far in this launch, and the blocks that have stopped
// taking them: the last of those sets both back to 0 for the next launch.
__device__ unsigned int pieces_taken, blocks_done;

// ANCHOR: persistent_producer
// Takes pieces until none is left. Piece n's Q may be loaded once the
// consumers have released piece n - 1's (q_empty's phase n - 1); the piece's
// number goes to the consumers in shared memory, -1 when there is none.
__device__ __forceinline__ void produce_pieces(const WideSmem &sm, const CUtensorMap *map,
                                               int *next_piece, int B, int T, int NH,
                                               int group_heads) {
    const int pieces = B * NH * ((T + ROWS - 1) / ROWS);
    int loaded = 0;
    for (int n = 0;; n++) {
        const int item = (int)atomicAdd(&pieces_taken, 1u);
        if (n > 0) mbarrier_wait(sm.q_empty, (n - 1) & 1);
        *next_piece = item < pieces ? item : -1;
        if (item >= pieces) {
            mbarrier_arrive(sm.q_full);  // no bytes: the consumers read -1 and stop
            break;
        }
        load_piece(sm, map, piece_of(item, B, T, NH, group_heads), NH, loaded);
    }
    __threadfence();
    if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {
        pieces_taken = 0;
        blocks_done = 0;
    }
}
// ANCHOR_END: persistent_producer

// A warp's 16 rows of O (divided by l already), from registers into rows
// row0.. of one head of a (B,T,C) tensor: each quad writes 16 bytes of a
// row, per n-tile.
__device__ __forceinline__ void store_rows_from_registers(bf16 *head, int ld, int row0, int T,
                                                          const float (&o)[1][HS / 8][4]) {
    const int lane = threadIdx.x % WARP_SIZE, g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int t = row0 + g + 8 * half;
        if (t >= T) continue;
#pragma unroll
        for (int nt = 0; nt < HS / 8; nt++)
            *reinterpret_cast<uint32_t *>(head + (size_t)t * ld + nt * 8 + 2 * t4) =
                pack_bf16(o[0][nt][2 * half], o[0][nt][2 * half + 1]);
    }
}

// ANCHOR: persistent_kernel
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
    flash_attention_forward_persistent_kernel(const __grid_constant__ CUtensorMap qkv_map,
                                              bf16 *out, float *lse, int B, int T, int NH,
                                              int group_heads) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ int next_piece;
    const WideSmem sm = wide_smem(smem_raw);
    const int warp = threadIdx.x / WARP_SIZE, C = NH * HS;
    init_barriers(sm);
    if (warp == GROUP / WARP_SIZE) {
        if (threadIdx.x % WARP_SIZE == 0)
            produce_pieces(sm, &qkv_map, &next_piece, B, T, NH, group_heads);
        return;
    }
    int used = 0;
    for (int n = 0;; n++) {
        mbarrier_wait(sm.q_full, n & 1);
        const int item = next_piece;
        if (item < 0) break;
        const Piece p = piece_of(item, B, T, NH, group_heads);
        const int row0 = p.q0 + warp * 16;
        float o[1][HS / 8][4] = {}, m[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {};
        consume_piece(sm, p, warp, used, o, m, l);
        finish_rows(o, m, l, lse + (size_t)p.bh * T, row0, T);
        store_rows_from_registers(out + (size_t)p.b * T * C + p.h * HS, C, row0, T, o);
    }
}
// ANCHOR_END: persistent_kernel

}  // namespace

static void launch_wide(const GpuContext *ctx, int step, bf16 *out, float *lse, const bf16 *qkv,
                        int B, int T, int NH) {
    const char *name = step == 6 ? "flash_attention_forward_wide_kernel"
                                 : "flash_attention_forward_persistent_kernel";
    const CUtensorMap map = attention_tile_map(qkv, B, T, 3 * NH * HS, 3 * NH * HS, name);
    const int pieces = B * NH * ((T + ROWS - 1) / ROWS);
    auto kernel = step == 6 ? flash_attention_forward_wide_kernel
                            : flash_attention_forward_persistent_kernel;
    allow_shared_memory(kernel, SMEM_BYTES);
    const int blocks = step == 6 ? pieces : min(pieces, BLOCKS_PER_SM * ctx->sm_count);
    kernel<<<blocks, THREADS, SMEM_BYTES, ctx->stream>>>(map, out, lse, B, T, NH,
                                                         heads_per_group(T));
    gpu_check_launch(ctx, name);
}

extern "C" void attention_forward_wide_step(const GpuContext *ctx, int step, floatX *out,
                                            float *lse, const floatX *qkv, int B, int T, int C,
                                            int NH) {
    check_head_size("attention_forward_wide", C, NH);
    if (step != 6 && step != 7) die("attention_forward_wide_step: step %d, not 6 or 7", step);
    launch_wide(ctx, step, out, lse, qkv, B, T, NH);
}

#else  // the fp32 build, or a build for a GPU other than compute capability 9.0

extern "C" void attention_forward_wide_step(const GpuContext *ctx, int step, floatX *out,
                                            float *lse, const floatX *qkv, int B, int T, int C,
                                            int NH) {
    (void)ctx, (void)step, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)C, (void)NH;
    die("attention_forward_wide: the wgmma and TMA kernels run on compute capability 9.0 "
        "only (H100, H200), in the bf16 build made with GPU_ARCH=90");
}

#endif
