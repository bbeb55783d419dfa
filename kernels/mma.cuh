// mma.cuh: the tensor-core building blocks of chapter 05's flash attention,
// for the .cu files of the bf16 build only. Each is one PTX instruction
// (sm_80 and later; the H100 runs them all):
//
//   cp_async_16      16 bytes global -> shared, without passing through
//                    registers, so the next tile loads while this one is used
//                    (cp_async_4: 4 bytes)
//   ldmatrix_x4      four 8x8 bf16 matrices shared -> registers, laid out as
//                    the tensor cores' fragments want them (.trans: transposed)
//   mma_16816        D (16x8, fp32) += A (16x16, bf16) B (16x8, bf16), one warp
//
// The fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for
// mma.m16n8k16"), for lane = 4 * g + t (g = lane / 4 in 0..7, t = lane % 4):
//   A, 4 registers of 2 bf16:  a0 = A[g][2t, 2t+1]     a1 = A[g+8][2t, 2t+1]
//                              a2 = A[g][2t+8, 2t+9]   a3 = A[g+8][2t+8, 2t+9]
//   B, 2 registers of 2 bf16:  b0 = B[2t, 2t+1][g]     b1 = B[2t+8, 2t+9][g]
//   C and D, 4 floats:         c0, c1 = C[g][2t, 2t+1] c2, c3 = C[g+8][2t, 2t+1]
// Two facts make flash attention's inner loop work without shared memory:
//   - an accumulator of 16x8 and the next one, 16x16 together, hold exactly
//     the elements of an A fragment of 16x16 (pack_bf16 converts them): the
//     probabilities P = softmax(Q K^T) go from one GEMM's output to the next
//     GEMM's input in registers;
//   - ldmatrix gives thread `lane` row lane/4, columns 2(lane%4) and +1, of
//     each 8x8 matrix: the A and B layouts above. With .trans it gives the
//     transposed matrix, so a tile stored row-major serves as B both ways.
#ifndef MMA_CUH
#define MMA_CUH

#include <cuda_bf16.h>
#include <stdint.h>

// ---- asynchronous copies ----------------------------------------------------
// 16 bytes from global `src` to shared `dst`; with src_bytes = 0 nothing is
// read and the 16 bytes are zero-filled (rows past the end of a sequence).
__device__ __forceinline__ void cp_async_16(void *dst, const void *src, int src_bytes) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
                 "r"(src_bytes));
}

// 4 bytes (.ca: the sizes under 16 go through L1), zero-filled likewise.
__device__ __forceinline__ void cp_async_4(void *dst, const void *src, int src_bytes) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src),
                 "r"(src_bytes));
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `pending` groups of this thread's copies are in flight.
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

// ---- shared memory -> fragments ---------------------------------------------
// Thread i gives the address of row i % 8 of matrix i / 8; register j gets
// matrix j.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *row) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void *row) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

// ---- the tensor cores -------------------------------------------------------
// d += a b: bf16 products, added in fp32.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as the two bf16 halves of a register, each rounded to nearest
// even: `lo` in the low half (the lower column of a fragment).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

#endif
