// lab.c: see lab.h. The lab's main and what every family shares.
//
//   build/kernel_lab_fp32 [--csv FILE] [--only FAMILY] [--warm]
//   build/kernel_lab_bf16 [--csv FILE] [--only FAMILY] [--warm]
#include "lab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/compare.h"
#include "util/spread.h"
#include "model/flops.h"
#include "gpu/floatx_host.h"

int lab_wants(const Lab *lab, const char *family) {
    return lab->filter == NULL || strstr(family, lab->filter) != NULL;
}

double lab_tolerance(void) {
#ifdef PRECISION_BF16
    return 3e-2;
#else
    return 1e-4;
#endif
}

// ---- buffers ----------------------------------------------------------------

float *lab_random_x(Lab *lab, size_t n, float lo, float hi) {
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = round_to_floatx(lo + (hi - lo) * rng_uniform(&lab->rng));
    return x;
}

int32_t *lab_random_tokens(Lab *lab, size_t n, int V) {
    int32_t *x = xmalloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)rng_below(&lab->rng, (uint32_t)V);
    return x;
}

void *lab_alloc(Lab *lab, size_t bytes) {
    if (lab->num_buffers == (int)(sizeof lab->buffers / sizeof lab->buffers[0]))
        die("kernel lab: too many device buffers in one family");
    void *d = gpu_malloc(bytes, "a kernel lab buffer");
    lab->buffers[lab->num_buffers++] = d;
    return d;
}

floatX *lab_upload_x(Lab *lab, const float *host, size_t n) {
    floatX *stored = xmalloc(n * sizeof(floatX)), *d = lab_alloc(lab, n * sizeof(floatX));
    floatx_from_floats(stored, host, n);
    gpu_memcpy_sync(&lab->ctx, d, stored, n * sizeof(floatX), cudaMemcpyHostToDevice);
    free(stored);
    return d;
}

float *lab_upload_f32(Lab *lab, const float *host, size_t n) {
    float *d = lab_alloc(lab, n * sizeof(float));
    gpu_memcpy_sync(&lab->ctx, d, host, n * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

int32_t *lab_upload_i32(Lab *lab, const int32_t *host, size_t n) {
    int32_t *d = lab_alloc(lab, n * sizeof(int32_t));
    gpu_memcpy_sync(&lab->ctx, d, host, n * sizeof(int32_t), cudaMemcpyHostToDevice);
    return d;
}

float *lab_download_x(const Lab *lab, const floatX *d, size_t n) {
    gpu_stream_sync(&lab->ctx, "the kernel under test");
    floatX *stored = xmalloc(n * sizeof(floatX));
    float *host = xmalloc(n * sizeof(float));
    gpu_memcpy_sync(&lab->ctx, stored, d, n * sizeof(floatX), cudaMemcpyDeviceToHost);
    floats_from_floatx(host, stored, n);
    free(stored);
    return host;
}

float *lab_download_f32(const Lab *lab, const float *d, size_t n) {
    gpu_stream_sync(&lab->ctx, "the kernel under test");
    float *host = xmalloc(n * sizeof(float));
    gpu_memcpy_sync(&lab->ctx, host, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    return host;
}

void lab_free_buffers(Lab *lab) {
    gpu_stream_sync(&lab->ctx, "the family's last kernels");
    for (int i = 0; i < lab->num_buffers; i++) gpu_free(lab->buffers[i]);
    lab->num_buffers = 0;
}

double lab_error(const float *got, const float *ref, size_t n) {
    Diff d = diff_tensors(got, ref, n);
    if (isinf(d.max_diff)) return 1.0;  // a NaN somewhere
    return d.max_ref > 0 ? d.max_diff / d.max_ref : d.max_diff;
}

// ---- timing ------------------------------------------------------------------

LabTime lab_time_l2(Lab *lab, LabL2 l2, void (*run)(Lab *lab, void *arg), void *arg) {
    cudaEvent_t start[LAB_REPS], end[LAB_REPS];
    for (int i = 0; i < LAB_WARMUP; i++) run(lab, arg);
    for (int i = 0; i < LAB_REPS; i++) {
        CUDA_CHECK(cudaEventCreate(&start[i]));
        CUDA_CHECK(cudaEventCreate(&end[i]));
        if (l2 == LAB_L2_FLUSHED) gpu_l2_flush(&lab->ctx, &lab->flush, i);
        CUDA_CHECK(cudaEventRecord(start[i], lab->ctx.stream));
        run(lab, arg);
        CUDA_CHECK(cudaEventRecord(end[i], lab->ctx.stream));
    }
    gpu_event_sync(&lab->ctx, end[LAB_REPS - 1], "a timed kernel");
    double ms[LAB_REPS];
    for (int i = 0; i < LAB_REPS; i++) {
        float t;
        CUDA_CHECK(cudaEventElapsedTime(&t, start[i], end[i]));
        ms[i] = t;
        CUDA_CHECK(cudaEventDestroy(start[i]));
        CUDA_CHECK(cudaEventDestroy(end[i]));
    }
    const Spread s = spread_of(ms, LAB_REPS);
    return (LabTime){s.min, s.median, s.max, l2};
}

LabTime lab_time_ms(Lab *lab, void (*run)(Lab *lab, void *arg), void *arg) {
    return lab_time_l2(lab, lab->l2, run, arg);
}

GpuOps lab_ops_of(int chapter) {
    Optimizations o = chapter_optimizations(chapter);
    GpuLaunchSettings launch;  // the chapter's: not the lab's, which sets its own
    return gpu_ops_select(&o, &launch);
}

// ---- the report -------------------------------------------------------------

static const char *l2_name(LabL2 l2) { return l2 == LAB_L2_WARM ? "warm" : "flushed"; }

// The CSV's columns. ms is the median; min_ms, max_ms and l2 come last,
// after the columns that older files have, so that a reader of those by
// position reads these too.
static const char CSV_HEADER[] = "family,version,precision,chapter,shape,ms,bytes,flops,rate,"
                                 "peak_fraction,error,tolerance,check,min_ms,max_ms,l2";

void lab_report(Lab *lab, const LabRow *r) {
    const int ok = r->error <= r->tolerance;
    if (!ok) lab->failures++;
    const LabTime *t = &r->time;
    // A GEMM's yardstick is the tensor cores; everything else's is HBM.
    const int compute = r->flops > 0;
    // FLOPs per ms / 1e9 = TFLOP/s; bytes per ms / 1e6 = GB/s.
    const double rate = compute ? r->flops / (t->median * 1e9) : r->bytes / (t->median * 1e6);
    const double peak = compute ? lab->peak_tflops : lab->peak_tbps * 1e3;
    printf("%-30s %-14s %2d  %-22s %9.4f %9.4f %9.4f ms %9.1f %-7s %5.1f%%  err %.1e %s%s\n",
           r->family, r->version, r->chapter, r->shape, t->min, t->median, t->max, rate,
           compute ? "TFLOP/s" : "GB/s", peak > 0 ? 100 * rate / peak : 0.0, r->error,
           ok ? "ok" : "FAILED", t->l2 == LAB_L2_WARM ? "  (L2 warm)" : "");
    fflush(stdout);
    // A version with a comma in its name is quoted, so that it stays one field.
    const char *q = strchr(r->version, ',') ? "\"" : "";
    if (lab->csv)
        fprintf(lab->csv,
                "%s,%s%s%s,%s,%d,\"%s\",%.5f,%.0f,%.3e,%.2f,%.4f,%.3e,%.1e,%s,%.5f,%.5f,%s\n",
                r->family, q, r->version, q, PRECISION_NAME, r->chapter, r->shape, t->median,
                r->bytes, r->flops, rate, peak > 0 ? rate / peak : 0.0, r->error, r->tolerance,
                ok ? "ok" : "FAILED", t->min, t->max, l2_name(t->l2));
}

// Opens the CSV for appending; a new file gets the header first. An existing
// one must have this header: rows of another lab's columns would not line up.
static FILE *open_csv(const char *path) {
    char line[512] = "";
    FILE *existing = fopen(path, "r");
    if (existing) {
        if (!fgets(line, sizeof line, existing)) line[0] = '\0';
        fclose(existing);
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] && strcmp(line, CSV_HEADER) != 0)
            die("--csv %s: its header is not this lab's (%s): an older lab's file? Remove it, or "
                "write to another", path, CSV_HEADER);
    }
    FILE *csv = fopen(path, "a");
    if (!csv) die("--csv %s: cannot open for appending", path);
    if (!line[0]) fprintf(csv, "%s\n", CSV_HEADER);  // a new file, or an empty one
    return csv;
}

static const LabFamily FAMILIES[] = {lab_encoder, lab_layernorm, lab_matmul, lab_attention,
                                     lab_elementwise, lab_classifier, lab_optimizer,
                                     lab_optimizer8bit, lab_fp8, lab_gemm_steps};

int main(int argc, char **argv) {
    Lab lab;
    memset(&lab, 0, sizeof lab);
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) lab.filter = argv[++i];
        else if (!strcmp(argv[i], "--warm")) lab.l2 = LAB_L2_WARM;
        else {
            fprintf(stderr, "usage: %s [--csv FILE] [--only FAMILY] [--warm]\n", argv[0]);
            return 2;
        }
    }
    if (gpu_device_count() == 0) {
        fprintf(stderr, "error: no CUDA device: the kernel lab times kernels on a GPU\n");
        return 1;
    }
    gpu_context_init(&lab.ctx, GPU_FIRST_DEVICE);
    lab.ctx.sync_after_launch = 0;  // the lab times the kernels, not the waits
    rng_seed(&lab.rng, 2024);
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    lab.peak_tbps = peak_hbm_tbps(prop.name);
    lab.peak_tflops = peak_bf16_tflops(prop.name);
#ifndef PRECISION_BF16
    lab.peak_tflops /= 2;  // TF32's dense peak is half of bf16's (the fp32 rows use TF32's too)
#endif
    if (csv_path) lab.csv = open_csv(csv_path);
    gpu_l2_flush_init(&lab.ctx, &lab.flush);
    printf("kernel lab (%s): %s; peaks %.2f TB/s, %.0f TFLOP/s; %d calls after %d, each %s\n",
           PRECISION_NAME, prop.name, lab.peak_tbps, lab.peak_tflops, LAB_REPS, LAB_WARMUP,
           lab.l2 == LAB_L2_WARM ? "with the L2 cache as the last call left it (--warm)"
                                 : "after a write of twice the L2 cache");
    printf("%-30s %-14s %2s  %-22s %9s %9s %9s    %17s %6s\n", "family", "version", "ch",
           "timed shape", "min", "median", "max", "rate", "peak");
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++) FAMILIES[i](&lab);
    if (lab.csv) fclose(lab.csv);
    gpu_l2_flush_free(&lab.flush);
    gpu_context_free(&lab.ctx);
    if (lab.failures) printf("kernel lab: %d version(s) FAILED their check\n", lab.failures);
    return lab.failures ? 1 : 0;
}
