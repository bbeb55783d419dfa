// wgmma.cuh: Hopper's warpgroup matrix multiply, for .cu files built for
// sm_90a (the "a" target: these instructions exist on the H100 and H200 and
// on no other GPU). Chapter 05's second flash attention
// (attention_flash_hopper.cu) is made of them.
//
// mma.sync (mma.cuh) is a warp's instruction: 32 threads multiply 16x16 by
// 16x8 with both operands in their registers, which someone had to load
// from shared memory first (ldmatrix), and the warp waits for the result.
// wgmma is a warpgroup's: 4 consecutive warps, 128 threads, multiply 64x16
// by 16xN in one instruction, reading B (and A, if asked) straight from
// shared memory through a descriptor, and the instruction returns at once:
// the product runs on the tensor cores while the threads go on, until they
// wait for it. Chapter 05's attention runs 1.2 (forward) to 1.4 (backward)
// times faster on it than on mma.sync (results/h100/attention_sweep.csv).
//
// The result D (64xN, fp32) is spread over the warpgroup as mma.sync's
// accumulators are over a warp: warp w of the group holds rows 16w..16w+15,
// each thread 2 rows x 2 columns of every 8-column n-tile (mma.cuh). A held
// in registers has mma.sync's A layout, per warp, for its 16 rows.
//
// The sequence, every time:
//   wgmma_fence();            the registers the products read and write are ready
//   wgmma_...(...); ...       issue (asynchronous)
//   wgmma_commit();           close the group of products just issued
//   wgmma_wait<0>();          wait until no group is in flight
// and, before products read shared memory that the threads wrote (cp.async
// included), fence_proxy_async() in each writing thread, then a barrier:
// the tensor cores read shared memory through another path (the "async
// proxy") than the threads' loads and stores, and the fence orders the two.
#ifndef WGMMA_CUH
#define WGMMA_CUH

#include <stdint.h>

// The descriptor of a tile of rows of 64 bf16 (128 bytes) in shared memory,
// stored as attention_tiles.cuh's tiles are: 16-byte chunk c of row r at
// chunk c ^ (r % 8), which is the tensor cores' "128-byte swizzle", from an
// address that is a multiple of 1024 bytes (the swizzle is computed from the
// address bits). The fields, in units of 16 bytes:
//   bits  0-13  the tile's address
//   bits 16-29  leading byte offset: unused in these layouts, 1 by convention
//   bits 32-45  stride byte offset: 1024, from one group of 8 rows to the next
//   bits 62-63  1: the 128-byte swizzle
// Used two ways (wgmma's "major-ness"):
//   - K-major: the tile's rows are the M or N index, its 64 columns the K
//     index (Q, K, V, dO as the left or as the transposed right factor: S =
//     Q K^T). The product's 16 values of K are 32 bytes of each row: the
//     k-th step starts 32k bytes into the tile, DESC_K_STEP * k added to the
//     descriptor (its address is in units of 16 bytes, in the low bits).
//   - MN-major (imm-trans-b = 1): the tile's rows are the K index, its
//     columns N (V in P V, dO in P^T dO). The k-th step of 16 rows starts
//     16k rows, 2048k bytes, into the tile: DESC_MN_STEP * k.
#define DESC_K_STEP (32 >> 4)
#define DESC_MN_STEP (2048 >> 4)

__device__ __forceinline__ uint64_t smem_descriptor(const void *tile) {
    const uint32_t address = (uint32_t)__cvta_generic_to_shared(tile);
    return (uint64_t)((address & 0x3FFFF) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}

__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int pending>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}

// The 32 accumulators of a 64x64 product, per thread: 8 n-tiles of 4.
#define WGMMA_D(d)                                                                             \
    "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), \
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]),              \
        "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),              \
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),              \
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]),              \
        "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define WGMMA_D_LIST                                                                        \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

// The same 32, written only: the first product of a sum.
#define WGMMA_D_OUT(d)                                                                         \
    "=f"(d[0][0]), "=f"(d[0][1]), "=f"(d[0][2]), "=f"(d[0][3]), "=f"(d[1][0]), "=f"(d[1][1]), \
        "=f"(d[1][2]), "=f"(d[1][3]), "=f"(d[2][0]), "=f"(d[2][1]), "=f"(d[2][2]),              \
        "=f"(d[2][3]), "=f"(d[3][0]), "=f"(d[3][1]), "=f"(d[3][2]), "=f"(d[3][3]),              \
        "=f"(d[4][0]), "=f"(d[4][1]), "=f"(d[4][2]), "=f"(d[4][3]), "=f"(d[5][0]),              \
        "=f"(d[5][1]), "=f"(d[5][2]), "=f"(d[5][3]), "=f"(d[6][0]), "=f"(d[6][1]),              \
        "=f"(d[6][2]), "=f"(d[6][3]), "=f"(d[7][0]), "=f"(d[7][1]), "=f"(d[7][2]), "=f"(d[7][3])

// d (64x64) = a b, a (64x16) and b (16x64) both K-major tiles in shared
// memory, by descriptor. (The predicate scale-d, false, says: do not add d.)
__device__ __forceinline__ void wgmma_64x64_smem_first(float (&d)[8][4], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D_LIST
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : WGMMA_D_OUT(d)
        : "l"(a), "l"(b), "r"(0));
}

// d (64x64) += a b, the same operands.
__device__ __forceinline__ void wgmma_64x64_smem(float (&d)[8][4], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D_LIST
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : WGMMA_D(d)
        : "l"(a), "l"(b), "r"(1));
}

// d (64x64) += a b, a (64x16) in registers (each warp its 16 rows, in
// mma.sync's A layout), b (16x64) an MN-major tile in shared memory.
__device__ __forceinline__ void wgmma_64x64_regs(float (&d)[8][4], const uint32_t (&a)[4],
                                                 uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D_LIST
        ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : WGMMA_D(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// d (64x64) = a b (accumulate 0) or d += a b (1), a (64x16) and b (16x64)
// both MN-major tiles in shared memory: each tile's rows are the sum's
// index, 16 of them per step (DESC_MN_STEP). Chapter 12's dQ = dS K reads dS
// this way from the tile of dS^T that the warpgroups wrote.
__device__ __forceinline__ void wgmma_64x64_smem_mn(float (&d)[8][4], uint64_t a, uint64_t b,
                                                    int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D_LIST
        ", %32, %33, p, 1, 1, 1, 1;\n}\n"
        : WGMMA_D(d)
        : "l"(a), "l"(b), "r"(accumulate));
}

// The 64 accumulators of a 64x128 product, per thread: 16 n-tiles of 4, laid
// out as the 64x64 product's 8 (chapter 12's tiles of 128 keys). c is the
// constraint: "+f" to add to them, "=f" to write them only.
#define WGMMA_D128(c, d) \
    c(d[0][0]), c(d[0][1]), c(d[0][2]), c(d[0][3]), c(d[1][0]), c(d[1][1]),                    \
    c(d[1][2]), c(d[1][3]), c(d[2][0]), c(d[2][1]), c(d[2][2]), c(d[2][3]),                    \
    c(d[3][0]), c(d[3][1]), c(d[3][2]), c(d[3][3]), c(d[4][0]), c(d[4][1]),                    \
    c(d[4][2]), c(d[4][3]), c(d[5][0]), c(d[5][1]), c(d[5][2]), c(d[5][3]),                    \
    c(d[6][0]), c(d[6][1]), c(d[6][2]), c(d[6][3]), c(d[7][0]), c(d[7][1]),                    \
    c(d[7][2]), c(d[7][3]), c(d[8][0]), c(d[8][1]), c(d[8][2]), c(d[8][3]),                    \
    c(d[9][0]), c(d[9][1]), c(d[9][2]), c(d[9][3]), c(d[10][0]), c(d[10][1]),                  \
    c(d[10][2]), c(d[10][3]), c(d[11][0]), c(d[11][1]), c(d[11][2]), c(d[11][3]),              \
    c(d[12][0]), c(d[12][1]), c(d[12][2]), c(d[12][3]), c(d[13][0]), c(d[13][1]),              \
    c(d[13][2]), c(d[13][3]), c(d[14][0]), c(d[14][1]), c(d[14][2]), c(d[14][3]),              \
    c(d[15][0]), c(d[15][1]), c(d[15][2]), c(d[15][3])
#define WGMMA_D128_LIST \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// d (64x128) = a b (accumulate 0) or d += a b (1), a (64x16) and b (16x128)
// K-major tiles in shared memory, by descriptor: S = Q K^T for 128 keys at
// once, Q's 2 KB of each step read once for all of them.
__device__ __forceinline__ void wgmma_64x128_smem_first(float (&d)[16][4], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_D128_LIST
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : WGMMA_D128("=f", d)
        : "l"(a), "l"(b), "r"(0));
}

__device__ __forceinline__ void wgmma_64x128_smem(float (&d)[16][4], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_D128_LIST
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : WGMMA_D128("+f", d)
        : "l"(a), "l"(b), "r"(1));
}

// The 128 accumulators of a 64x256 product, per thread (wgmma_64x256_smem).
#define WGMMA_D256(d)                                                      \
    "+f"(d[0][0][0]), "+f"(d[0][0][1]), "+f"(d[0][0][2]), "+f"(d[0][0][3]), \
    "+f"(d[0][1][0]), "+f"(d[0][1][1]), "+f"(d[0][1][2]), "+f"(d[0][1][3]), \
    "+f"(d[0][2][0]), "+f"(d[0][2][1]), "+f"(d[0][2][2]), "+f"(d[0][2][3]), \
    "+f"(d[0][3][0]), "+f"(d[0][3][1]), "+f"(d[0][3][2]), "+f"(d[0][3][3]), \
    "+f"(d[0][4][0]), "+f"(d[0][4][1]), "+f"(d[0][4][2]), "+f"(d[0][4][3]), \
    "+f"(d[0][5][0]), "+f"(d[0][5][1]), "+f"(d[0][5][2]), "+f"(d[0][5][3]), \
    "+f"(d[0][6][0]), "+f"(d[0][6][1]), "+f"(d[0][6][2]), "+f"(d[0][6][3]), \
    "+f"(d[0][7][0]), "+f"(d[0][7][1]), "+f"(d[0][7][2]), "+f"(d[0][7][3]), \
    "+f"(d[1][0][0]), "+f"(d[1][0][1]), "+f"(d[1][0][2]), "+f"(d[1][0][3]), \
    "+f"(d[1][1][0]), "+f"(d[1][1][1]), "+f"(d[1][1][2]), "+f"(d[1][1][3]), \
    "+f"(d[1][2][0]), "+f"(d[1][2][1]), "+f"(d[1][2][2]), "+f"(d[1][2][3]), \
    "+f"(d[1][3][0]), "+f"(d[1][3][1]), "+f"(d[1][3][2]), "+f"(d[1][3][3]), \
    "+f"(d[1][4][0]), "+f"(d[1][4][1]), "+f"(d[1][4][2]), "+f"(d[1][4][3]), \
    "+f"(d[1][5][0]), "+f"(d[1][5][1]), "+f"(d[1][5][2]), "+f"(d[1][5][3]), \
    "+f"(d[1][6][0]), "+f"(d[1][6][1]), "+f"(d[1][6][2]), "+f"(d[1][6][3]), \
    "+f"(d[1][7][0]), "+f"(d[1][7][1]), "+f"(d[1][7][2]), "+f"(d[1][7][3]), \
    "+f"(d[2][0][0]), "+f"(d[2][0][1]), "+f"(d[2][0][2]), "+f"(d[2][0][3]), \
    "+f"(d[2][1][0]), "+f"(d[2][1][1]), "+f"(d[2][1][2]), "+f"(d[2][1][3]), \
    "+f"(d[2][2][0]), "+f"(d[2][2][1]), "+f"(d[2][2][2]), "+f"(d[2][2][3]), \
    "+f"(d[2][3][0]), "+f"(d[2][3][1]), "+f"(d[2][3][2]), "+f"(d[2][3][3]), \
    "+f"(d[2][4][0]), "+f"(d[2][4][1]), "+f"(d[2][4][2]), "+f"(d[2][4][3]), \
    "+f"(d[2][5][0]), "+f"(d[2][5][1]), "+f"(d[2][5][2]), "+f"(d[2][5][3]), \
    "+f"(d[2][6][0]), "+f"(d[2][6][1]), "+f"(d[2][6][2]), "+f"(d[2][6][3]), \
    "+f"(d[2][7][0]), "+f"(d[2][7][1]), "+f"(d[2][7][2]), "+f"(d[2][7][3]), \
    "+f"(d[3][0][0]), "+f"(d[3][0][1]), "+f"(d[3][0][2]), "+f"(d[3][0][3]), \
    "+f"(d[3][1][0]), "+f"(d[3][1][1]), "+f"(d[3][1][2]), "+f"(d[3][1][3]), \
    "+f"(d[3][2][0]), "+f"(d[3][2][1]), "+f"(d[3][2][2]), "+f"(d[3][2][3]), \
    "+f"(d[3][3][0]), "+f"(d[3][3][1]), "+f"(d[3][3][2]), "+f"(d[3][3][3]), \
    "+f"(d[3][4][0]), "+f"(d[3][4][1]), "+f"(d[3][4][2]), "+f"(d[3][4][3]), \
    "+f"(d[3][5][0]), "+f"(d[3][5][1]), "+f"(d[3][5][2]), "+f"(d[3][5][3]), \
    "+f"(d[3][6][0]), "+f"(d[3][6][1]), "+f"(d[3][6][2]), "+f"(d[3][6][3]), \
    "+f"(d[3][7][0]), "+f"(d[3][7][1]), "+f"(d[3][7][2]), "+f"(d[3][7][3])
#define WGMMA_D256_LIST                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "      \
    "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "       \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "       \
    "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "       \
    "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, "       \
    "%77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "       \
    "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, "      \
    "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, "    \
    "%119, %120, %121, %122, %123, %124, %125, %126, %127}"

// ANCHOR: wgmma_64x256
// d (64x256) += a b, a (64x16) and b (16x256) K-major tiles in shared memory,
// by descriptor: appendix E's widest product. Per slice of 16 of K it reads
// A's 2 KB once for 256 columns, where four products of 64x64 read it four
// times. The accumulators are four 64x64 ones side by side: d[q] holds
// columns 64q..64q+63, laid out as wgmma_64x64_smem's d.
__device__ __forceinline__ void wgmma_64x256_smem(float (&d)[4][8][4], uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WGMMA_D256_LIST
        ", %128, %129, p, 1, 1, 0, 0;\n}\n"
        : WGMMA_D256(d)
        : "l"(a), "l"(b), "r"(1));
}
// ANCHOR_END: wgmma_64x256

// After a wait, the accumulators are read and written by ordinary code. The
// compiler does not know that the asynchronous product wrote them at the
// wait, and could move that code above it; this empty statement "writes"
// each of them after the wait, so it cannot.
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+f"(d[i][j])::"memory");
}

#endif
