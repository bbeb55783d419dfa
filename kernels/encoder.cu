// encoder.cu: see encoder.h.
#include <stdlib.h>
#include <string.h>

#include "encoder.h"
#include "reduce.cuh"

extern "C" {
#include "util/util.h"
}

// One thread per output element: consecutive threads read consecutive
// channels of the same wte and wpe rows, so every load is coalesced.
__global__ void encoder_forward_kernel_v1(floatX *out, const int32_t *tokens, const floatX *wte,
                                          const floatX *wpe, int B, int T, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    size_t bt = i / C;
    int c = (int)(i % C), t = (int)(bt % T);
    out[i] = f2x(x2f(wte[(size_t)tokens[bt] * C + c]) + x2f(wpe[(size_t)t * C + c]));
}

extern "C" void encoder_forward_v1(const GpuContext *ctx, floatX *out, const int32_t *tokens,
                                   const floatX *wte, const floatX *wpe, int B, int T, int C) {
    const int threads = 256;
    encoder_forward_kernel_v1<<<blocks_for((size_t)B * T * C, threads), threads, 0,
                                ctx->stream>>>(out, tokens, wte, wpe, B, T, C);
    gpu_check_launch(ctx, "encoder_forward_kernel_v1");
}

// ---- buckets ----------------------------------------------------------------
extern "C" size_t encoder_buckets_ints(int BT) { return 3 * (size_t)BT + 2; }

extern "C" void encoder_buckets_init(EncoderBuckets *eb, int BT, int V) {
    eb->BT = BT;
    eb->V = V;
    eb->num_buckets = 0;
    eb->pinned = 0;
    eb->packed = (int32_t *)xmalloc(encoder_buckets_ints(BT) * sizeof(int32_t));
    eb->cursor = (int32_t *)xmalloc((size_t)V * sizeof(int32_t));
}

extern "C" void encoder_buckets_init_pinned(EncoderBuckets *eb, int BT, int V) {
    eb->BT = BT;
    eb->V = V;
    eb->num_buckets = 0;
    eb->pinned = 1;
    CUDA_CHECK(cudaMallocHost((void **)&eb->packed, encoder_buckets_ints(BT) * sizeof(int32_t)));
    eb->cursor = (int32_t *)xmalloc((size_t)V * sizeof(int32_t));
}

extern "C" void encoder_buckets_free(EncoderBuckets *eb) {
    if (eb->pinned) {
        if (eb->packed) CUDA_CHECK(cudaFreeHost(eb->packed));
    } else {
        free(eb->packed);
    }
    free(eb->cursor);
    memset(eb, 0, sizeof *eb);
}

extern "C" int encoder_buckets_build(EncoderBuckets *eb, const int32_t *tokens, char *err) {
    const int BT = eb->BT, V = eb->V;
    int32_t *token_of = eb->packed, *start = eb->packed + BT, *positions = eb->packed + 2 * BT + 1;
    int32_t *cursor = eb->cursor;
    memset(cursor, 0, (size_t)V * sizeof(int32_t));
    for (int i = 0; i < BT; i++) {
        if (tokens[i] < 0 || tokens[i] >= V)
            return fail(err, "encoder_buckets_build: token %d at position %d is outside [0, %d)",
                        tokens[i], i, V);
        cursor[tokens[i]]++;
    }
    // Counts become start offsets, one bucket per token that occurs.
    int nb = 0, offset = 0;
    for (int v = 0; v < V; v++) {
        if (cursor[v] == 0) continue;
        token_of[nb] = v;
        start[nb] = offset;
        offset += cursor[v];
        cursor[v] = start[nb];
        nb++;
    }
    start[nb] = offset;
    // Visiting positions in increasing order keeps each bucket ascending:
    // the order in which the CPU reference adds them.
    for (int i = 0; i < BT; i++) positions[cursor[tokens[i]]++] = i;
    eb->num_buckets = nb;
    eb->packed[3 * BT + 1] = nb;  // for the device (encoder_backward_v2)
    return 0;
}

extern "C" void encoder_buckets_upload(const GpuContext *ctx, int32_t *d_packed,
                                       const EncoderBuckets *eb) {
    // From pageable memory, cudaMemcpyAsync returns once the host buffer has
    // been staged, so eb may be reused right away. From pinned memory it
    // returns at once, and the copy reads eb->packed later (encoder.h).
    gpu_memcpy_async(ctx, d_packed, eb->packed, encoder_buckets_ints(eb->BT) * sizeof(int32_t),
                     cudaMemcpyHostToDevice, "upload (encoder buckets)");
}

// ---- backward -----------------------------------------------------------------
// One thread per (t, c): it owns dwpe[t,c] and adds the B rows in order, in
// an fp32 register, storing once.
__global__ void encoder_backward_wpe_kernel_v1(floatX *dwpe, const floatX *dout, int B, int T,
                                               int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C) return;
    float acc = x2f(dwpe[i]);
    for (int b = 0; b < B; b++) acc += x2f(dout[(size_t)b * T * C + i]);
    dwpe[i] = f2x(acc);
}

// The thread that owns dwte[token,c] adds that token's positions one after
// another, so no other thread ever writes its element and no atomics are
// needed. The sum is an fp32 register, stored (rounded to floatX) once.
__device__ inline void add_bucket(floatX *dwte, const floatX *dout, const int32_t *packed, int BT,
                                  int C, int bucket, int c) {
    const int32_t *token_of = packed, *start = packed + BT, *positions = packed + 2 * BT + 1;
    floatX *row = dwte + (size_t)token_of[bucket] * C;
    float acc = x2f(row[c]);
    for (int p = start[bucket]; p < start[bucket + 1]; p++)
        acc += x2f(dout[(size_t)positions[p] * C + c]);
    row[c] = f2x(acc);
}

// blockIdx.x picks a token's bucket, the threads span channels.
__global__ void encoder_backward_wte_kernel_v1(floatX *dwte, const floatX *dout,
                                               const int32_t *packed, int BT, int C) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c < C) add_bucket(dwte, dout, packed, BT, C, blockIdx.x, c);
}

// dwpe's part, the same in both versions.
static void launch_wpe_backward(const GpuContext *ctx, floatX *dwpe, const floatX *dout, int B,
                                int T, int C) {
    const int threads = 256;
    encoder_backward_wpe_kernel_v1<<<blocks_for((size_t)T * C, threads), threads, 0,
                                     ctx->stream>>>(dwpe, dout, B, T, C);
    gpu_check_launch(ctx, "encoder_backward_wpe_kernel_v1");
}

extern "C" void encoder_backward_v1(const GpuContext *ctx, floatX *dwte, floatX *dwpe,
                                    const floatX *dout, const int32_t *d_packed, int num_buckets,
                                    int B, int T, int C) {
    launch_wpe_backward(ctx, dwpe, dout, B, T, C);
    const int threads = 256;
    if (num_buckets == 0) return;
    dim3 grid(num_buckets, blocks_for(C, threads));
    encoder_backward_wte_kernel_v1<<<grid, threads, 0, ctx->stream>>>(dwte, dout, d_packed, B * T,
                                                                      C);
    gpu_check_launch(ctx, "encoder_backward_wte_kernel_v1");
}

// ---- chapter 11: a grid that does not depend on the tokens ----------------------
// ANCHOR: encoder_backward_v2
// v1's grid has one block per bucket, a number the host knows from the batch:
// a CUDA graph would replay the first batch's grid for every batch. Here the
// grid is fixed (a few blocks per SM), each block strides over the buckets,
// and the number of buckets is read on the device, from the packed array
// itself ([3BT + 1]). Each element gets the same sum in the same order: the
// same bits as v1.
__global__ void encoder_backward_wte_kernel_v2(floatX *dwte, const floatX *dout,
                                               const int32_t *packed, int BT, int C) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int num_buckets = packed[3 * BT + 1];
    for (int bucket = blockIdx.x; bucket < num_buckets; bucket += gridDim.x)
        add_bucket(dwte, dout, packed, BT, C, bucket, c);
}
// ANCHOR_END: encoder_backward_v2

extern "C" void encoder_backward_v2(const GpuContext *ctx, floatX *dwte, floatX *dwpe,
                                    const floatX *dout, const int32_t *d_packed, int num_buckets,
                                    int B, int T, int C) {
    (void)num_buckets;  // read on the device
    launch_wpe_backward(ctx, dwpe, dout, B, T, C);
    const int threads = 256;
    const int per_sm = 8, most = B * T;
    const int blocks = ctx->sm_count * per_sm < most ? ctx->sm_count * per_sm : most;
    dim3 grid(blocks, blocks_for(C, threads));
    encoder_backward_wte_kernel_v2<<<grid, threads, 0, ctx->stream>>>(dwte, dout, d_packed, B * T,
                                                                      C);
    gpu_check_launch(ctx, "encoder_backward_wte_kernel_v2");
}
