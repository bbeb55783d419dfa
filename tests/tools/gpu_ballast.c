// gpu_ballast.c: holds GPU memory so that another program sees a smaller
// card. `gpu_ballast GIB [SECONDS]` allocates all of GPU 0's free memory but
// GIB GiB, prints "ballast: ..." on one line, and keeps it until it is
// killed, or SECONDS (default 900) have passed, so that a test that dies
// leaves no card held for long. The first-run tests run each chapter beside
// it, as on a card of 10, 16 or 24 GiB (tests/shell/test_gpu_first_run.sh).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHUNK ((size_t)256 << 20)

int main(int argc, char **argv) {
    char *end;
    const double leave_gib = argc >= 2 ? strtod(argv[1], &end) : -1;
    const int seconds = argc == 3 ? atoi(argv[2]) : 900;
    if (argc < 2 || argc > 3 || *end || leave_gib < 0 || seconds <= 0) {
        fprintf(stderr, "usage: %s GIB [SECONDS]: hold GPU 0's free memory but GIB GiB\n",
                argv[0]);
        return 2;
    }
    const size_t leave = (size_t)(leave_gib * (1 << 30));
    size_t free_bytes, total;
    if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
        fprintf(stderr, "gpu_ballast: no CUDA device\n");
        return 1;
    }
    // In chunks, the last one smaller, until what is left is `leave`.
    while (free_bytes > leave) {
        size_t bytes = free_bytes - leave < CHUNK ? free_bytes - leave : CHUNK;
        void *p;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            fprintf(stderr, "gpu_ballast: cudaMalloc of %zu bytes failed\n", bytes);
            return 1;
        }
        if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 1;
    }
    printf("ballast: %.2f GiB of %.2f GiB left free\n", free_bytes / (double)(1 << 30),
           total / (double)(1 << 30));
    fflush(stdout);
    sleep((unsigned)seconds);  // a signal ends it sooner
    return 0;
}
