// lab_encoder.c: the embedding's versions, forward and backward.
#include <math.h>
#include <stdlib.h>

#include "encoder.h"
#include "model/gpt2_cpu.h"
#include "lab.h"

typedef void (*EncoderForward)(const GpuContext *ctx, floatX *out, const int32_t *tokens,
                               const floatX *wte, const floatX *wpe, int B, int T, int C);
typedef void (*EncoderBackward)(const GpuContext *ctx, floatX *dwte, floatX *dwpe,
                                const floatX *dout, const int32_t *buckets, int num_buckets,
                                int B, int T, int C);

static const struct {
    const char *name;
    int chapter;
    EncoderForward fwd;
    EncoderBackward bwd;
} VERSIONS[] = {
    {"v1", 0, encoder_forward_v1, encoder_backward_v1},
    {"v2 fixed grid", 11, encoder_forward_v1, encoder_backward_v2},
};

typedef struct {
    int B, T, C, num_buckets, version;
    int32_t *tokens, *buckets;
    floatX *wte, *wpe, *out, *dout, *dwte, *dwpe;
} Args;

static Args upload(Lab *lab, int B, int T, int C, int V, const int32_t *tokens, const float *wte,
                   const float *wpe, const float *dout) {
    const size_t BT = (size_t)B * T, N = BT * C;
    EncoderBuckets eb;
    encoder_buckets_init(&eb, (int)BT, V);
    char err[ERR_LEN];
    if (encoder_buckets_build(&eb, tokens, err)) die("kernel lab: %s", err);
    float *zeros = xcalloc((size_t)V * C, sizeof(float));
    Args a = {.B = B, .T = T, .C = C, .num_buckets = eb.num_buckets,
              .tokens = lab_upload_i32(lab, tokens, BT),
              .buckets = lab_upload_i32(lab, eb.packed, encoder_buckets_ints((int)BT)),
              .wte = lab_upload_x(lab, wte, (size_t)V * C), .wpe = lab_upload_x(lab, wpe, (size_t)T * C),
              .out = lab_upload_x(lab, zeros, N), .dout = lab_upload_x(lab, dout, N),
              .dwte = lab_upload_x(lab, zeros, (size_t)V * C),
              .dwpe = lab_upload_x(lab, zeros, (size_t)T * C)};
    free(zeros);
    encoder_buckets_free(&eb);
    return a;
}

static void run_forward(Lab *lab, void *p) {
    Args *a = p;
    VERSIONS[a->version].fwd(&lab->ctx, a->out, a->tokens, a->wte, a->wpe, a->B, a->T, a->C);
}

static void run_backward(Lab *lab, void *p) {
    Args *a = p;
    VERSIONS[a->version].bwd(&lab->ctx, a->dwte, a->dwpe, a->dout, a->buckets, a->num_buckets,
                             a->B, a->T, a->C);
}

void lab_encoder(Lab *lab) {
    if (!lab_wants(lab, "encoder")) return;
    const int B = 2, T = 64, C = LAB_C, V = 1000;
    const size_t BT = (size_t)B * T, N = BT * C;
    int32_t *tokens = lab_random_tokens(lab, BT, V);
    float *wte = lab_random_x(lab, (size_t)V * C, -1, 1), *wpe = lab_random_x(lab, (size_t)T * C, -1, 1);
    float *dout = lab_random_x(lab, N, -1, 1), *out = xmalloc(N * sizeof(float));
    float *dwte = xcalloc((size_t)V * C, sizeof(float)), *dwpe = xcalloc((size_t)T * C, sizeof(float));
    cpu_encoder_forward(out, tokens, wte, wpe, B, T, C);
    cpu_encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
    Args check = upload(lab, B, T, C, V, tokens, wte, wpe, dout);
    // Timed: 124M's vocabulary and a batch of random tokens.
    const int TB = LAB_B, TT = LAB_T;
    const size_t TBT = (size_t)TB * TT, TN = TBT * C;
    int32_t *ttokens = lab_random_tokens(lab, TBT, LAB_V);
    float *twte = lab_random_x(lab, (size_t)LAB_V * C, -1, 1);
    float *twpe = lab_random_x(lab, (size_t)TT * C, -1, 1), *tdout = lab_random_x(lab, TN, -1, 1);
    Args timed = upload(lab, TB, TT, C, LAB_V, ttokens, twte, twpe, tdout);
    const double x = sizeof(floatX);
    for (size_t i = 0; i < sizeof VERSIONS / sizeof VERSIONS[0]; i++) {
        check.version = timed.version = (int)i;
        // The gradients accumulate: each version's check starts from zero.
        CUDA_CHECK(cudaMemset(check.dwte, 0, (size_t)V * C * sizeof(floatX)));
        CUDA_CHECK(cudaMemset(check.dwpe, 0, (size_t)T * C * sizeof(floatX)));
        run_forward(lab, &check);
        run_backward(lab, &check);
        float *g_out = lab_download_x(lab, check.out, N);
        float *g_dwte = lab_download_x(lab, check.dwte, (size_t)V * C);
        float *g_dwpe = lab_download_x(lab, check.dwpe, (size_t)T * C);
        // tokens, the rows of wte they pick, wpe, out
        LabRow f = {"encoder_forward", VERSIONS[i].name, "(B,T,C) 16x1024x768", VERSIONS[i].chapter,
                    lab_error(g_out, out, N), lab_tolerance(), lab_time_ms(lab, run_forward, &timed),
                    TBT * 4 + 2 * TN * x + (double)TT * C * x, 0};
        lab_report(lab, &f);
        // dout, the dwte rows of the batch's tokens read and written, dwpe read and written
        LabRow b = {"encoder_backward", VERSIONS[i].name, "(B,T,C) 16x1024x768",
                    VERSIONS[i].chapter,
                    fmax(lab_error(g_dwte, dwte, (size_t)V * C), lab_error(g_dwpe, dwpe, (size_t)T * C)),
                    lab_tolerance(), lab_time_ms(lab, run_backward, &timed),
                    TN * x + 2.0 * timed.num_buckets * C * x + 2.0 * TT * C * x, 0};
        lab_report(lab, &b);
        free(g_out), free(g_dwte), free(g_dwpe);
    }
    free(tokens), free(wte), free(wpe), free(dout), free(out), free(dwte), free(dwpe);
    free(ttokens), free(twte), free(twpe), free(tdout);
    lab_free_buffers(lab);
}
