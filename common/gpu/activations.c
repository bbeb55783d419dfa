// activations.c: see activations.h.
#include "gpu/activations.h"

#include <string.h>

#include "gpu_context.h"
#include "gpu/gpu_ops.h"
#include "gpu/run_plan.h"
#include "util/util.h"

// A tensor's shape: up to five dimensions, each a symbol of the model.
// Vrow: the logits' row stride, Vp or more (gpu_ops_logits_stride).
typedef enum { D_, D_L, D_B, D_T, D_C, D_3C, D_4C, D_NH, D_VROW } Dim;
static const char *const DIM_NAMES[] = {"", "L", "B", "T", "C", "3C", "4C", "NH", "Vrow"};
#define MAX_DIMS 5

typedef struct {
    const char *name;
    size_t offset;  // of its pointer in GpuActivations
    int fp32;       // 1: float in every build; 0: floatX
    Dim shape[MAX_DIMS];
    // When the run needs it (run_plan.h): NULL is always. (Chapter 04's
    // fused classifier needs no probabilities, chapter 05's flash attention
    // no att.)
    int (*needed)(const RunPlan *p);
    // Chapter 14: the --recompute level from which a stacked tensor holds
    // one layer, the backward pass computing it again (recompute.h); KEPT:
    // none (every layer's is kept, or the tensor has no layers).
    Recompute recomputed_from;
} ActivationSpec;

#define KEPT RECOMPUTE_LEVELS

#define AT(field) offsetof(GpuActivations, field)

// Chapter 04's fused classifier keeps no probabilities, and writes dlogits
// over the logits (activations_alloc points d.logits at them).
static int unless_fused(const RunPlan *p) { return p->keeps_probs; }

// Chapter 05's flash attention keeps one log-sum-exp per row of scores
// instead of the rows themselves.
static int unless_flash(const RunPlan *p) { return p->keeps_scores; }
static int if_flash(const RunPlan *p) { return !p->keeps_scores; }

// ANCHOR: activation_table
static const ActivationSpec ACTIVATIONS[] = {
    // the forward pass's, kept for the backward pass
    {"encoded", AT(encoded), 0, {D_B, D_T, D_C}, NULL, KEPT},
    {"ln1", AT(ln1), 0, {D_L, D_B, D_T, D_C}, NULL, RECOMPUTE_NORMS},
    {"ln1_mean", AT(ln1_mean), 1, {D_L, D_B, D_T}, NULL, RECOMPUTE_NORMS},
    {"ln1_rstd", AT(ln1_rstd), 1, {D_L, D_B, D_T}, NULL, RECOMPUTE_NORMS},
    {"qkv", AT(qkv), 0, {D_L, D_B, D_T, D_3C}, NULL, RECOMPUTE_BLOCK},
    {"atty", AT(atty), 0, {D_L, D_B, D_T, D_C}, NULL, RECOMPUTE_BLOCK},
    {"att", AT(att), 0, {D_L, D_B, D_NH, D_T, D_T}, unless_flash, RECOMPUTE_BLOCK},
    {"att_lse", AT(att_lse), 1, {D_L, D_B, D_NH, D_T}, if_flash, RECOMPUTE_BLOCK},
    {"attproj", AT(attproj), 0, {D_L, D_B, D_T, D_C}, NULL, RECOMPUTE_BLOCK},
    {"residual2", AT(residual2), 0, {D_L, D_B, D_T, D_C}, NULL, RECOMPUTE_BLOCK},
    {"ln2", AT(ln2), 0, {D_L, D_B, D_T, D_C}, NULL, RECOMPUTE_NORMS},
    {"ln2_mean", AT(ln2_mean), 1, {D_L, D_B, D_T}, NULL, RECOMPUTE_NORMS},
    {"ln2_rstd", AT(ln2_rstd), 1, {D_L, D_B, D_T}, NULL, RECOMPUTE_NORMS},
    {"fch", AT(fch), 0, {D_L, D_B, D_T, D_4C}, NULL, RECOMPUTE_BLOCK},
    {"fch_gelu", AT(fch_gelu), 0, {D_L, D_B, D_T, D_4C}, NULL, RECOMPUTE_GELU},
    {"fcproj", AT(fcproj), 0, {D_L, D_B, D_T, D_C}, NULL, RECOMPUTE_BLOCK},
    {"residual3", AT(residual3), 0, {D_L, D_B, D_T, D_C}, NULL, KEPT},
    {"lnf", AT(lnf), 0, {D_B, D_T, D_C}, NULL, KEPT},
    {"lnf_mean", AT(lnf_mean), 1, {D_B, D_T}, NULL, KEPT},
    {"lnf_rstd", AT(lnf_rstd), 1, {D_B, D_T}, NULL, KEPT},
    {"logits", AT(logits), 0, {D_B, D_T, D_VROW}, NULL, KEPT},
    {"probs", AT(probs), 0, {D_B, D_T, D_VROW}, unless_fused, KEPT},
    {"losses", AT(losses), 1, {D_B, D_T}, NULL, KEPT},
    // the backward pass's: one layer's worth
    {"d.residual", AT(d.residual), 0, {D_B, D_T, D_C}, NULL, KEPT},
    {"d.ln", AT(d.ln), 0, {D_B, D_T, D_C}, NULL, KEPT},
    {"d.qkv", AT(d.qkv), 0, {D_B, D_T, D_3C}, NULL, KEPT},
    {"d.atty", AT(d.atty), 0, {D_B, D_T, D_C}, NULL, KEPT},
    {"d.fch", AT(d.fch), 0, {D_B, D_T, D_4C}, NULL, KEPT},
    {"d.lnf", AT(d.lnf), 0, {D_B, D_T, D_C}, NULL, KEPT},
    {"d.logits", AT(d.logits), 0, {D_B, D_T, D_VROW}, unless_fused, KEPT},
    {"d.losses", AT(d.losses), 1, {D_B, D_T}, unless_fused, KEPT},
};
// ANCHOR_END: activation_table
#define NUM_ACTIVATIONS ((int)(sizeof ACTIVATIONS / sizeof ACTIVATIONS[0]))

// Every tensor starts on a 256-byte boundary, as cudaMalloc's would: the
// kernels' vector loads need their rows aligned.
#define ALIGN 256

// Chapter 14: the tensor holds one layer, which the backward pass
// recomputes for each layer in turn, at the level `r`.
static int one_layer(const ActivationSpec *s, Recompute r) { return r >= s->recomputed_from; }

// The size of dimension d of tensor s: L is 1 for a tensor recomputed.
static size_t dim_size(const ActivationSpec *s, Dim d, const GPT2Config *c, int B, int T,
                       const RunPlan *p) {
    switch (d) {
    case D_L: return one_layer(s, p->recompute) ? 1 : (size_t)c->num_layers;
    case D_B: return (size_t)B;
    case D_T: return (size_t)T;
    case D_C: return (size_t)c->channels;
    case D_3C: return 3 * (size_t)c->channels;
    case D_4C: return 4 * (size_t)c->channels;
    case D_NH: return (size_t)c->num_heads;
    case D_VROW: return (size_t)p->logits_stride;
    default: return 1;
    }
}

static size_t spec_elements(const ActivationSpec *s, const GPT2Config *c, int B, int T,
                            const RunPlan *p) {
    size_t n = 1;
    for (int i = 0; i < MAX_DIMS; i++) n *= dim_size(s, s->shape[i], c, B, T, p);
    return n;
}

static size_t spec_bytes(const ActivationSpec *s, const GPT2Config *c, int B, int T,
                         const RunPlan *p) {
    size_t bytes = spec_elements(s, c, B, T, p) * (s->fp32 ? sizeof(float) : sizeof(floatX));
    return (bytes + ALIGN - 1) / ALIGN * ALIGN;
}

static int is_needed(const ActivationSpec *s, const RunPlan *p) {
    return s->needed == NULL || s->needed(p);
}

size_t activations_bytes(const GPT2Config *cfg, int B, int T, const RunPlan *p) {
    size_t bytes = 0;
    for (int i = 0; i < NUM_ACTIVATIONS; i++)
        if (is_needed(&ACTIVATIONS[i], p)) bytes += spec_bytes(&ACTIVATIONS[i], cfg, B, T, p);
    return bytes;
}

void activations_alloc(GpuActivations *a, const GPT2Config *cfg, int B, int T,
                       const RunPlan *p) {
    memset(a, 0, sizeof *a);
    a->recompute = p->recompute;
    a->bytes = activations_bytes(cfg, B, T, p);
    a->memory = gpu_malloc(a->bytes, "the activations (--memory lists them)");
    char *next = a->memory;
    for (int i = 0; i < NUM_ACTIVATIONS; i++) {
        const ActivationSpec *s = &ACTIVATIONS[i];
        if (!is_needed(s, p)) continue;
        void *at = next;  // into the struct's pointer field, whatever its type
        memcpy((char *)a + s->offset, &at, sizeof at);
        next += spec_bytes(s, cfg, B, T, p);
    }
    if (!a->d.logits) a->d.logits = a->logits;  // written in place: see unless_fused
}

int activations_layer(const GpuActivations *a, size_t field, int l) {
    for (int i = 0; i < NUM_ACTIVATIONS; i++) {
        const ActivationSpec *s = &ACTIVATIONS[i];
        if (s->offset != field) continue;
        if (s->shape[0] != D_L) die("activations_layer: %s is not stacked by layer", s->name);
        return one_layer(s, a->recompute) ? 0 : l;
    }
    die("activations_layer: no tensor at offset %zu of GpuActivations", field);
    return 0;  // not reached
}

void activations_free(GpuActivations *a) {
    gpu_free(a->memory);
    memset(a, 0, sizeof *a);
}

// "(L,B,T,C)"; a tensor the plan recomputes (chapter 14) has one layer,
// "(B,T,C)".
static void format_shape(char *out, size_t cap, const ActivationSpec *s, const RunPlan *p) {
    size_t len = (size_t)snprintf(out, cap, "(");
    const char *sep = "";
    for (int i = 0; i < MAX_DIMS && s->shape[i] != D_ && len < cap; i++) {
        if (s->shape[i] == D_L && one_layer(s, p->recompute)) continue;
        len += (size_t)snprintf(out + len, cap - len, "%s%s", sep, DIM_NAMES[s->shape[i]]);
        sep = ",";
    }
    if (len < cap) snprintf(out + len, cap - len, ")");
}

void activations_print(FILE *out, const GPT2Config *cfg, int B, int T, const RunPlan *p) {
    const double mib = 1024.0 * 1024.0;
    for (int i = 0; i < NUM_ACTIVATIONS; i++) {
        const ActivationSpec *s = &ACTIVATIONS[i];
        char shape[48];
        format_shape(shape, sizeof shape, s, p);
        if (!is_needed(s, p)) {
            fprintf(out, "memory:   %-12s %-16s %-5s %10s  (not needed)\n", s->name, shape,
                    s->fp32 ? "fp32" : PRECISION_NAME, "-");
            continue;
        }
        const int recomputed = s->shape[0] == D_L && one_layer(s, p->recompute);
        fprintf(out, "memory:   %-12s %-16s %-5s %10.1f MiB%s\n", s->name, shape,
                s->fp32 ? "fp32" : PRECISION_NAME, spec_bytes(s, cfg, B, T, p) / mib,
                recomputed ? "  (one layer, which every layer shares)" : "");
    }
}
