// lab.h: the kernel lab (`make kernel-bench`): every version of every kernel
// family side by side, through the real launchers of kernels/ and
// solutions/ (never copies of them), each one
//   1. checked against the CPU reference on a small shape of random inputs
//      (its error relative to the output's scale, against a sanity bound;
//      the tests in tests/gpu/ are the precise parity checks), then
//   2. timed at GPT-2 124M's shape, B=16, T=1024: CUDA events around each
//      call, the median of LAB_REPS calls after LAB_WARMUP, and printed with
//      its bandwidth or arithmetic rate and the fraction of the GPU's peak.
// Built twice, like the trainer: build/kernel_lab_fp32 and
// build/kernel_lab_bf16 time each kernel in its build's storage type. Each
// row also goes to a CSV file (results/<gpu>/kernels.csv).
//
// A family is one file here: a table of its versions (name, the chapter
// that brought it, the launcher) and one function that checks and times
// them all. A new version is a new row of its family's table.
#ifndef LAB_H
#define LAB_H

#include <stddef.h>
#include <stdio.h>

#include "gpu_context.h"
#include "gpu/gpu_ops.h"
#include "precision.h"
#include "util/util.h"

#define LAB_WARMUP 5
#define LAB_REPS 50

// GPT-2 124M at the benchmark's batch.
#define LAB_B 16
#define LAB_T 1024
#define LAB_C 768
#define LAB_NH 12
#define LAB_V 50257

typedef struct {
    GpuContext ctx;
    FILE *csv;
    const char *filter;         // only families whose name contains it (NULL: all)
    double peak_tbps;           // HBM bandwidth, read + write
    double peak_tflops;         // the tensor cores' dense peak for this build's GEMMs
    Rng rng;
    int failures;               // versions whose check failed
    void *buffers[64];          // device buffers of the current family
    int num_buffers;
} Lab;

// What one version of a kernel did: its check and its time.
typedef struct {
    const char *family, *version, *shape;
    int chapter;
    double error, tolerance;    // max |gpu - cpu| / max |cpu| on the check shape
    double ms;                  // median at the timed shape
    double bytes, flops;        // the least it must move and compute, per call
} LabRow;

// A lab family: checks and times every version of one kernel.
typedef void (*LabFamily)(Lab *lab);

int lab_wants(const Lab *lab, const char *family);
// Prints the row and appends it to the CSV; counts a failed check.
void lab_report(Lab *lab, const LabRow *row);

// The check bound of this build: fp32 kernels agree with the CPU to a few
// ulps of their sums; bf16 ones round what they store to 8 bits, several
// times deep: the bounds only tell a working kernel from a broken one.
double lab_tolerance(void);

// ---- buffers --------------------------------------------------------------
// Host floats, uniform in [lo, hi), rounded to floatX (so that the CPU
// reference reads exactly what the kernel reads).
float *lab_random_x(Lab *lab, size_t n, float lo, float hi);
int32_t *lab_random_tokens(Lab *lab, size_t n, int V);
// Device buffers, freed by lab_free_buffers.
floatX *lab_upload_x(Lab *lab, const float *host, size_t n);
float *lab_upload_f32(Lab *lab, const float *host, size_t n);
int32_t *lab_upload_i32(Lab *lab, const int32_t *host, size_t n);
void *lab_alloc(Lab *lab, size_t bytes);
float *lab_download_x(const Lab *lab, const floatX *d, size_t n);   // fresh host floats
float *lab_download_f32(const Lab *lab, const float *d, size_t n);
void lab_free_buffers(Lab *lab);

// The model's launcher slots of chapter `chapter` (gpu_ops_select), for the
// families whose versions are compositions of kernels (the eager matmul, the
// residual + layernorm seam): the lab times exactly what the model runs.
// The context's launch settings are left as the lab set them.
GpuOps lab_ops_of(int chapter);

// max |got - ref| / max |ref| (1 for a NaN).
double lab_error(const float *got, const float *ref, size_t n);

// ---- timing ---------------------------------------------------------------
// Median milliseconds of run(lab, arg) over LAB_REPS calls after LAB_WARMUP.
double lab_time_ms(Lab *lab, void (*run)(Lab *lab, void *arg), void *arg);

// The families.
void lab_encoder(Lab *lab);
void lab_layernorm(Lab *lab);
void lab_matmul(Lab *lab);
void lab_attention(Lab *lab);
void lab_elementwise(Lab *lab);
void lab_classifier(Lab *lab);
void lab_optimizer(Lab *lab);
void lab_optimizer8bit(Lab *lab);
void lab_fp8(Lab *lab);

#endif
