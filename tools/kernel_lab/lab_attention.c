// lab_attention.c: causal self-attention's versions, forward and backward:
// chapter 00's eager attention through the model's own slots (lab_ops_of:
// the (B,NH,T,T) scores written out, cuBLAS GEMMs, a softmax kernel; the
// backward slot zeroes dqkv first) and, in the bf16 build, chapter 05's flash
// attention, v2 (mma.sync) and v3 (wgmma, what the model runs at heads of 64),
// then chapter 12's steps from v3 to v4 and past it (attention_flash.h), timed at
// B=16 and, for the flash versions, at B=64 too.
//
// Rates count the FLOPs of causal attention as FlashAttention's papers do,
// whatever a version actually computes: forward, two GEMMs over half of the
// T x T square, 4 * B*NH*T*T*hs / 2; backward 2.5 times that (five GEMMs).
// The eager version computes the whole square, and the flash backward
// computes two of its GEMMs twice: their rates are "useful" FLOP/s.
#include <math.h>
#include <stdlib.h>

#include "attention.h"
#include "attention_flash.h"
#include "model/gpt2_cpu.h"
#include "lab.h"

typedef void (*AttentionForward)(const GpuContext *ctx, floatX *out, floatX *att, float *lse,
                                 float *scratch, const floatX *qkv, int B, int T, int C, int NH);
typedef void (*AttentionBackward)(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                  const floatX *dout, const floatX *out, const floatX *qkv,
                                  const floatX *att, const float *lse, int B, int T, int C,
                                  int NH);

// The flash versions by name, with the slots' signature (the model's flash
// slot picks v3 at heads of 64: the lab times v2 too).
static void forward_v2(const GpuContext *ctx, floatX *out, floatX *att, float *lse,
                       float *scratch, const floatX *qkv, int B, int T, int C, int NH) {
    (void)att, (void)scratch;
    attention_forward_v2(ctx, out, lse, qkv, B, T, C, NH);
}

static void backward_v2(const GpuContext *ctx, floatX *dqkv, float *scratch, const floatX *dout,
                        const floatX *out, const floatX *qkv, const floatX *att, const float *lse,
                        int B, int T, int C, int NH) {
    (void)att;
    attention_backward_v2(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
}

static void forward_v3(const GpuContext *ctx, floatX *out, floatX *att, float *lse,
                       float *scratch, const floatX *qkv, int B, int T, int C, int NH) {
    (void)att, (void)scratch;
    attention_forward_v3(ctx, out, lse, qkv, B, T, C, NH);
}

static void backward_v3(const GpuContext *ctx, floatX *dqkv, float *scratch, const floatX *dout,
                        const floatX *out, const floatX *qkv, const floatX *att, const float *lse,
                        int B, int T, int C, int NH) {
    (void)att;
    attention_backward_v3(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
}

// Chapter 12's steps from v3 to v4 (attention_flash.h): each row one step of
// the forward pass (attention_forward_v4_step) and one variant of the
// backward pass (attention_backward_v4_variant), the two lists side by side:
// by head, by groups of heads, then the TMA forward pass beside the second
// of them, then the two overlapping forward steps beside the two fused
// backward passes.
#define V4_ROW(n, step, variant)                                                              \
    static void forward_v4_##n(const GpuContext *ctx, floatX *out, floatX *att, float *lse,   \
                               float *scratch, const floatX *qkv, int B, int T, int C,         \
                               int NH) {                                                        \
        (void)att, (void)scratch;                                                               \
        attention_forward_v4_step(ctx, step, out, lse, qkv, B, T, C, NH);                       \
    }                                                                                           \
    static void backward_v4_##n(const GpuContext *ctx, floatX *dqkv, float *scratch,           \
                                const floatX *dout, const floatX *out, const floatX *qkv,      \
                                const floatX *att, const float *lse, int B, int T, int C,      \
                                int NH) {                                                       \
        (void)att;                                                                              \
        attention_backward_v4_variant(ctx, variant, dqkv, scratch, dout, out, qkv, lse, B, T,  \
                                      C, NH);                                                   \
    }
V4_ROW(1, 1, 1)
V4_ROW(2, 2, 2)
V4_ROW(3, 3, 2)
V4_ROW(4, 4, 3)
V4_ROW(5, 5, 4)
// The backward candidates past v4 (attention_flash_bwd.cu), each beside v4's
// forward pass: their backward rows are the ones to read.
V4_ROW(6, ATTENTION_V4_FORWARD, 5)
V4_ROW(7, ATTENTION_V4_FORWARD, 6)
V4_ROW(8, ATTENTION_V4_FORWARD, 7)
V4_ROW(9, ATTENTION_V4_FORWARD, 8)
// The forward steps of 128 keys, beside v4's backward pass: their forward
// rows are the ones to read.
V4_ROW(10, 6, ATTENTION_V4_BACKWARD)
V4_ROW(11, 7, ATTENTION_V4_BACKWARD)

// The rows below name the seven steps and the eight variants.
_Static_assert(ATTENTION_V4_STEPS == 7 && ATTENTION_V4_BACKWARD_VARIANTS == 8 &&
                   ATTENTION_V4_FORWARD == 7 && ATTENTION_V4_BACKWARD == 8,
               "a row per step of attention_forward_v4_step");

static const struct {
    const char *name;
    int chapter;           // the chapter that brought it
    int tensor_cores;      // the context's switch: in the fp32 build, chapter 01's TF32 GEMMs
    AttentionForward fwd;  // NULL: the chapter's slots
    AttentionBackward bwd;
    int hopper;            // wgmma's sm_90a code: where the context runs it (ctx.hopper)
} VERSIONS[] = {
#ifdef PRECISION_BF16
    {"v1 eager", 2, 1, NULL, NULL, 0},
    {"v2 flash mma", 5, 1, forward_v2, backward_v2, 0},
    {"v3 flash wgmma", 5, 1, forward_v3, backward_v3, 1},
    {"v4 s1 v3 by head", 12, 1, forward_v4_1, backward_v4_1, 1},
    {"v4 s2 v3 head groups", 12, 1, forward_v4_2, backward_v4_2, 1},
    {"v4 s3 TMA + producer warp", 12, 1, forward_v4_3, backward_v4_3, 1},
    {"v4 s4 overlap | fused dQ ordered", 12, 1, forward_v4_4, backward_v4_4, 1},
    {"v4 s5 ping-pong | fused dQ atomics", 12, 1, forward_v4_5, backward_v4_5, 1},
    {"v4 b5 D in the dQ kernel", 12, 1, forward_v4_6, backward_v4_6, 1},
    {"v4 b6 b5 + exp beside dP", 12, 1, forward_v4_7, backward_v4_7, 1},
    {"v4 b7 b5 + TMA ring", 12, 1, forward_v4_8, backward_v4_8, 1},
    {"v4 b8 b6 + TMA ring (v4)", 12, 1, forward_v4_9, backward_v4_9, 1},
    {"v4 s6 128-key tiles", 12, 1, forward_v4_10, backward_v4_10, 1},
    {"v4 s7 s6 persistent (v4)", 12, 1, forward_v4_11, backward_v4_11, 1},
#else
    {"v1 eager fp32", 0, 0, NULL, NULL, 0},
    {"v1 eager tf32", 1, 1, NULL, NULL, 0},
#endif
};

// TF32 keeps 10 of fp32's 23 mantissa bits, so its tolerance is the matmul lab's.
static double tolerance_of(int version) {
#ifndef PRECISION_BF16
    if (VERSIONS[version].tensor_cores) return 5e-3;
#endif
    (void)version;
    return lab_tolerance();
}

typedef struct {
    int B, T, C, NH, version;
    GpuOps ops;
    floatX *qkv, *out, *att, *dout, *dqkv;
    float *lse, *scratch;
} Args;

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

// Buffers for every version: the eager one's scores and scratch, the flash
// ones' lse and scratch (v4's holds dQ's fp32 sums).
static Args upload(Lab *lab, int B, int T, int C, int NH, const float *qkv, const float *dout) {
    const size_t N = (size_t)B * T * C, A = (size_t)B * NH * T * T;
    size_t scratch = attention_forward_scratch_floats(B, T, C, NH);
    scratch = max_size(scratch, attention_backward_scratch_floats(B, T, C, NH));
    scratch = max_size(scratch, attention_backward_v2_scratch_floats(B, T, NH));
    for (int v = 1; v <= ATTENTION_V4_BACKWARD_VARIANTS; v++)
        scratch = max_size(scratch, attention_backward_v4_variant_scratch_floats(v, B, T, NH));
    float *zeros = xcalloc(3 * N, sizeof(float));
    Args a = {.B = B, .T = T, .C = C, .NH = NH, .qkv = lab_upload_x(lab, qkv, 3 * N),
              .out = lab_upload_x(lab, zeros, N), .att = lab_alloc(lab, A * sizeof(floatX)),
              .dout = lab_upload_x(lab, dout, N), .dqkv = lab_upload_x(lab, zeros, 3 * N),
              .lse = lab_alloc(lab, (size_t)B * NH * T * sizeof(float)),
              .scratch = lab_alloc(lab, scratch * sizeof(float))};
    free(zeros);
    return a;
}

static void use_version(Lab *lab, Args *a, int version) {
    a->version = version;
    a->ops = lab_ops_of(VERSIONS[version].chapter);
    if (VERSIONS[version].fwd) a->ops.attention_forward = VERSIONS[version].fwd;
    if (VERSIONS[version].bwd) a->ops.attention_backward = VERSIONS[version].bwd;
    lab->ctx.tensor_cores = VERSIONS[version].tensor_cores;
}

static void run_forward(Lab *lab, void *p) {
    Args *a = p;
    a->ops.attention_forward(&lab->ctx, a->out, a->att, a->lse, a->scratch, a->qkv, a->B, a->T,
                             a->C, a->NH);
}

static void run_backward(Lab *lab, void *p) {
    Args *a = p;
    a->ops.attention_backward(&lab->ctx, a->dqkv, a->scratch, a->dout, a->out, a->qkv, a->att,
                              a->lse, a->B, a->T, a->C, a->NH);
}

// A version's rows at B=64: its time, with the error its check at B=2 found.
static void time_at_b64(Lab *lab, Args *big, int version, double forward_flops,
                        double forward_error, double backward_error) {
    use_version(lab, big, version);
    const char *shape = "B64 T1024 NH12 hs64";
    LabRow f = {"attention_forward", VERSIONS[version].name, shape, VERSIONS[version].chapter,
                forward_error, tolerance_of(version), lab_time_ms(lab, run_forward, big), 0,
                forward_flops};
    lab_report(lab, &f);
    run_forward(lab, big);
    LabRow b = {"attention_backward", VERSIONS[version].name, shape, VERSIONS[version].chapter,
                backward_error, tolerance_of(version), lab_time_ms(lab, run_backward, big), 0,
                2.5 * forward_flops};
    lab_report(lab, &b);
}

void lab_attention(Lab *lab) {
    if (!lab_wants(lab, "attention")) return;
    // The check: B=2, T=64, 12 heads of 64, against the CPU reference.
    const int B = 2, T = 64, C = LAB_C, NH = LAB_NH;
    const size_t N = (size_t)B * T * C, A = (size_t)B * NH * T * T;
    float *qkv = lab_random_x(lab, 3 * N, -1, 1), *dout = lab_random_x(lab, N, -1, 1);
    float *out = xmalloc(N * sizeof(float)), *preatt = xmalloc(A * sizeof(float));
    float *att = xmalloc(A * sizeof(float)), *dqkv = xcalloc(3 * N, sizeof(float));
    float *dpreatt = xcalloc(A, sizeof(float)), *datt = xcalloc(A, sizeof(float));
    cpu_attention_forward(out, preatt, att, qkv, B, T, C, NH);
    cpu_attention_backward(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
    Args check = upload(lab, B, T, C, NH, qkv, dout);
    // The timed shape: one layer of 124M at B=16, T=1024.
    const int TB = LAB_B, TT = LAB_T;
    const size_t TN = (size_t)TB * TT * C;
    float *tqkv = lab_random_x(lab, 3 * TN, -1, 1), *tdout = lab_random_x(lab, TN, -1, 1);
    Args timed = upload(lab, TB, TT, C, NH, tqkv, tdout);
    const double forward_flops = 4.0 * TB * NH * (double)TT * TT * (C / NH) / 2;
    // And at B=64, the batch of the headline rows, for the flash versions:
    // what one head's tiles share in L2 matters more as the heads multiply.
    const int BB = 64;
    const size_t BN = (size_t)BB * TT * C;
    float *bqkv = lab_random_x(lab, 3 * BN, -1, 1), *bdout = lab_random_x(lab, BN, -1, 1);
    Args big = upload(lab, BB, TT, C, NH, bqkv, bdout);
    for (size_t i = 0; i < sizeof VERSIONS / sizeof VERSIONS[0]; i++) {
        if (VERSIONS[i].hopper && !lab->ctx.hopper) {
            printf("attention: %s left out: it runs on compute capability 9.0 only\n",
                   VERSIONS[i].name);
            continue;
        }
        use_version(lab, &check, (int)i);
        use_version(lab, &timed, (int)i);
        run_forward(lab, &check);
        run_backward(lab, &check);
        float *g_out = lab_download_x(lab, check.out, N);
        float *g_dqkv = lab_download_x(lab, check.dqkv, 3 * N);
        LabRow f = {"attention_forward", VERSIONS[i].name, "B16 T1024 NH12 hs64",
                    VERSIONS[i].chapter, lab_error(g_out, out, N), tolerance_of((int)i),
                    lab_time_ms(lab, run_forward, &timed), 0, forward_flops};
        lab_report(lab, &f);
        run_forward(lab, &timed);
        LabRow b = {"attention_backward", VERSIONS[i].name, "B16 T1024 NH12 hs64",
                    VERSIONS[i].chapter, lab_error(g_dqkv, dqkv, 3 * N), tolerance_of((int)i),
                    lab_time_ms(lab, run_backward, &timed), 0, 2.5 * forward_flops};
        lab_report(lab, &b);
        free(g_out), free(g_dqkv);
        if (VERSIONS[i].chapter >= 5) time_at_b64(lab, &big, (int)i, forward_flops * BB / TB,
                                                  f.error, b.error);
    }
    free(qkv), free(dout), free(out), free(preatt), free(att), free(dqkv), free(dpreatt);
    free(datt), free(tqkv), free(tdout), free(bqkv), free(bdout);
    lab_free_buffers(lab);
}
