// vec.cuh: 128-bit loads and stores of floatX, for the .cu files only.
//
// A warp that reads one floatX per lane asks the memory system for 32 small
// pieces: 64 bytes per instruction in bf16. The same warp reading 16 bytes per
// lane moves 512 bytes per instruction, eight times the work for the same
// instruction count, and the load/store units stop being the bottleneck of
// kernels that only stream memory (chapter 04). A Vec is those 16 bytes:
// 8 bf16 values or 4 fp32 ones. Its address must be 16-byte aligned: rows
// whose length is a multiple of VEC_X start aligned (cudaMalloc and the
// activation table align every buffer to 256 bytes).
#ifndef VEC_CUH
#define VEC_CUH

#include "precision.h"

#define VEC_X ((int)(16 / sizeof(floatX)))  // floatX values in 16 bytes

struct alignas(16) Vec {
    floatX x[16 / sizeof(floatX)];
};

// One 16-byte load; .cs ("cache streaming") is not used: the layernorms read
// their rows more than once and want them to stay in L1.
__device__ __forceinline__ Vec load_vec(const floatX *p) {
    Vec v;
    *reinterpret_cast<int4 *>(&v) = *reinterpret_cast<const int4 *>(p);
    return v;
}

__device__ __forceinline__ void store_vec(floatX *p, const Vec &v) {
    *reinterpret_cast<int4 *>(p) = *reinterpret_cast<const int4 *>(&v);
}

#endif
