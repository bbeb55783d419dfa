// lab.h: the kernel lab (`make kernel-bench`): every version of every kernel
// family side by side, through the real launchers of kernels/ and
// solutions/ (never copies of them), each one
//   1. checked against the CPU reference on a small shape of random inputs
//      (its error relative to the output's scale, against a sanity bound;
//      the tests in tests/gpu/ are the precise parity checks), then
//   2. timed at GPT-2 124M's shape, B=16, T=1024: LAB_REPS calls after
//      LAB_WARMUP, each between its own pair of CUDA events and each after
//      the L2 cache is flushed (lab_time_ms, below); printed with the least,
//      the median and the largest of the calls' times, and, from the median,
//      its bandwidth or arithmetic rate and the fraction of the GPU's peak.
// Built twice, like the trainer: build/kernel_lab_fp32 and
// build/kernel_lab_bf16 time each kernel in its build's storage type. Each
// row also goes to a CSV file (results/<gpu>/kernels.csv): `ms` is the
// median, `min_ms` and `max_ms` the extremes, `l2` flushed or warm.
//
// Why every row is timed from a flushed cache. A kernel called again and
// again finds in the L2 cache (50 MB on the H100) what its last call left
// there, and at B=16 that is much of what it reads: one (B,T,C) tensor in
// bf16 is 25 MB, so a layernorm's whole input, or an attention projection's,
// would come from the cache, and its rate against HBM's peak (peak_fraction)
// would measure the cache. In the step a kernel often reads what the kernel
// before it has just written, some of it still cached; a warm loop does not
// reproduce that either (what it leaves cached is the kernel's own last
// call), and the step's own times are the profiler's (--profile). So the lab
// measures every kernel from memory, its roofline's premise, and versions
// compare on equal terms. The only kernel of microseconds, the fp32
// crossentropy_forward (one probability a row, 16,384 rows), is cold in the
// step as well: the softmax before it wrote 3.3 GB of probabilities, and the
// ones it reads lie all over them. The flush is not timed, whatever a
// kernel's length: it runs before the call's first event, and while the GPU
// writes it the host has queued the call, so the call's launch is not timed
// either.
// A row that has a reason to run warm takes lab_time_l2(LAB_L2_WARM) with
// that reason beside it, and its CSV row says `warm`; no row has one today.
// `--warm` runs every row warm, to see what the cache is worth.
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

// Whether each timed call starts from a flushed L2 cache (see above).
typedef enum { LAB_L2_FLUSHED, LAB_L2_WARM } LabL2;

typedef struct {
    GpuContext ctx;
    GpuL2Flush flush;           // a buffer of twice the L2 cache (gpu_context.h)
    LabL2 l2;                   // lab_time_ms's: flushed, or warm under --warm
    FILE *csv;
    const char *filter;         // only families whose name contains it (NULL: all)
    double peak_tbps;           // HBM bandwidth, read + write
    double peak_tflops;         // the tensor cores' dense peak for this build's GEMMs
    Rng rng;
    int failures;               // versions whose check failed
    void *buffers[64];          // device buffers of the current family
    int num_buffers;
} Lab;

// The times of one kernel's LAB_REPS calls, in ms, and how they were taken.
typedef struct {
    double min, median, max;
    LabL2 l2;
} LabTime;

// What one version of a kernel did: its check and its time.
typedef struct {
    const char *family, *version, *shape;
    int chapter;
    double error, tolerance;    // max |gpu - cpu| / max |cpu| on the check shape
    LabTime time;               // at the timed shape; rates come from its median
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
// run(lab, arg) called LAB_WARMUP times, then LAB_REPS times, each call
// between its own pair of events and, with LAB_L2_FLUSHED, after a flush of
// the L2 cache; all of them queued, then waited for once. The least, the
// median and the largest of the calls' milliseconds.
LabTime lab_time_l2(Lab *lab, LabL2 l2, void (*run)(Lab *lab, void *arg), void *arg);
// The same, the lab's way: flushed (warm under --warm).
LabTime lab_time_ms(Lab *lab, void (*run)(Lab *lab, void *arg), void *arg);

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
void lab_gemm_steps(Lab *lab);

#endif
