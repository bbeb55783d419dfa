// gemm_steps.cu: see gemm_steps.h. Appendix E's GEMM, C = A @ B^T in bf16
// with fp32 sums, in six steps from chapter 01's WMMA exercise toward
// cuBLAS. Each step keeps what the one before it had and adds one idea:
//
//   1  WMMA, 64 x 64 per block (4 warps of 32 x 32), slices of 32 of K
//      copied into padded shared tiles through registers, a barrier on each
//      side of the products: chapter 01's kernel, on bf16 operands
//   2  128 x 128 per block (8 warps of 64 x 32): per slice, half the bytes
//      from L2 per product, and fragments reused across more products
//   3  cp.async and a ring of 4 slices: the copies of the next slices run
//      while the tensor cores work on this one
//   4  mma.sync m16n8k16 with ldmatrix, on unpadded tiles of 64 of K whose
//      16-byte chunks are XOR-swizzled (the layout the TMA writes): the
//      fragments and the epilogue in registers the code chooses
//   5  Hopper: wgmma (a warpgroup's asynchronous product, operands read by
//      the tensor cores straight from shared memory), fed by the TMA and a
//      ring of mbarriers; a producer warp, two consumer warpgroups
//   6  Hopper: 128 x 256 per block, one 64 x 256 wgmma per slice of 16
//
// Every block walks K from 0 up, 16 at a time, into fp32 accumulators that
// no other block touches: the sums' order is fixed, and so are the bits.
#include "gemm_steps.h"
#include "util/util.h"

#ifdef PRECISION_BF16
#include <mma.h>

#include "attention_tiles.cuh"  // bf16, tile_offset (the XOR swizzle), allow_shared_memory
#ifdef WITH_WGMMA
#include "tensor_map.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#endif

using namespace nvcuda;

namespace {

constexpr int CHUNK = 8;  // bf16 values per 16-byte copy

// ---- the edges: what every step writes ---------------------------------------------
// ANCHOR: gemm_store_pair
// Two neighbouring outputs (row, col) and (row, col + 1), col even, each
// rounded to bf16 once. One 4-byte store where both lie inside C and the
// pair is 4-byte aligned (N even); else each alone, if it lies inside C.
__device__ __forceinline__ void store_pair(bf16 *C, int M, int N, int row, int col, float v0,
                                           float v1) {
    if (row >= M || col >= N) return;
    bf16 *dst = C + (size_t)row * N + col;
    if (col + 1 < N && N % 2 == 0) {
        *reinterpret_cast<__nv_bfloat162 *>(dst) = __floats2bfloat162_rn(v0, v1);
    } else {
        dst[0] = __float2bfloat16_rn(v0);
        if (col + 1 < N) dst[1] = __float2bfloat16_rn(v1);
    }
}
// ANCHOR_END: gemm_store_pair

// ---- steps 1 and 2: WMMA ---------------------------------------------------------------
// ANCHOR: gemm_wmma_fragments
// bf16's WMMA shape: 16 x 16 of A times 16 x 16 of B^T into 16 x 16 fp32
// sums. B's slice is stored as rows of K (Bs[n][k]), which is B^T
// column-major, as in chapter 01.
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> FragB;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> FragC;
// ANCHOR_END: gemm_wmma_fragments

// Slices of 32 of K in rows padded by 8 bf16 (16 bytes): a row is 80 bytes,
// so the 8 rows that one read of a fragment touches start 20 banks apart,
// and their 16 bytes each fall in 8 different groups of 4 banks.
constexpr int WMMA_BK = 32, WMMA_LDS = WMMA_BK + 8;

// ANCHOR: gemm_copy_slice
// Rows [r0, r0 + ROWS), columns [k0, k0 + BK) of X (rows x K) into the tile
// S (rows of LDS), by the block's THREADS threads, 16 bytes a copy, through
// a register: load, then store. Outside X, zeros, which add nothing to a
// sum. K is a multiple of 8, so a chunk of 8 lies wholly inside or outside.
template <int ROWS, int BK, int LDS, int THREADS>
__device__ __forceinline__ void copy_slice(bf16 *S, const bf16 *X, int rows, int K, int r0,
                                           int k0) {
    constexpr int CHUNKS = BK / CHUNK, PASSES = ROWS * CHUNKS / THREADS;
    static_assert(ROWS * CHUNKS % THREADS == 0, "every thread copies as many chunks");
#pragma unroll
    for (int p = 0; p < PASSES; p++) {
        const int i = threadIdx.x + p * THREADS, r = i / CHUNKS, c = i % CHUNKS;
        const int gr = r0 + r, gk = k0 + c * CHUNK;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (gr < rows && gk < K) v = *reinterpret_cast<const uint4 *>(X + (size_t)gr * K + gk);
        *reinterpret_cast<uint4 *>(S + r * LDS + c * CHUNK) = v;
    }
}
// ANCHOR_END: gemm_copy_slice

// ANCHOR: gemm_wmma_slice
// One slice of K for one warp: its FM x FN accumulators += its FM fragments
// of A times its FN fragments of B, 16 of K at a time. Each A fragment read
// from shared memory serves FN products, each B fragment FM: the larger the
// warp's tile, the fewer bytes of shared memory per product.
template <int FM, int FN, int BK, int LDS>
__device__ __forceinline__ void wmma_slice(FragC (&acc)[FM][FN], const bf16 *As, const bf16 *Bs) {
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
        FragA a[FM];
        FragB b[FN];
#pragma unroll
        for (int i = 0; i < FM; i++) wmma::load_matrix_sync(a[i], As + 16 * i * LDS + kk, LDS);
#pragma unroll
        for (int j = 0; j < FN; j++) wmma::load_matrix_sync(b[j], Bs + 16 * j * LDS + kk, LDS);
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
            for (int j = 0; j < FN; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
}
// ANCHOR_END: gemm_wmma_slice

// A warp's accumulators into C at (row0, col0). Where a fragment's
// elements sit among the threads is WMMA's secret, so each goes through the
// warp's own 16 x 16 floats of shared memory first; then lane i writes 8
// values of row i / 2, as pairs that stay inside C.
template <int FM, int FN>
__device__ __forceinline__ void store_wmma_tile(bf16 *C, int M, int N, int row0, int col0,
                                                FragC (&acc)[FM][FN], float *staging) {
    const int lane = threadIdx.x % WARP_SIZE, r = lane / 2, c = (lane % 2) * 8;
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) {
            wmma::store_matrix_sync(staging, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const float *v = staging + r * 16 + c;
#pragma unroll
            for (int e = 0; e < 8; e += 2)
                store_pair(C, M, N, row0 + 16 * i + r, col0 + 16 * j + c + e, v[e], v[e + 1]);
            __syncwarp();  // every lane has read the staging before the next fragment
        }
}

// ANCHOR: gemm_wmma_kernel
// Steps 1 and 2: a BM x BN tile of C per block, WARPS_M x WARPS_N warps
// each computing (BM / WARPS_M) x (BN / WARPS_N) of it.
template <int BM, int BN, int WARPS_M, int WARPS_N>
__global__ void __launch_bounds__(WARPS_M *WARPS_N *WARP_SIZE)
    gemm_wmma_kernel(bf16 *C, const bf16 *A, const bf16 *B, int M, int N, int K) {
    constexpr int THREADS = WARPS_M * WARPS_N * WARP_SIZE;
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, FM = WM / 16, FN = WN / 16;
    static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp's tile is whole fragments");
    __shared__ __align__(128) bf16 As[BM * WMMA_LDS];
    __shared__ __align__(128) bf16 Bs[BN * WMMA_LDS];
    __shared__ __align__(128) float staging[WARPS_M * WARPS_N][16 * 16];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;  // the block's tile of C
    const int warp = threadIdx.x / WARP_SIZE;
    const int wr = (warp / WARPS_N) * WM, wc = (warp % WARPS_N) * WN;  // the warp's, in it
    FragC acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += WMMA_BK) {
        copy_slice<BM, WMMA_BK, WMMA_LDS, THREADS>(As, A, M, K, row0, k0);
        copy_slice<BN, WMMA_BK, WMMA_LDS, THREADS>(Bs, B, N, K, col0, k0);
        __syncthreads();  // the slices are whole before any warp reads them
        wmma_slice<FM, FN, WMMA_BK, WMMA_LDS>(acc, As + wr * WMMA_LDS, Bs + wc * WMMA_LDS);
        __syncthreads();  // every warp is done with them before they are overwritten
    }
    store_wmma_tile(C, M, N, row0 + wr, col0 + wc, acc, staging[warp]);
}
// ANCHOR_END: gemm_wmma_kernel

// ---- step 3: cp.async, slices in flight -------------------------------------------------
// ANCHOR: gemm_copy_slice_async
// copy_slice's copies as cp.async: each thread hands its 16 bytes to the
// memory system and goes on; nothing waits for them until cp_async_wait.
// Outside X the copy reads nothing and writes 16 zero bytes (its source is
// then any valid address: X).
template <int ROWS, int BK, int LDS, int THREADS>
__device__ __forceinline__ void copy_slice_async(bf16 *S, const bf16 *X, int rows, int K, int r0,
                                                 int k0) {
    constexpr int CHUNKS = BK / CHUNK, PASSES = ROWS * CHUNKS / THREADS;
    static_assert(ROWS * CHUNKS % THREADS == 0, "every thread copies as many chunks");
#pragma unroll
    for (int p = 0; p < PASSES; p++) {
        const int i = threadIdx.x + p * THREADS, r = i / CHUNKS, c = i % CHUNKS;
        const int gr = r0 + r, gk = k0 + c * CHUNK;
        const bool inside = gr < rows && gk < K;
        cp_async_16(S + r * LDS + c * CHUNK, inside ? X + (size_t)gr * K + gk : X, inside ? 16 : 0);
    }
}
// ANCHOR_END: gemm_copy_slice_async

// Step 3's kernel: step 2's tiles and warps, STAGES slices of A and B in a
// ring in dynamic shared memory.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__global__ void __launch_bounds__(WARPS_M *WARPS_N *WARP_SIZE)
    gemm_wmma_pipelined_kernel(bf16 *C, const bf16 *A, const bf16 *B, int M, int N, int K) {
    constexpr int THREADS = WARPS_M * WARPS_N * WARP_SIZE;
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, FM = WM / 16, FN = WN / 16;
    static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp's tile is whole fragments");
    static_assert(STAGES >= 2, "a ring of one slice overlaps nothing");
    extern __shared__ __align__(1024) unsigned char gemm_smem[];
    bf16 *As = reinterpret_cast<bf16 *>(gemm_smem), *Bs = As + STAGES * BM * WMMA_LDS;
    __shared__ __align__(128) float staging[WARPS_M * WARPS_N][16 * 16];

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / WARP_SIZE;
    const int wr = (warp / WARPS_N) * WM, wc = (warp % WARPS_N) * WN;
    FragC acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++) wmma::fill_fragment(acc[i][j], 0.0f);

    // ANCHOR: gemm_pipeline
    // Slice t goes to stage t % STAGES. The first STAGES - 1 slices are
    // requested before any product; then each turn waits for slice t,
    // requests slice t + STAGES - 1 into the stage that slice t - 1 has
    // just left, and multiplies slice t. Every turn commits one group of
    // copies, empty or not, so that "all but the last STAGES - 2 groups
    // have landed" always means "slice t has".
    const int slices = (K + WMMA_BK - 1) / WMMA_BK;
    auto request = [&](int t) {
        const int s = t % STAGES;
        copy_slice_async<BM, WMMA_BK, WMMA_LDS, THREADS>(As + s * BM * WMMA_LDS, A, M, K, row0,
                                                         t * WMMA_BK);
        copy_slice_async<BN, WMMA_BK, WMMA_LDS, THREADS>(Bs + s * BN * WMMA_LDS, B, N, K, col0,
                                                         t * WMMA_BK);
    };
#pragma unroll
    for (int t = 0; t < STAGES - 1; t++) {
        if (t < slices) request(t);
        cp_async_commit();
    }
    for (int t = 0; t < slices; t++) {
        cp_async_wait<STAGES - 2>();  // this thread's copies of slice t have landed
        __syncthreads();  // everyone's have, and every warp is done with slice t - 1
        if (t + STAGES - 1 < slices) request(t + STAGES - 1);
        cp_async_commit();
        const int s = t % STAGES;
        wmma_slice<FM, FN, WMMA_BK, WMMA_LDS>(acc, As + (s * BM + wr) * WMMA_LDS,
                                              Bs + (s * BN + wc) * WMMA_LDS);
    }
    cp_async_wait<0>();  // (only empty groups are left: nothing in flight at exit)
    // ANCHOR_END: gemm_pipeline
    store_wmma_tile(C, M, N, row0 + wr, col0 + wc, acc, staging[warp]);
}

// ---- step 4: mma.sync, ldmatrix, a swizzled tile -------------------------------------
// Slices of 64 of K: a row of a tile is 128 bytes, 8 chunks of 16, stored
// unpadded with chunk c of row r at chunk c ^ (r % 8) (tile_offset<64>,
// attention_tiles.cuh; the TMA's 128-byte swizzle, step 5's layout).
constexpr int MMA_BK = 64;

// ANCHOR: gemm_copy_swizzled
// copy_slice_async into a swizzled tile of rows of 64: the chunk's place in
// the row is permuted by the row's number, nothing else changes.
template <int ROWS, int THREADS>
__device__ __forceinline__ void copy_slice_swizzled(bf16 *S, const bf16 *X, int rows, int K,
                                                    int r0, int k0) {
    constexpr int CHUNKS = MMA_BK / CHUNK, PASSES = ROWS * CHUNKS / THREADS;
    static_assert(ROWS * CHUNKS % THREADS == 0, "every thread copies as many chunks");
#pragma unroll
    for (int p = 0; p < PASSES; p++) {
        const int i = threadIdx.x + p * THREADS, r = i / CHUNKS, c = i % CHUNKS;
        const int gr = r0 + r, gk = k0 + c * CHUNK;
        const bool inside = gr < rows && gk < K;
        cp_async_16(S + tile_offset<MMA_BK>(r, c), inside ? X + (size_t)gr * K + gk : X,
                    inside ? 16 : 0);
    }
}
// ANCHOR_END: gemm_copy_swizzled

// ANCHOR: gemm_mma_slice
// One slice of 64 of K for one warp: MT x NT products of m16n8k16 per 16 of
// K. ldmatrix_x4 reads four 8 x 8 matrices: for A, rows 0-7 and 8-15 of the
// m-tile at k 0-7, then at k 8-15 (lane i names row i % 16, chunk i / 16):
// exactly the registers a0..a3 of mma.sync's A. For B, whose tile rows are
// n and columns k, one x4 is two n-tiles' b0 and b1 (lane i names row
// i % 8 + 8 (i / 16), chunk (i / 8) % 2). a_row0 and b_row0: the warp's
// first rows in the tiles.
template <int MT, int NT>
__device__ __forceinline__ void mma_slice(float (&acc)[MT][NT][4], const bf16 *As,
                                          const bf16 *Bs, int a_row0, int b_row0) {
    static_assert(NT % 2 == 0, "ldmatrix_x4 reads B's n-tiles two at a time");
    const int lane = threadIdx.x % WARP_SIZE;
#pragma unroll
    for (int kk = 0; kk < MMA_BK / 16; kk++) {
        uint32_t a[MT][4], b[NT / 2][4];
#pragma unroll
        for (int m = 0; m < MT; m++)
            ldmatrix_x4(a[m], As + tile_offset<MMA_BK>(a_row0 + 16 * m + lane % 16,
                                                       2 * kk + lane / 16));
#pragma unroll
        for (int n = 0; n < NT / 2; n++)
            ldmatrix_x4(b[n], Bs + tile_offset<MMA_BK>(b_row0 + 16 * n + lane % 8 + 8 * (lane / 16),
                                                       2 * kk + (lane / 8) % 2));
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int n = 0; n < NT; n++)
                mma_16816(acc[m][n], a[m], b[n / 2][2 * (n % 2)], b[n / 2][2 * (n % 2) + 1]);
    }
}
// ANCHOR_END: gemm_mma_slice

// ANCHOR: gemm_mma_store
// The accumulators straight from registers: thread 4g + t holds rows g and
// g + 8 of each m-tile, columns 2t and 2t + 1 of each n-tile (mma.cuh).
template <int MT, int NT>
__device__ __forceinline__ void store_mma_tile(bf16 *C, int M, int N, int row0, int col0,
                                               const float (&acc)[MT][NT][4]) {
    const int lane = threadIdx.x % WARP_SIZE, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const int row = row0 + 16 * m + g, col = col0 + 8 * n + 2 * t;
            store_pair(C, M, N, row, col, acc[m][n][0], acc[m][n][1]);
            store_pair(C, M, N, row + 8, col, acc[m][n][2], acc[m][n][3]);
        }
}
// ANCHOR_END: gemm_mma_store

// Step 4's kernel: step 3's block and warps and its ring, of slices of 64.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
__global__ void __launch_bounds__(WARPS_M *WARPS_N *WARP_SIZE)
    gemm_mma_kernel(bf16 *C, const bf16 *A, const bf16 *B, int M, int N, int K) {
    constexpr int THREADS = WARPS_M * WARPS_N * WARP_SIZE;
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, MT = WM / 16, NT = WN / 8;
    static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp's tile is whole m- and n-tile pairs");
    static_assert(STAGES >= 2, "a ring of one slice overlaps nothing");
    extern __shared__ __align__(1024) unsigned char gemm_smem[];
    bf16 *As = reinterpret_cast<bf16 *>(gemm_smem), *Bs = As + STAGES * BM * MMA_BK;

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int warp = threadIdx.x / WARP_SIZE;
    const int wr = (warp / WARPS_N) * WM, wc = (warp % WARPS_N) * WN;
    float acc[MT][NT][4] = {};

    const int slices = (K + MMA_BK - 1) / MMA_BK;
    auto request = [&](int t) {
        const int s = t % STAGES;
        copy_slice_swizzled<BM, THREADS>(As + s * BM * MMA_BK, A, M, K, row0, t * MMA_BK);
        copy_slice_swizzled<BN, THREADS>(Bs + s * BN * MMA_BK, B, N, K, col0, t * MMA_BK);
    };
#pragma unroll
    for (int t = 0; t < STAGES - 1; t++) {
        if (t < slices) request(t);
        cp_async_commit();
    }
    for (int t = 0; t < slices; t++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (t + STAGES - 1 < slices) request(t + STAGES - 1);
        cp_async_commit();
        const int s = t % STAGES;
        mma_slice<MT, NT>(acc, As + s * BM * MMA_BK, Bs + s * BN * MMA_BK, wr, wc);
    }
    cp_async_wait<0>();
    store_mma_tile(C, M, N, row0 + wr, col0 + wc, acc);
}

#ifdef WITH_WGMMA
// ---- steps 5 and 6: wgmma, the TMA, a producer warp -------------------------------------
// A block: two consumer warpgroups of 64 rows each, then one producer warp.
// Slices of 64 of K (rows of 128 bytes, the TMA's 128-byte swizzle, which
// smem_descriptor describes to wgmma). STAGES slices in the ring.
constexpr int WG_THREADS = 128, WG_ROWS = 64, CONSUMERS = 2;
constexpr int WG_BM = CONSUMERS * WG_ROWS, WG_BK = 64, WG_STAGES = 4;
constexpr int WG_BLOCK_THREADS = CONSUMERS * WG_THREADS + WARP_SIZE;

template <int BN>
__host__ __device__ constexpr uint32_t wgmma_stage_bytes() {
    return (WG_BM + BN) * WG_BK * sizeof(bf16);
}
template <int BN>
__host__ __device__ constexpr size_t wgmma_smem_bytes() {
    // the stages, the full and empty barriers, and room to align to 1024
    return WG_STAGES * (size_t)wgmma_stage_bytes<BN>() + 2 * WG_STAGES * sizeof(uint64_t) + 1024;
}

template <int BN>
struct WgmmaSmem {
    bf16 *a, *b;            // WG_STAGES slices of WG_BM x 64, then of BN x 64
    uint64_t *full, *empty; // WG_STAGES each
};

template <int BN>
__device__ __forceinline__ WgmmaSmem<BN> wgmma_smem(unsigned char *raw) {
    WgmmaSmem<BN> sm;
    // the swizzle is computed from address bits: tiles start at multiples of 1024
    sm.a = reinterpret_cast<bf16 *>(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    sm.b = sm.a + WG_STAGES * WG_BM * WG_BK;
    sm.full = reinterpret_cast<uint64_t *>(sm.b + WG_STAGES * BN * WG_BK);
    sm.empty = sm.full + WG_STAGES;
    return sm;
}

// ANCHOR: gemm_producer
// The producer: one thread, which never computes. Slice t of A's rows and
// of B's goes into stage t % WG_STAGES once both warpgroups have released
// the slice that stage held before (t - WG_STAGES); the TMA fills what lies
// past M, N or K with zeros and counts the whole box's bytes on full[s].
template <int BN>
__device__ __forceinline__ void produce_slices(const WgmmaSmem<BN> &sm, const CUtensorMap *a_map,
                                               const CUtensorMap *b_map, int row0, int col0,
                                               int slices) {
    for (int t = 0; t < slices; t++) {
        const int s = t % WG_STAGES;
        if (t >= WG_STAGES) mbarrier_wait(&sm.empty[s], (t / WG_STAGES - 1) & 1);
        mbarrier_arrive_expect_tx(&sm.full[s], wgmma_stage_bytes<BN>());
        tma_load_2d(sm.a + s * WG_BM * WG_BK, a_map, t * WG_BK, row0, &sm.full[s]);
        tma_load_2d(sm.b + s * BN * WG_BK, b_map, t * WG_BK, col0, &sm.full[s]);
    }
}
// ANCHOR_END: gemm_producer

// ANCHOR: gemm_consumer
// A consumer warpgroup: its 64 rows of A times all BN rows of B, slice by
// slice as they land: four steps of 16 of K each, every product issued
// before any is waited for. Step 5 (BN = 128) issues two 64 x 64 products
// per step, step 6 (BN = 256) one 64 x 256: the same sums, A's bytes read
// once instead of twice (or four times). Then the stage goes back to the
// producer.
template <int BN>
__device__ __forceinline__ void consume_slices(float (&acc)[BN / 64][8][4], const WgmmaSmem<BN> &sm,
                                               int group, int slices) {
    for (int t = 0; t < slices; t++) {
        const int s = t % WG_STAGES;
        mbarrier_wait(&sm.full[s], (t / WG_STAGES) & 1);
        const uint64_t a = smem_descriptor(sm.a + (s * WG_BM + group * WG_ROWS) * WG_BK);
        const bf16 *b = sm.b + s * BN * WG_BK;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < WG_BK / 16; kk++) {
            if constexpr (BN == 256) {
                wgmma_64x256_smem(acc, a + DESC_K_STEP * kk, smem_descriptor(b) + DESC_K_STEP * kk);
            } else {
#pragma unroll
                for (int q = 0; q < BN / 64; q++)
                    wgmma_64x64_smem(acc[q], a + DESC_K_STEP * kk,
                                     smem_descriptor(b + q * 64 * WG_BK) + DESC_K_STEP * kk);
            }
        }
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int q = 0; q < BN / 64; q++) wgmma_fence_operands(acc[q]);
        mbarrier_arrive(&sm.empty[s]);  // every consumer thread: its reads are done
    }
}
// ANCHOR_END: gemm_consumer

// A warpgroup's 64 x BN accumulators into C: warp w of the group holds rows
// 16w..16w+15, in mma.sync's layout (wgmma.cuh), as store_mma_tile's warps do.
template <int BN>
__device__ __forceinline__ void store_warpgroup_tile(bf16 *C, int M, int N, int row0, int col0,
                                                     const float (&acc)[BN / 64][8][4]) {
    const int warp = (threadIdx.x % WG_THREADS) / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int row = row0 + 16 * warp + lane / 4, t = lane % 4;
#pragma unroll
    for (int q = 0; q < BN / 64; q++)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int col = col0 + 64 * q + 8 * j + 2 * t;
            store_pair(C, M, N, row, col, acc[q][j][0], acc[q][j][1]);
            store_pair(C, M, N, row + 8, col, acc[q][j][2], acc[q][j][3]);
        }
}

// ANCHOR: gemm_wgmma_kernel
template <int BN>
__global__ void __launch_bounds__(WG_BLOCK_THREADS, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap a_map,
                      const __grid_constant__ CUtensorMap b_map, bf16 *C, int M, int N, int K) {
    static_assert(BN == 128 || BN == 256, "step 5's 2 x 64 x 64 or step 6's 64 x 256 per group");
    extern __shared__ __align__(1024) unsigned char gemm_smem[];
    const WgmmaSmem<BN> sm = wgmma_smem<BN>(gemm_smem);
    const int row0 = blockIdx.y * WG_BM, col0 = blockIdx.x * BN;
    const int slices = (K + WG_BK - 1) / WG_BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < WG_STAGES; s++) {
            mbarrier_init(&sm.full[s], 1);                         // the producer's arrival
            mbarrier_init(&sm.empty[s], CONSUMERS * WG_THREADS);  // every consumer thread's
        }
        mbarrier_init_fence();
    }
    __syncthreads();  // the last block-wide barrier: from here on, mbarriers only

    const int group = threadIdx.x / WG_THREADS;
    if (group == CONSUMERS) {  // the producer warp: one thread of it
        if (threadIdx.x % WARP_SIZE == 0) produce_slices<BN>(sm, &a_map, &b_map, row0, col0, slices);
        return;
    }
    float acc[BN / 64][8][4] = {};
    consume_slices<BN>(acc, sm, group, slices);
    store_warpgroup_tile<BN>(C, M, N, row0 + group * WG_ROWS, col0, acc);
}
// ANCHOR_END: gemm_wgmma_kernel
#endif  // WITH_WGMMA

}  // namespace

// ---- the launchers -----------------------------------------------------------------------
template <int BM, int BN, int WARPS_M, int WARPS_N>
static void launch_wmma(const GpuContext *ctx, bf16 *C, const bf16 *A, const bf16 *B, int M,
                        int N, int K) {
    const dim3 grid(blocks_for(N, BN), blocks_for(M, BM));
    gemm_wmma_kernel<BM, BN, WARPS_M, WARPS_N>
        <<<grid, WARPS_M * WARPS_N * WARP_SIZE, 0, ctx->stream>>>(C, A, B, M, N, K);
    gpu_check_launch(ctx, "gemm_wmma_kernel");
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
static void launch_wmma_pipelined(const GpuContext *ctx, bf16 *C, const bf16 *A, const bf16 *B,
                                  int M, int N, int K) {
    auto kernel = gemm_wmma_pipelined_kernel<BM, BN, WARPS_M, WARPS_N, STAGES>;
    const size_t smem = (size_t)STAGES * (BM + BN) * WMMA_LDS * sizeof(bf16);
    allow_shared_memory(kernel, smem);
    const dim3 grid(blocks_for(N, BN), blocks_for(M, BM));
    kernel<<<grid, WARPS_M * WARPS_N * WARP_SIZE, smem, ctx->stream>>>(C, A, B, M, N, K);
    gpu_check_launch(ctx, "gemm_wmma_pipelined_kernel");
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
static void launch_mma(const GpuContext *ctx, bf16 *C, const bf16 *A, const bf16 *B, int M, int N,
                       int K) {
    auto kernel = gemm_mma_kernel<BM, BN, WARPS_M, WARPS_N, STAGES>;
    const size_t smem = (size_t)STAGES * (BM + BN) * MMA_BK * sizeof(bf16);
    allow_shared_memory(kernel, smem);
    const dim3 grid(blocks_for(N, BN), blocks_for(M, BM));
    kernel<<<grid, WARPS_M * WARPS_N * WARP_SIZE, smem, ctx->stream>>>(C, A, B, M, N, K);
    gpu_check_launch(ctx, "gemm_mma_kernel");
}

#ifdef WITH_WGMMA
// ANCHOR: gemm_matrix_map
// A (rows, K) bf16 matrix, row-major, for the TMA: boxes of box_rows rows x
// 64 columns, each row of a box one 128-byte line of the swizzle. Rows at
// or past `rows` and columns at or past K arrive as zeros.
static CUtensorMap matrix_map(const bf16 *X, int rows, int K, int box_rows, const char *who) {
    CUtensorMap map;
    const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)K * sizeof(bf16)};  // a multiple of 16: K % 8 == 0
    const cuuint32_t box[2] = {WG_BK, (cuuint32_t)box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult r = tensor_map_encoder()(
        &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)X, dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        die("%s: cuTensorMapEncodeTiled refused a %d x %d matrix (CUresult %d)", who, rows, K,
            (int)r);
    return map;
}
// ANCHOR_END: gemm_matrix_map

template <int BN>
static void launch_wgmma(const GpuContext *ctx, bf16 *C, const bf16 *A, const bf16 *B, int M,
                         int N, int K) {
    const char *name = "gemm_wgmma_kernel";
    const CUtensorMap a_map = matrix_map(A, M, K, WG_BM, name);
    const CUtensorMap b_map = matrix_map(B, N, K, BN, name);
    auto kernel = gemm_wgmma_kernel<BN>;
    allow_shared_memory(kernel, wgmma_smem_bytes<BN>());
    const dim3 grid(blocks_for(N, BN), blocks_for(M, WG_BM));
    kernel<<<grid, WG_BLOCK_THREADS, wgmma_smem_bytes<BN>(), ctx->stream>>>(a_map, b_map, C, M,
                                                                            N, K);
    gpu_check_launch(ctx, name);
}
#endif

// What gemm_steps.h promises to check, with the reason when it fails.
static void check_operands(const GpuContext *ctx, int step, const void *C, const void *A,
                           const void *B, int M, int N, int K) {
    if (step < 1 || step > GEMM_STEPS) die("gemm_step: step %d, not 1..%d", step, GEMM_STEPS);
    if (M < 1 || N < 1 || K < 1 || K % CHUNK != 0)
        die("gemm_step %d: M=%d, N=%d, K=%d: needs M, N >= 1 and K a positive multiple of 8 "
            "(every copy moves 16 bytes of a row)", step, M, N, K);
    if ((uintptr_t)A % 16 || (uintptr_t)B % 16 || (uintptr_t)C % 16)
        die("gemm_step %d: A, B and C must be 16-byte aligned", step);
    if (blocks_for(M, 64) > 65535)
        die("gemm_step %d: M=%d is more tiles of rows than a grid's 65535", step, M);
    if (gemm_step_needs_hopper(step) && !ctx->hopper)
        die("gemm_step %d: wgmma and the TMA run on compute capability 9.0 only (H100, H200), "
            "in a build for it (GPU_ARCH=90), without GPT2_PORTABLE_KERNELS=1", step);
}

// ANCHOR: gemm_steps_launch
extern "C" void gemm_step(const GpuContext *ctx, int step, floatX *C, const floatX *A,
                          const floatX *B, int M, int N, int K) {
    check_operands(ctx, step, C, A, B, M, N, K);
    switch (step) {
    case 1: launch_wmma<64, 64, 2, 2>(ctx, C, A, B, M, N, K); break;
    case 2: launch_wmma<128, 128, 2, 4>(ctx, C, A, B, M, N, K); break;
    case 3: launch_wmma_pipelined<128, 128, 2, 4, 4>(ctx, C, A, B, M, N, K); break;
    case 4: launch_mma<128, 128, 2, 4, 3>(ctx, C, A, B, M, N, K); break;
#ifdef WITH_WGMMA
    case 5: launch_wgmma<128>(ctx, C, A, B, M, N, K); break;
    case 6: launch_wgmma<256>(ctx, C, A, B, M, N, K); break;
#endif
    default: die("gemm_step %d: not in this build", step);  // (check_operands stopped it first)
    }
}
// ANCHOR_END: gemm_steps_launch

#else  // the fp32 build

extern "C" void gemm_step(const GpuContext *ctx, int step, floatX *C, const floatX *A,
                          const floatX *B, int M, int N, int K) {
    (void)ctx, (void)C, (void)A, (void)B, (void)M, (void)N, (void)K;
    die("gemm_step %d: appendix E's GEMM multiplies bf16 operands: the bf16 build's "
        "(build/kernel_lab_bf16)", step);
}

#endif
