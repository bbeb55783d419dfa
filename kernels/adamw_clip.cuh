// adamw_clip.cuh: the clipped gradient as the fused updates read it
// (chapters 09 and 10: adamw.cu, adamw8bit.cu).
#ifndef ADAMW_CLIP_CUH
#define ADAMW_CLIP_CUH

#include "precision.h"

// ANCHOR: clipped_grad
// The gradient as chapter 03's clipping pass (scale_by_device_factor_v1)
// leaves it in memory: when the factor is below 1, scaled in fp32 and
// rounded to floatX, so that an update that scales as it reads sees the same
// bits as one that reads the scaled gradients. A factor of 1 or more, or NaN,
// leaves it as it is, as that pass does.
__device__ __forceinline__ float clipped_grad(floatX g, float clip_factor) {
    return clip_factor < 1.0f ? x2f(f2x(__fmul_rn(x2f(g), clip_factor))) : x2f(g);
}
// ANCHOR_END: clipped_grad

#endif
