// fp8.cu: see fp8.h.
//
// One kernel does every cast: a block takes a tile of FP8_CAST_TILE x
// FP8_CAST_TILE values, reads it once in 16-byte vectors, computes the value
// to cast (a copy, GELU, or GELU's gradient), and writes it in FP8 twice: in
// rows, as it came, and through shared memory in columns, the transpose that
// the backward pass's products need (Hopper's FP8 GEMMs read both operands
// K-major: matmul_lt.cu). A bf16 value read (2 bytes) becomes 2 bytes written,
// so the cast moves 4 bytes a value, and a GEMM that follows reads 1 where
// bf16's read 2. With a bias gradient to take, the same pass adds the
// columns too (fp8.h: col_partials).
#include <math.h>

#include "fp8.cuh"
#include "fp8.h"
#include "reduce.cuh"
#include "util/util.h"

// ANCHOR: scale_for_amax
// The power of two that brings amax to at most the format's largest value:
// 2^ceil(log2(amax / max)). frexp splits amax / max exactly into m * 2^e with
// m in [0.5, 1); m = 0.5 means it is a power of two already.
__host__ __device__ static float scale_for(float amax, float format_max) {
    int e;
    const float m = frexpf(amax / format_max, &e);
    return ldexpf(1.0f, m == 0.5f ? e - 1 : e);
}
// ANCHOR_END: scale_for_amax

__host__ __device__ static float max_of(int format) {
    return format == GEMM_E5M2 ? FP8_E5M2_MAX : FP8_E4M3_MAX;
}

extern "C" float fp8_format_max(GemmPrecision format) { return max_of(format); }
extern "C" float fp8_scale_for_amax(float amax, GemmPrecision format) {
    return scale_for(amax, max_of(format));
}

static_assert(sizeof(Fp8Meta) % 16 == 0, "every Fp8Meta's scale 16-byte aligned in an array");

#ifdef PRECISION_BF16  // the casts read bf16: chapter 13 is a chapter of the bf16 build

#define TILE FP8_CAST_TILE
#define THREADS 128
#define ROW_VECTORS (TILE / 8)               // 16-byte vectors of 8 bf16 in a tile's row
#define ROWS_PER_PASS (THREADS / ROW_VECTORS)  // 16
#define PASSES (TILE / ROWS_PER_PASS)        // 4
// Bytes per row of the shared tile: 17 words, so that the transpose's reads,
// 8 rows apart, fall in different banks.
#define TILE_STRIDE (TILE + 4)
// Blocks a cast launches in all (about): enough to keep every SM's loads in
// flight; each block walks several row tiles of one column tile, so that its
// column sums cover many rows and the partial sums stay few.
#define TARGET_BLOCKS 1024

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)
#define GELU_CUBIC 0.044715f

// gelu and its derivative, GPT-2's tanh form, written with the logistic
// function s = 1 / (1 + e^(-2u)) = (1 + tanh u) / 2:
//   gelu(x) = x s,   gelu'(x) = s + 2 x s (1 - s) du/dx.
// One exponential and one reciprocal (each one SFU instruction) instead of tanhf's
// twenty-odd instructions: the casts run at the memory's pace. Each is within
// a few ulps of fp32 everywhere, the negative tail too, where 1 + tanh u
// computed from an approximate tanh would lose its digits; FP8 then rounds
// to 3 bits.
__device__ __forceinline__ float logistic_2u(float x, float *du_dx) {
    const float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    *du_dx = GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
    return __fdividef(1.0f, 1.0f + __expf(-2.0f * u));
}

__device__ __forceinline__ float gelu_of(float x) {
    float du_dx;
    return x * logistic_2u(x, &du_dx);
}

__device__ __forceinline__ float gelu_grad_of(float x) {
    float du_dx;
    const float s = logistic_2u(x, &du_dx);
    return s + 2.0f * x * s * (1.0f - s) * du_dx;
}

// A row tile's inputs as one thread loads them: PASSES vectors of 8 floatX
// (and of GELU's input, for FP8_DGELU), kept raw until they are used, so that
// the next tile's can be in flight while this one is cast.
template <Fp8CastOp OP>
struct RawTile {
    uint4 x[PASSES];
    uint4 pre[OP == FP8_DGELU ? PASSES : 1];
};

// Thread (row, vec)'s vectors of the tile at row r0: rows row + 16 * pass,
// columns c..c+7; zeros past the tensor's edge (they change no max or sum).
template <Fp8CastOp OP>
__device__ __forceinline__ void load_tile(RawTile<OP> &t, const Fp8Cast &k, int r0, int row,
                                          int c) {
#pragma unroll
    for (int p = 0; p < PASSES; p++) {
        const int r = r0 + row + p * ROWS_PER_PASS;
        const bool inside = r < k.rows && c < k.cols;
        const size_t at = (size_t)r * k.cols + c;
        t.x[p] = inside ? *(const uint4 *)(k.in + at) : make_uint4(0, 0, 0, 0);
        if (OP == FP8_DGELU) t.pre[p] = inside ? *(const uint4 *)(k.pre + at) : make_uint4(0, 0, 0, 0);
    }
}

// The 8 values of pass p that the cast takes, in fp32.
template <Fp8CastOp OP>
__device__ __forceinline__ void values_of(float v[8], const RawTile<OP> &t, int p) {
    const floatX *x = (const floatX *)&t.x[p];
    const floatX *pre = (const floatX *)&t.pre[OP == FP8_DGELU ? p : 0];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const float a = x2f(x[j]);
        v[j] = OP == FP8_COPY ? a : OP == FP8_GELU ? gelu_of(a) : a * gelu_grad_of(x2f(pre[j]));
    }
}

// ANCHOR: cast_kernel
// Row r of a tile, columns c..c+7, in FP8: into out's row and the shared tile.
template <int FORMAT>
__device__ __forceinline__ void store_fp8(const float v[8], float inverse, const Fp8Cast &k,
                                          uint8_t *tile_row, int r, int c) {
    const uint2 bytes = fp8x8<FORMAT>(v, inverse);
    if (k.out && r < k.rows && c < k.cols) *(uint2 *)((uint8_t *)k.out + (size_t)r * k.cols + c) = bytes;
    ((uint32_t *)tile_row)[0] = bytes.x;  // rows of 68 bytes: 4-byte aligned only
    ((uint32_t *)tile_row)[1] = bytes.y;
}

// The tile's transpose into out_t. Thread t takes the 4 columns 4 * (t / 8)..
// of the 8 rows 8 * (t % 8)..: it reads them as 8 words (4 bytes of a row
// each), regroups the bytes with byte permutes into 4 columns of 8 rows, and
// stores each as 8 bytes of its row of out_t. The 8 threads of a column
// group are in one warp: each of its 4 rows of out_t gets the tile's 64
// bytes, two whole sectors, from one store instruction.
__device__ __forceinline__ void store_transpose(const uint8_t *tile, const Fp8Cast &k, int r0,
                                                int c0) {
    const int cg = threadIdx.x / 8, rg = threadIdx.x % 8;
    const int tr = rg * 8, tc = cg * 4;
    if (r0 + tr >= k.rows || c0 + tc >= k.cols) return;  // rows, cols: multiples of 16
    store_columns_8x4(tile + tr * TILE_STRIDE + tc, TILE_STRIDE,
                      (uint8_t *)k.out_t + (size_t)(c0 + tc) * k.rows + r0 + tr, k.rows);
}

// The block's column sums: its 16 rows of threads' sums, added in order.
__device__ __forceinline__ void store_column_sums(const float colsum[8], const Fp8Cast &k,
                                                  int c0) {
    __shared__ float sums[ROWS_PER_PASS][TILE];
    const int vec = threadIdx.x % ROW_VECTORS, row = threadIdx.x / ROW_VECTORS;
#pragma unroll
    for (int j = 0; j < 8; j++) sums[row][vec * 8 + j] = colsum[j];
    __syncthreads();
    if (threadIdx.x >= TILE || c0 + threadIdx.x >= k.cols) return;
    float s = 0.0f;
    for (int i = 0; i < ROWS_PER_PASS; i++) s += sums[i][threadIdx.x];
    k.col_partials[(size_t)blockIdx.y * k.cols + c0 + threadIdx.x] = s;
}

// Block (column tile blockIdx.x, row group blockIdx.y): the row tiles
// blockIdx.y, blockIdx.y + gridDim.y, ... of the column tile. Thread t takes
// the 8 columns (t % 8) * 8.. of rows t / 8 + 16 * pass of each tile.
// AMAX_ONLY: measure, write nothing (current scaling's first pass).
template <Fp8CastOp OP, int FORMAT, bool AMAX_ONLY>
__global__ void __launch_bounds__(THREADS) fp8_cast_kernel(Fp8Cast k) {
    __shared__ __align__(16) uint8_t tile[TILE * TILE_STRIDE];
    const int vec = threadIdx.x % ROW_VECTORS, row = threadIdx.x / ROW_VECTORS;
    const int c0 = blockIdx.x * TILE, c = c0 + vec * 8;
    const float inverse = 1.0f / k.meta->scale;  // exact: the scale is a power of two
    float amax = 0.0f, colsum[8] = {0};
    const int row_tiles = (k.rows + TILE - 1) / TILE;
    RawTile<OP> raw;
    if (blockIdx.y < row_tiles) load_tile<OP>(raw, k, blockIdx.y * TILE, row, c);
    for (int rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
        const int r0 = rt * TILE;
        RawTile<OP> next;  // the block's next tile, loading while this one is cast
        if (rt + gridDim.y < row_tiles) load_tile<OP>(next, k, r0 + gridDim.y * TILE, row, c);
#pragma unroll
        for (int p = 0; p < PASSES; p++) {
            const int tr = row + p * ROWS_PER_PASS;
            float v[8];
            values_of<OP>(v, raw, p);
#pragma unroll
            for (int j = 0; j < 8; j++) amax = fmaxf(amax, fabsf(v[j])), colsum[j] += v[j];
            if constexpr (!AMAX_ONLY)
                store_fp8<FORMAT>(v, inverse, k, &tile[tr * TILE_STRIDE + vec * 8], r0 + tr, c);
        }
        if constexpr (!AMAX_ONLY) {
            if (k.out_t) {
                __syncthreads();
                store_transpose(tile, k, r0, c0);
                __syncthreads();  // the tile is rewritten by the next row tile
            }
        }
        raw = next;
    }
    amax = warp_max(amax);
    if (threadIdx.x % WARP_SIZE == 0)
        atomicMax((unsigned int *)&k.meta->amax, __float_as_uint(amax));
    if constexpr (!AMAX_ONLY) {
        if (k.col_partials) store_column_sums(colsum, k, c0);
    }
}
// ANCHOR_END: cast_kernel

// dbias[c] += the partial sums of column c, row group by row group, in order.
__global__ void fp8_bias_grad_kernel(floatX *dbias, const float *partials, int groups, int cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (int g = 0; g < groups; g++) s += partials[(size_t)g * cols + c];
    dbias[c] = f2x(x2f(dbias[c]) + s);
}

// A scale from this step's amax alone (current scaling), once it is measured.
__global__ void fp8_scale_from_amax_kernel(Fp8Meta *meta, int format) {
    if (meta->amax > 0.0f && isfinite(meta->amax)) meta->scale = scale_for(meta->amax, max_of(format));
}

// ANCHOR: scales_advance
__global__ void fp8_scales_advance_kernel(Fp8Meta *metas, const uint8_t *formats, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fp8Meta *m = &metas[i];
    float largest = m->amax;
    for (int h = FP8_HISTORY - 1; h > 0; h--) {
        m->history[h] = m->history[h - 1];
        largest = fmaxf(largest, m->history[h]);
    }
    m->history[0] = m->amax;
    m->amax = 0.0f;
    if (largest > 0.0f && isfinite(largest)) m->scale = scale_for(largest, max_of(formats[i]));
}
// ANCHOR_END: scales_advance

// The row groups (gridDim.y) of a cast: a function of the shape alone, so
// that the column sums are added in the same order on every run.
static int row_groups(int rows, int cols) {
    const int row_tiles = (rows + TILE - 1) / TILE, col_tiles = (cols + TILE - 1) / TILE;
    const int groups = (TARGET_BLOCKS + col_tiles - 1) / col_tiles;
    return groups < row_tiles ? groups : row_tiles;
}

extern "C" size_t fp8_cast_partials_floats(int rows, int cols) {
    return (size_t)row_groups(rows, cols) * cols;
}

template <Fp8CastOp OP, int FORMAT>
static void launch_cast(const GpuContext *ctx, const Fp8Cast *k, dim3 grid, bool amax_only) {
    if (amax_only) fp8_cast_kernel<OP, FORMAT, true><<<grid, THREADS, 0, ctx->stream>>>(*k);
    else fp8_cast_kernel<OP, FORMAT, false><<<grid, THREADS, 0, ctx->stream>>>(*k);
}

template <int FORMAT>
static void launch_for_op(const GpuContext *ctx, const Fp8Cast *k, dim3 grid, bool amax_only) {
    switch (k->op) {
    case FP8_COPY: launch_cast<FP8_COPY, FORMAT>(ctx, k, grid, amax_only); break;
    case FP8_GELU: launch_cast<FP8_GELU, FORMAT>(ctx, k, grid, amax_only); break;
    case FP8_DGELU: launch_cast<FP8_DGELU, FORMAT>(ctx, k, grid, amax_only); break;
    }
}

static void launch(const GpuContext *ctx, const Fp8Cast *k, bool amax_only) {
    const dim3 grid((k->cols + TILE - 1) / TILE, row_groups(k->rows, k->cols));
    if (k->format == GEMM_E5M2) launch_for_op<GEMM_E5M2>(ctx, k, grid, amax_only);
    else launch_for_op<GEMM_E4M3>(ctx, k, grid, amax_only);
    gpu_check_launch(ctx, amax_only ? "fp8_cast_kernel (amax)" : "fp8_cast_kernel");
}

// ANCHOR: fp8_cast
extern "C" void fp8_cast(const GpuContext *ctx, const Fp8Cast *k, Fp8ScaleMode mode) {
    if (k->rows % FP8_CAST_ALIGN || k->cols % FP8_CAST_ALIGN)
        die("fp8_cast: a %d x %d tensor; FP8 needs rows and columns that are multiples of %d",
            k->rows, k->cols, FP8_CAST_ALIGN);
    if (k->format != GEMM_E4M3 && k->format != GEMM_E5M2)
        die("fp8_cast: the format must be e4m3 or e5m2");
    if ((k->op == FP8_DGELU) != (k->pre != NULL))
        die("fp8_cast: GELU's input is FP8_DGELU's, and only its");
    if (mode == FP8_CURRENT) {
        launch(ctx, k, true);
        fp8_scale_from_amax_kernel<<<1, 1, 0, ctx->stream>>>(k->meta, k->format);
        gpu_check_launch(ctx, "fp8_scale_from_amax_kernel");
    }
    launch(ctx, k, false);
    if (!k->col_partials) return;
    const int threads = 256;
    fp8_bias_grad_kernel<<<blocks_for(k->cols, threads), threads, 0, ctx->stream>>>(
        k->dbias, k->col_partials, row_groups(k->rows, k->cols), k->cols);
    gpu_check_launch(ctx, "fp8_bias_grad_kernel");
}
// ANCHOR_END: fp8_cast

extern "C" void fp8_scales_advance(const GpuContext *ctx, Fp8Meta *metas, const uint8_t *formats,
                                   int n) {
    const int threads = 128;
    fp8_scales_advance_kernel<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(metas, formats,
                                                                                   n);
    gpu_check_launch(ctx, "fp8_scales_advance_kernel");
}

#else  // the fp32 build: no FP8 chapter runs there

extern "C" size_t fp8_cast_partials_floats(int rows, int cols) { return (void)rows, (void)cols, 0; }
extern "C" void fp8_cast(const GpuContext *ctx, const Fp8Cast *k, Fp8ScaleMode mode) {
    (void)ctx, (void)k, (void)mode;
    die("fp8_cast: the casts read bf16; chapter 13 runs in the bf16 build");
}
extern "C" void fp8_scales_advance(const GpuContext *ctx, Fp8Meta *metas, const uint8_t *formats,
                                   int n) {
    (void)ctx, (void)metas, (void)formats, (void)n;
    die("fp8_scales_advance: chapter 13 runs in the bf16 build");
}

#endif
