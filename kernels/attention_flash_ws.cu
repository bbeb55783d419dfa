// attention_flash_ws.cu: see attention_flash.h. Chapter 12's attention: v4.
// (Being written: the kernels land in the next commit.)
#include <math.h>

#include "attention_flash.h"
#include "util/util.h"

// Why there are no v4 kernels in this build.
static const char *without_v4(void) {
#ifndef PRECISION_BF16
    return "flash attention runs on bf16 tensor cores: the bf16 build's (chapter 12, "
           "--fast-attention)";
#elif !defined(WITH_WGMMA)
    return "the TMA and wgmma kernels run on compute capability 9.0 only (H100, H200), and "
           "this build is for another GPU (make GPU_ARCH=90 builds them; "
           "attention_forward_v2 runs everywhere)";
#else
    return "not written yet";
#endif
}

extern "C" size_t attention_backward_v4_scratch_floats(int B, int T, int NH) {
    return (size_t)B * NH * T * (1 + 64) + (size_t)B * NH * ((T + 63) / 64);
}

extern "C" void attention_forward_v4_step(const GpuContext *ctx, int step, floatX *out,
                                          float *lse, const floatX *qkv, int B, int T, int C,
                                          int NH) {
    (void)ctx, (void)step, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)C, (void)NH;
    die("attention_forward_v4_step: %s", without_v4());
}

extern "C" void attention_forward_v4(const GpuContext *ctx, floatX *out, float *lse,
                                     const floatX *qkv, int B, int T, int C, int NH) {
    attention_forward_v4_step(ctx, ATTENTION_V4_STEPS, out, lse, qkv, B, T, C, NH);
}

extern "C" void attention_backward_v4(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                      const floatX *dout, const floatX *out, const floatX *qkv,
                                      const float *lse, int B, int T, int C, int NH) {
    (void)ctx, (void)dqkv, (void)scratch, (void)dout, (void)out, (void)qkv, (void)lse;
    (void)B, (void)T, (void)C, (void)NH;
    die("attention_backward_v4: %s", without_v4());
}
