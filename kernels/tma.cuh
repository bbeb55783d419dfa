// tma.cuh: Hopper's tensor memory accelerator (TMA) and the shared-memory
// barriers (mbarrier) that say when its copies have landed, for .cu files
// built for sm_90a. Chapter 12's attention (attention_flash_ws.cu) is fed by
// them.
//
// Before Hopper, a tile reached shared memory through the threads: each
// thread computed addresses and issued its 16-byte copies (cp.async), and the
// block waited with a barrier of every thread. The TMA is a copy engine: one
// thread hands it a tensor map (the tensor's shape, strides and a box size,
// made once on the host) and the box's coordinates, and the TMA moves the
// whole box, writes it in the tensor cores' swizzled layout, fills rows
// outside the tensor with zeros, and counts the bytes it delivered on an
// mbarrier in shared memory. Nobody else computes an address.
//
// An mbarrier completes a phase when its expected arrivals have arrived and
// the bytes announced to it (expect_tx) have landed; a waiter names the
// phase by its parity (0, 1, 0, ...), so a ring of STAGES buffers each with
// a "full" barrier (the producer's copies landed) and an "empty" one (every
// consumer is done reading it) is a pipeline with no __syncthreads at all:
//   producer, tile j into stage s = j % STAGES:
//       wait empty[s] (parity (j / STAGES - 1) & 1, from the second lap on)
//       expect_tx(full[s], bytes); tma_load(..., full[s])
//   consumer:
//       wait full[s] (parity (j / STAGES) & 1); use the stage; arrive empty[s]
#ifndef TMA_CUH
#define TMA_CUH

#include <stdint.h>

__device__ __forceinline__ uint32_t shared_address(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// ---- mbarriers -------------------------------------------------------------------
// `count` arrivals complete a phase (with the bytes announced, if any).
__device__ __forceinline__ void mbarrier_init(uint64_t *bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)),
                 "r"(count)
                 : "memory");
}

// Makes the initialized barriers visible to the TMA (which sees shared
// memory through the async proxy); a __syncthreads follows, for the threads.
__device__ __forceinline__ void mbarrier_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar))
                 : "memory");
}

// An arrival that also announces `bytes` more to land in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     shared_address(bar)),
                 "r"(bytes)
                 : "memory");
}

// Announces `bytes` without arriving (the threads that store into the
// stage themselves arrive after their stores).
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(
                     shared_address(bar)),
                 "r"(bytes)
                 : "memory");
}

// ANCHOR: mbarrier_wait
// Waits until the phase of the given parity has completed. try_wait suspends
// the thread for a while in hardware before it says no, so the loop spins
// slowly.
__device__ __forceinline__ void mbarrier_wait(uint64_t *bar, int parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n}\n" ::"r"(shared_address(bar)),
        "r"(parity)
        : "memory");
}
// ANCHOR_END: mbarrier_wait

// ---- the TMA ---------------------------------------------------------------------
// The box at coordinates (c0, c1, c2) of a 3-D tensor map (innermost first)
// into shared memory at dst, its bytes counted on bar. `map` is the address
// of a __grid_constant__ kernel parameter: the map lives in the parameter
// space, where the TMA reads it.
__device__ __forceinline__ void tma_load_3d(void *dst, const void *map, int c0, int c1, int c2,
                                            uint64_t *bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(shared_address(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2),
        "r"(shared_address(bar))
        : "memory");
}

// The box at coordinates (c0, c1) of a 2-D tensor map (a matrix: c0 the
// column, c1 the row), the same way.
__device__ __forceinline__ void tma_load_2d(void *dst, const void *map, int c0, int c1,
                                            uint64_t *bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(shared_address(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_address(bar))
        : "memory");
}

// ---- named barriers ---------------------------------------------------------------
// A barrier among `threads` threads (a multiple of 32) of the block, by id
// 1..15 (0 is __syncthreads'): sync waits for all of them, arrive counts
// this thread and goes on. Two warpgroups hand each other a turn this way.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif
