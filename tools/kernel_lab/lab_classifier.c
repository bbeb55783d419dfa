// lab_classifier.c: the loss at the end of the model, over (B*T, V) logits:
// the softmax, the cross-entropy and their backward pass, one by one and as
// the whole classifier of a training step (forward and backward).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "classifier.h"
#include "model/gpt2_cpu.h"
#include "lab.h"
#include "softmax_crossentropy.h"

typedef struct {
    int B, T, V, Vp, ld;
    floatX *logits, *probs, *dlogits;
    floatX *padded;  // the logits again, in rows of ld (a multiple of 8): chapter 04's
    float *losses, *mean, *dlosses;
    int32_t *targets;
} Args;

// The logits (rows, V) copied into rows of ld, the padding zero.
static float *pad_rows(const float *x, size_t rows, int V, int ld) {
    float *y = xcalloc(rows * ld, sizeof(float));
    for (size_t r = 0; r < rows; r++) memcpy(y + r * ld, x + r * V, (size_t)V * sizeof(float));
    return y;
}

static Args upload(Lab *lab, int B, int T, int V, const float *logits, const int32_t *targets) {
    const size_t BT = (size_t)B * T, N = BT * V;
    const int ld = (V + 7) / 8 * 8;
    float *zeros = xcalloc(N, sizeof(float)), *padded = pad_rows(logits, BT, V, ld);
    Args a = {.B = B, .T = T, .V = V, .Vp = V, .ld = ld, .logits = lab_upload_x(lab, logits, N),
              .padded = lab_upload_x(lab, padded, BT * ld),
              .probs = lab_upload_x(lab, zeros, N), .dlogits = lab_upload_x(lab, zeros, N),
              .losses = lab_alloc(lab, BT * sizeof(float)), .mean = lab_alloc(lab, sizeof(float)),
              .dlosses = lab_alloc(lab, BT * sizeof(float)),
              .targets = lab_upload_i32(lab, targets, BT)};
    free(zeros), free(padded);
    return a;
}

static void softmax(Lab *lab, void *p) {
    Args *a = p;
    softmax_forward_v1(&lab->ctx, a->probs, a->logits, a->B, a->T, a->V, a->Vp);
}

static void crossentropy(Lab *lab, void *p) {
    Args *a = p;
    crossentropy_forward_v1(&lab->ctx, a->losses, a->logits, a->probs, a->targets, a->B, a->T,
                            a->V, a->Vp);
}

static void backward(Lab *lab, void *p) {
    Args *a = p;
    crossentropy_softmax_backward_v1(&lab->ctx, a->dlogits, a->dlosses, a->probs, a->targets,
                                     a->B, a->T, a->V, a->Vp);
}

// Chapter 00's classifier, a training step's worth: the softmax, the losses
// and their mean, the loss gradient, and dlogits (zeroed, then added to).
static void classifier_eager(Lab *lab, void *p) {
    Args *a = p;
    softmax(lab, a);
    crossentropy(lab, a);
    loss_mean_v1(&lab->ctx, a->mean, a->losses, a->B, a->T);
    dlosses_fill_v1(&lab->ctx, a->dlosses, a->B, a->T);
    gpu_zero(&lab->ctx, a->dlogits, (size_t)a->B * a->T * a->Vp * sizeof(floatX), "memset");
    backward(lab, a);
}

// Chapter 04's: one kernel, forward and backward, dlogits over the logits.
static void classifier_fused(Lab *lab, void *p) {
    Args *a = p;
    classifier_fused_v2(&lab->ctx, a->losses, a->mean, a->padded, NULL, a->targets, a->B, a->T,
                        a->V, a->ld, 1);
}

// Chapter 11's: the same, each row kept in shared memory between the passes.
static void classifier_fused_v3_lab(Lab *lab, void *p) {
    Args *a = p;
    classifier_fused_v3(&lab->ctx, a->losses, a->mean, a->padded, NULL, a->targets, a->B, a->T,
                        a->V, a->ld, 1);
}

// A fused classifier's error on `a` (run once, on logits not yet overwritten):
// its losses and its dlogits, the padding left out, against the CPU's.
static double fused_error(Lab *lab, Args *a, void (*run)(Lab *lab, void *args),
                          const float *losses, const float *dlogits) {
    const size_t BT = (size_t)a->B * a->T, N = BT * a->V;
    run(lab, a);
    float *g_losses = lab_download_f32(lab, a->losses, BT);
    float *g_padded = lab_download_x(lab, a->padded, BT * a->ld);
    float *g_dlogits = xmalloc(N * sizeof(float));
    for (size_t r = 0; r < BT; r++)
        memcpy(g_dlogits + r * a->V, g_padded + r * a->ld, (size_t)a->V * sizeof(float));
    const double error = fmax(lab_error(g_losses, losses, BT), lab_error(g_dlogits, dlogits, N));
    free(g_losses), free(g_padded), free(g_dlogits);
    return error;
}

// The least crossentropy_forward_v1 must move, rows of n values in all. Its
// two builds run different kernels (softmax_crossentropy.cu): in bf16 the loss
// comes from the logits, every one of them read; in fp32 one thread a row reads
// the target's probability alone, not the row. Each also reads a target and
// writes a loss per row. Counted as a (B,T,V) tensor in fp32, the 16,384
// probabilities it reads made the lab report 450 TB/s.
static double crossentropy_bytes(size_t rows, size_t n) {
    const double per_row = sizeof(int32_t) + sizeof(float);
#ifdef PRECISION_BF16
    return (double)n * sizeof(floatX) + (double)rows * per_row;
#else
    (void)n;
    return (double)rows * (sizeof(floatX) + per_row);
#endif
}

static const struct {
    const char *family, *version;
    int chapter;
    void (*run)(Lab *lab, void *args);
    int reads, writes;  // (B,T,V) tensors that must be read and written; -1: see bytes
} VERSIONS[] = {
    {"softmax_forward", "v1", 0, softmax, 1, 1},
    {"crossentropy_forward", "v1", 0, crossentropy, -1, -1},
    {"crossentropy_softmax_backward", "v1", 0, backward, 1, 1},
    {"classifier", "v1 eager", 0, classifier_eager, 1, 1},
    {"classifier", "v2 fused", 4, classifier_fused, 1, 1},
    {"classifier", "v3 row in smem", 11, classifier_fused_v3_lab, 1, 1},
};

void lab_classifier(Lab *lab) {
    // The check: 32 rows of GPT-2's vocabulary; dlogits from zero.
    const int B = 2, T = 16, V = LAB_V;
    const size_t BT = (size_t)B * T, N = BT * V;
    float *logits = lab_random_x(lab, N, -6, 6);
    int32_t *targets = lab_random_tokens(lab, BT, V);
    float *probs = xmalloc(N * sizeof(float)), *losses = xmalloc(BT * sizeof(float));
    float *dlosses = xmalloc(BT * sizeof(float)), *dlogits = xcalloc(N, sizeof(float));
    cpu_softmax_forward(probs, logits, B, T, V, V);
    cpu_crossentropy_forward(losses, probs, targets, B, T, V);
    for (size_t i = 0; i < BT; i++) dlosses[i] = 1.0f / (float)BT;
    cpu_crossentropy_softmax_backward(dlogits, dlosses, probs, targets, B, T, V, V);
    Args check = upload(lab, B, T, V, logits, targets);
    classifier_eager(lab, &check);
    float *g_probs = lab_download_x(lab, check.probs, N);
    float *g_losses = lab_download_f32(lab, check.losses, BT);
    float *g_dlogits = lab_download_x(lab, check.dlogits, N);
    // Each fused version writes over its logits: v3 gets a fresh copy.
    Args check3 = upload(lab, B, T, V, logits, targets);
    const double errors[] = {
        lab_error(g_probs, probs, N), lab_error(g_losses, losses, BT),
        lab_error(g_dlogits, dlogits, N),
        fmax(lab_error(g_losses, losses, BT), lab_error(g_dlogits, dlogits, N)),
        fused_error(lab, &check, classifier_fused, losses, dlogits),
        fused_error(lab, &check3, classifier_fused_v3_lab, losses, dlogits)};
    // Timed: 124M's B*T = 16384 rows of 50257.
    const size_t TBT = (size_t)LAB_B * LAB_T, TN = TBT * V;
    float *tlogits = lab_random_x(lab, TN, -6, 6);
    int32_t *ttargets = lab_random_tokens(lab, TBT, V);
    Args timed = upload(lab, LAB_B, LAB_T, V, tlogits, ttargets);
    classifier_eager(lab, &timed);  // probabilities for the kernels that read them
    for (size_t i = 0; i < sizeof VERSIONS / sizeof VERSIONS[0]; i++) {
        if (!lab_wants(lab, VERSIONS[i].family)) continue;
        const double bytes = VERSIONS[i].reads < 0
            ? crossentropy_bytes(TBT, TN)
            : (double)(VERSIONS[i].reads + VERSIONS[i].writes) * TN * sizeof(floatX);
        LabRow r = {VERSIONS[i].family, VERSIONS[i].version, "(B*T,V) 16384x50257",
                    VERSIONS[i].chapter, errors[i], lab_tolerance(),
                    lab_time_ms(lab, VERSIONS[i].run, &timed), bytes, 0};
        lab_report(lab, &r);
    }
    free(logits), free(targets), free(probs), free(losses), free(dlosses), free(dlogits);
    free(g_probs), free(g_losses), free(g_dlogits), free(tlogits), free(ttargets);
    lab_free_buffers(lab);
}
