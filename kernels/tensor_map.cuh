// tensor_map.cuh: the host's side of the TMA (tma.cuh): the driver's
// function that writes a tensor map, for the .cu files built for sm_90a
// (chapter 12's attention, appendix E's GEMM).
#ifndef TENSOR_MAP_CUH
#define TENSOR_MAP_CUH

#include <cuda.h>
#include <cudaTypedefs.h>

#include "util/util.h"

// cuTensorMapEncodeTiled is a driver function; the runtime hands out its
// address, so the build links no libcuda.
static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(void) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (!encode) {
        cudaDriverEntryPointQueryResult found;
        CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode,
                                                    12000, cudaEnableDefault, &found));
        if (found != cudaDriverEntryPointSuccess || !encode)
            die("cuTensorMapEncodeTiled: the driver does not provide it (the TMA needs a "
                "driver for CUDA 12.0 or later)");
    }
    return encode;
}

#endif
