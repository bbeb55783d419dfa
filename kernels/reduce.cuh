// reduce.cuh: warp- and block-wide sums and maxima, for the .cu files only.
//
// Every reduction here adds in a fixed order that depends only on the block's
// shape, never on timing, so the same inputs give the same bits on every run:
// the property all our kernels keep (no floating-point atomics anywhere).
//
// The warp versions use the xor butterfly: at each step lane i adds the value
// of lane i^offset. Both lanes of a pair compute a+b and b+a, which are equal
// in IEEE arithmetic, so every lane ends with the same, bit-identical result.
#ifndef REDUCE_CUH
#define REDUCE_CUH

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ inline float warp_sum(float x) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        x += __shfl_xor_sync(FULL_MASK, x, offset);
    return x;
}

__device__ inline double warp_sum_double(double x) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        x += __shfl_xor_sync(FULL_MASK, x, offset);
    return x;
}

__device__ inline float warp_max(float x) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, offset));
    return x;
}

// For a 1-D block whose size is a multiple of 32 (at most 1024), called by
// every thread; every thread gets the result. Each warp reduces its own
// values, then every warp reduces the per-warp results.
__device__ inline float block_sum(float x) {
    __shared__ float per_warp[WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;
    x = warp_sum(x);
    __syncthreads();  // an earlier call may still be reading per_warp
    if (lane == 0) per_warp[warp] = x;
    __syncthreads();
    return warp_sum(lane < num_warps ? per_warp[lane] : 0.0f);
}

__device__ inline float block_max(float x) {
    __shared__ float per_warp[WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;
    x = warp_max(x);
    __syncthreads();
    if (lane == 0) per_warp[warp] = x;
    __syncthreads();
    return warp_max(lane < num_warps ? per_warp[lane] : -INFINITY);
}

// Blocks for n elements at `threads` per block, for one-thread-per-element
// kernels. Sizes here reach B*T*Vp (4e8 at 124M), past int range for byte
// offsets, so element indices are size_t throughout.
static inline unsigned int blocks_for(size_t n, int threads) {
    return (unsigned int)((n + (size_t)threads - 1) / (size_t)threads);
}

#endif
