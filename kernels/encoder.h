// encoder.h: the embedding layer: token embedding plus position embedding.
//
// Shapes, row-major, as the CPU reference (gpt2_cpu.h):
//   tokens (B,T) int32 in [0, V), on the device
//   wte (Vp,C), wpe (T_max,C), out and dout (B,T,C), and the gradients dwte
//   and dwpe: floatX (precision.h)
//
// The backward pass is a scatter: every position adds its gradient row to the
// row of its token in dwte, and a token may occur many times in a batch. The
// usual GPU answer, atomicAdd, makes the sum's order (and so its last bits)
// depend on timing. We sort instead: the host groups the B*T positions by
// token (a counting sort; chapter 00 loads each batch on the host anyway),
// and then one thread per (token, channel) adds that token's positions in
// increasing order. That order is the CPU reference's, so dwte and dwpe come
// out bit-identical to it in the fp32 build. In the bf16 build each thread
// adds in fp32, starting from the gradient's value, and rounds to bf16 once,
// when it stores: one rounding per element, not one per position.
#ifndef ENCODER_H
#define ENCODER_H

#include <stdint.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
void encoder_forward_v1(const GpuContext *ctx, floatX *out, const int32_t *tokens,
                        const floatX *wte, const floatX *wpe, int B, int T, int C);

// ---- positions grouped by token (host side) ----------------------------------
// The packed array, in int32, for BT = B*T positions (3*BT + 2 ints), the form
// in which it is copied to the device in one transfer:
//   [0, nb)               token of bucket i, ascending (nb = num_buckets <= BT)
//   [BT, BT + nb]         start of bucket i in the positions below; bucket i
//                         holds positions [start[i], start[i+1])
//   [2BT+1, 3BT+1)        the positions b*T+t, grouped by token, ascending
//                         within each token
//   [3BT+1]               nb, for kernels that read it on the device
typedef struct {
    int BT, V;
    int num_buckets;   // distinct tokens in the last batch built
    int32_t *packed;   // host, encoder_buckets_ints(BT) ints
    int32_t *cursor;   // host scratch, V ints (counts, then write positions)
    int pinned;        // packed is page-locked (encoder_buckets_init_pinned)
} EncoderBuckets;

size_t encoder_buckets_ints(int BT);
void encoder_buckets_init(EncoderBuckets *eb, int BT, int V);
// Chapter 03: the same with `packed` in pinned (page-locked) host memory,
// from cudaMallocHost, which the GPU's copy engine reads directly: see
// encoder_buckets_upload for what that changes.
void encoder_buckets_init_pinned(EncoderBuckets *eb, int BT, int V);
void encoder_buckets_free(EncoderBuckets *eb);
// Groups the BT tokens (host memory) by token. Returns 0, or -1 with a reason
// in err (ERR_LEN bytes) when a token is outside [0, V).
int encoder_buckets_build(EncoderBuckets *eb, const int32_t *tokens, char *err);
// Copies eb->packed to d_packed (encoder_buckets_ints(BT) int32 on the device)
// with cudaMemcpyAsync on ctx->stream. When eb->packed is pageable (chapters
// 00-02), the driver first copies it into a staging buffer of its own, so eb
// may be rebuilt as soon as this returns. When it is pinned (chapter 03), the
// copy engine reads eb->packed itself, later, when the stream reaches the
// copy: eb must not be rebuilt until then (record an event after this call
// and wait for it before the next encoder_buckets_build into eb).
void encoder_buckets_upload(const GpuContext *ctx, int32_t *d_packed, const EncoderBuckets *eb);

// dwte (Vp,C) += the dout rows of each token's positions; dwpe (T_max,C):
// dwpe[t,:] += sum over b, in order, of dout[b,t,:]. Both ACCUMULATE.
// d_packed and num_buckets come from encoder_buckets_build/upload for this
// batch's tokens (B*T == eb->BT).
void encoder_backward_v1(const GpuContext *ctx, floatX *dwte, floatX *dwpe, const floatX *dout,
                         const int32_t *d_packed, int num_buckets, int B, int T, int C);

// Chapter 11: the same sums (the same bits), on a grid fixed by the GPU and
// the batch's shape: num_buckets is ignored and read from d_packed on the
// device, so that a CUDA graph captured with one batch is right for the next.
void encoder_backward_v2(const GpuContext *ctx, floatX *dwte, floatX *dwpe, const floatX *dout,
                         const int32_t *d_packed, int num_buckets, int B, int T, int C);

#ifdef __cplusplus
}
#endif

#endif
