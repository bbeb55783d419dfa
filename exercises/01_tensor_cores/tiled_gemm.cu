// GENERATED from solutions/01_tensor_cores/tiled_gemm.cu by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 01_tensor_cores); what to do and
// how to test it: exercises/01_tensor_cores/README.md.
// tiled_gemm.cu: chapter 01's exercise, a tiled GEMM on the TF32 tensor cores
// through WMMA (declared, with its conventions, in kernels/tiled_gemm.h).
// solutions/01_tensor_cores/ has it complete; exercises/01_tensor_cores/ has
// the tensor-core part, the fragment loads and the mma loop, cut out.
//
// C (M,N) = A (M,K) @ B^T, with B (N,K): every matrix row-major, as matmul.h.
//
// One block of 4 warps computes a 64 x 64 tile of C. It walks along K in
// steps of 32: the 4 warps copy a 64 x 32 slice of A and a 64 x 32 slice of B
// into shared memory (zeros wherever the slice sticks out of the matrix), and
// then each warp multiplies its 32 x 32 quarter of the tile as 2 x 2 tensor-core
// tiles of 16 x 16, 8 values of K at a time. At the end the accumulators go
// through shared memory so that only the elements inside C are written.
#include <mma.h>

#include "exercise.h"
#include "reduce.cuh"
#include "tiled_gemm.h"

using namespace nvcuda;

#define TG_TILE 64                 // rows and columns of C per block
#define TG_BK 32                   // values of K per shared-memory slice
#define TG_WM 32                   // rows of C per warp (2 fragments of 16)
#define TG_WN 32                   // columns of C per warp (2 fragments of 16)
#define TG_THREADS 128             // 4 warps, as a 2 x 2 grid over the block's tile
// Shared rows are padded by 4 floats (16 bytes): WMMA wants a leading dimension
// that is a multiple of 4 floats and fragment pointers 32-byte aligned (both
// hold), and the padding shifts consecutive rows across the memory banks.
#define TG_LDS (TG_BK + 4)         // leading dimension of the A and B slices
#define TG_LDC (TG_TILE + 4)       // leading dimension of the C tile

// ANCHOR: wmma_fragments
// The WMMA shape of TF32: a 16 x 8 piece of A times an 8 x 16 piece of B^T
// added into a 16 x 16 fp32 accumulator, by the 32 threads of a warp together.
// B's slice is stored as rows of K (Bs[n][k]), which is B^T in column-major:
// hence matrix_b, col_major.
typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> FragB;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> FragC;
// ANCHOR_END: wmma_fragments

// Rows r0 .. r0+TG_TILE-1, columns k0 .. k0+31 of X (rows x K, row-major) into S,
// by the whole block: consecutive threads read consecutive k, so each warp
// reads one 128-byte row segment at a time. Outside X: 0, which adds nothing
// to any sum.
__device__ void load_slice(float (*S)[TG_LDS], const float *X, int rows, int K, int r0, int k0) {
    for (int e = threadIdx.x; e < TG_TILE * TG_BK; e += TG_THREADS) {
        const int r = e / TG_BK, k = e % TG_BK, gr = r0 + r, gk = k0 + k;
        S[r][k] = gr < rows && gk < K ? X[(size_t)gr * K + gk] : 0.0f;
    }
}

__global__ void __launch_bounds__(TG_THREADS)
    tiled_gemm_tf32_kernel(float *C, const float *A, const float *B, int M, int N, int K) {
    __shared__ __align__(32) float As[TG_TILE][TG_LDS];
    __shared__ __align__(32) float Bs[TG_TILE][TG_LDS];
    __shared__ __align__(32) float Cs[TG_TILE][TG_LDC];

    const int row0 = blockIdx.y * TG_TILE, col0 = blockIdx.x * TG_TILE;  // the block's tile of C
    const int warp = threadIdx.x / WARP_SIZE;
    const int warp_row = (warp / 2) * TG_WM, warp_col = (warp % 2) * TG_WN;  // in the tile

    FragC acc[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += TG_BK) {
        load_slice(As, A, M, K, row0, k0);  // A[row0 .. row0+63][k0 .. k0+31]
        load_slice(Bs, B, N, K, col0, k0);  // B[col0 .. col0+63][k0 .. k0+31]
        __syncthreads();  // the slices are complete before any warp reads them

        // TODO(exercise 01_tensor_cores): per 8 of K: load 2 A and 2 B fragments, round them (wmma::__float_to_tf32), mma_sync into acc
        // Replace this stub, which makes the tests fail, with your code.
        exercise_fill_nan(C, (size_t)M * N);
        return;
        __syncthreads();  // every warp is done with the slices before they are overwritten
    }

    // A fragment's elements sit in its threads' registers in an unspecified
    // layout, and store_matrix_sync writes all 16 x 16 of them: through shared
    // memory, then only the elements inside C, row by row (coalesced).
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(&Cs[warp_row + 16 * i][warp_col + 16 * j], acc[i][j], TG_LDC,
                                    wmma::mem_row_major);
    __syncthreads();
    for (int e = threadIdx.x; e < TG_TILE * TG_TILE; e += TG_THREADS) {
        const int r = e / TG_TILE, c = e % TG_TILE;
        if (row0 + r < M && col0 + c < N) C[(size_t)(row0 + r) * N + col0 + c] = Cs[r][c];
    }
}

extern "C" void tiled_gemm_tf32(const GpuContext *ctx, float *C, const float *A, const float *B,
                                int M, int N, int K) {
    // TODO(exercise 01_tensor_cores): delete this call once the code above is written.
    exercise_unfinished("01_tensor_cores", "tiled TF32 GEMM",
                        "per 8 of K: load 2 A and 2 B fragments, round them (wmma::__float_to_tf32), mma_sync into acc");
    const dim3 grid(blocks_for(N, TG_TILE), blocks_for(M, TG_TILE));
    tiled_gemm_tf32_kernel<<<grid, TG_THREADS, 0, ctx->stream>>>(C, A, B, M, N, K);
    gpu_check_launch(ctx, "tiled_gemm_tf32_kernel");
}
