// test_kernels_encoder.c: encoder_forward_v1, the host-side bucketing of
// positions by token, and encoder_backward_v1, against the CPU reference.
//
// Tolerance: none. The forward pass is one add per element, and the backward
// pass adds each gradient element's terms in the CPU reference's order (that
// is what the buckets are for), so the results must be bit-identical: in
// bf16, to the CPU's fp32 result rounded to bf16, since the kernels add in
// fp32 and round once, when they store.
#include "encoder.h"
#include "model/gpt2_cpu.h"
#include "gpu_test.h"

TestSuite(kernels_encoder, .init = gpu_test_init, .fini = gpu_test_fini);
// The bucketing is host code: its tests run everywhere.
TestSuite(kernels_encoder_host);

Test(kernels_encoder, forward_is_bit_identical_to_cpu) {
    const int B = 3, T = 37, C = 72, V = 101;
    const size_t BT = (size_t)B * T, N = BT * C;
    Rng rng;
    rng_seed(&rng, 1);
    int32_t *tokens = gt_random_tokens(BT, V, &rng);
    float *wte = gt_random_x((size_t)V * C, -1, 1, &rng);
    float *wpe = gt_random_x((size_t)T * C, -1, 1, &rng);
    float *out = xmalloc(N * sizeof(float));
    cpu_encoder_forward(out, tokens, wte, wpe, B, T, C);

    floatX *d_out = gt_device_poisoned_x(N);
    encoder_forward_v1(&gt_ctx, d_out, gt_upload_i32(tokens, BT), gt_upload_x(wte, (size_t)V * C),
                       gt_upload_x(wpe, (size_t)T * C), B, T, C);
    gt_assert_identical("encoder out", gt_download_x(d_out, N), gt_rounded_x(out, N), N);
}

// V small against B*T = 111 positions: every token repeats many times, the
// case where a scatter would need atomics.
static void check_backward(int B, int T, int C, int V, uint64_t seed) {
    const size_t BT = (size_t)B * T, N = BT * C;
    Rng rng;
    rng_seed(&rng, seed);
    int32_t *tokens = gt_random_tokens(BT, V, &rng);
    float *dout = gt_random_x(N, -1, 1, &rng);
    float *dwte0 = gt_random_x((size_t)V * C, -1, 1, &rng);
    float *dwpe0 = gt_random_x((size_t)T * C, -1, 1, &rng);
    float *dwte = gt_copy(dwte0, (size_t)V * C), *dwpe = gt_copy(dwpe0, (size_t)T * C);
    cpu_encoder_backward(dwte, dwpe, dout, tokens, B, T, C);

    EncoderBuckets eb;
    encoder_buckets_init(&eb, (int)BT, V);
    char err[ERR_LEN];
    cr_assert_eq(encoder_buckets_build(&eb, tokens, err), 0, "%s", err);
    int32_t *d_packed = gt_device_alloc(encoder_buckets_ints((int)BT) * sizeof(int32_t), "buckets");
    encoder_buckets_upload(&gt_ctx, d_packed, &eb);
    floatX *d_dwte = gt_upload_x(dwte0, (size_t)V * C);
    floatX *d_dwpe = gt_upload_x(dwpe0, (size_t)T * C);
    encoder_backward_v1(&gt_ctx, d_dwte, d_dwpe, gt_upload_x(dout, N), d_packed, eb.num_buckets, B,
                        T, C);
    gt_assert_identical("encoder dwte", gt_download_x(d_dwte, (size_t)V * C),
                        gt_rounded_x(dwte, (size_t)V * C), (size_t)V * C);
    gt_assert_identical("encoder dwpe", gt_download_x(d_dwpe, (size_t)T * C),
                        gt_rounded_x(dwpe, (size_t)T * C), (size_t)T * C);
    encoder_buckets_free(&eb);
}

Test(kernels_encoder, backward_is_bit_identical_to_cpu_with_repeated_tokens) {
    check_backward(3, 37, 72, 7, 2);
}

// C = 300: two blocks of channels per bucket, the second partial; V = 101 >
// B*T leaves many tokens absent (their dwte rows must stay as they were).
Test(kernels_encoder, backward_is_bit_identical_to_cpu_sparse_tokens) {
    check_backward(2, 20, 300, 101, 3);
}

Test(kernels_encoder_host, buckets_group_positions_by_token_in_order) {
    const int32_t tokens[] = {5, 2, 5, 0, 2, 5, 9};
    const int BT = 7, V = 10;
    EncoderBuckets eb;
    encoder_buckets_init(&eb, BT, V);
    char err[ERR_LEN];
    cr_assert_eq(encoder_buckets_build(&eb, tokens, err), 0, "%s", err);
    cr_assert_eq(eb.num_buckets, 4);
    const int32_t want_tokens[] = {0, 2, 5, 9}, want_start[] = {0, 1, 3, 6, 7};
    const int32_t want_positions[] = {3, 1, 4, 0, 2, 5, 6};
    const int32_t *token_of = eb.packed, *start = eb.packed + BT;
    const int32_t *positions = eb.packed + 2 * BT + 1;
    for (int i = 0; i < 4; i++) cr_assert_eq(token_of[i], want_tokens[i], "bucket %d", i);
    for (int i = 0; i < 5; i++) cr_assert_eq(start[i], want_start[i], "start %d", i);
    for (int i = 0; i < BT; i++) cr_assert_eq(positions[i], want_positions[i], "position %d", i);
    encoder_buckets_free(&eb);
}

Test(kernels_encoder_host, buckets_reject_a_token_out_of_range) {
    const int32_t tokens[] = {1, 10, 2};
    EncoderBuckets eb;
    encoder_buckets_init(&eb, 3, 10);
    char err[ERR_LEN] = "";
    cr_assert_eq(encoder_buckets_build(&eb, tokens, err), -1);
    cr_assert(strstr(err, "token 10 at position 1") != NULL, "got: %s", err);
    encoder_buckets_free(&eb);
}
