// gpu_comm.c: see gpu_comm.h.
#define _POSIX_C_SOURCE 200809L  // nanosleep
#include "gpu/gpu_comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/rendezvous.h"
#include "util/util.h"

#ifndef WITH_NCCL
int gpu_comm_init(GpuComm *c, const GpuContext *ctx, int rank, int world_size,
                  const char *id_path, double timeout_s, char *err) {
    (void)ctx, (void)id_path, (void)timeout_s;
    memset(c, 0, sizeof *c);
    c->rank = rank, c->world_size = world_size;
    if (world_size == 1) return 0;
    return fail(err, "a run of %d processes needs NCCL, and this trainer was built without it "
                     "(no nccl.h where the Makefile looks: NCCL_HOME)", world_size);
}
void gpu_comm_free(GpuComm *c) { memset(c, 0, sizeof *c); }
void gpu_comm_progress(GpuComm *c) { (void)c; }
void gpu_comm_mean_async(GpuComm *c, const GpuContext *ctx, floatX *const *ptrs,
                         const size_t *counts, int n) {
    (void)c, (void)ctx, (void)ptrs, (void)counts, (void)n;
}
void gpu_comm_wait(GpuComm *c, const GpuContext *ctx) { (void)c, (void)ctx; }
void gpu_comm_mean_to_owners_async(GpuComm *c, const GpuContext *ctx, floatX *buf,
                                   const size_t *firsts, const size_t *counts, int n,
                                   size_t shard_values) {
    (void)c, (void)ctx, (void)buf, (void)firsts, (void)counts, (void)n, (void)shard_values;
}
void gpu_comm_mean_scatter_async(GpuComm *c, const GpuContext *ctx, floatX *buf,
                                 size_t shard_values) {
    (void)c, (void)ctx, (void)buf, (void)shard_values;
}
void gpu_comm_gather(GpuComm *c, const GpuContext *ctx, floatX *buf, size_t shard_values) {
    (void)c, (void)ctx, (void)buf, (void)shard_values;
}
void gpu_comm_gather_floats(GpuComm *c, const GpuContext *ctx, float *x, size_t each) {
    (void)c, (void)ctx, (void)x, (void)each;
}
void gpu_comm_send(GpuComm *c, const GpuContext *ctx, const void *buf, size_t bytes, int peer) {
    (void)c, (void)ctx, (void)buf, (void)bytes, (void)peer;
    die("gpu_comm_send: a trainer built without NCCL has no other rank");
}
void gpu_comm_recv(GpuComm *c, const GpuContext *ctx, void *buf, size_t bytes, int peer) {
    (void)c, (void)ctx, (void)buf, (void)bytes, (void)peer;
    die("gpu_comm_recv: a trainer built without NCCL has no other rank");
}
void gpu_comm_mean_floats(GpuComm *c, const GpuContext *ctx, float *x, size_t n) {
    (void)c, (void)ctx, (void)x, (void)n;
}
int gpu_comm_same_everywhere(GpuComm *c, const GpuContext *ctx, uint64_t value,
                             const char *what, char *err) {
    (void)c, (void)ctx, (void)value, (void)what, (void)err;
    return 0;
}
#else
#include <nccl.h>

static ncclComm_t comm_of(const GpuComm *c) { return (ncclComm_t)c->nccl; }

// Every NCCL call is checked: a failure names the call and NCCL's reason.
#define NCCL_CHECK(call)                                                              \
    do {                                                                              \
        ncclResult_t r_ = (call);                                                     \
        if (r_ != ncclSuccess) die("%s failed: %s", #call, ncclGetErrorString(r_)); \
    } while (0)

#ifdef PRECISION_BF16
#define NCCL_FLOATX ncclBfloat16
#else
#define NCCL_FLOATX ncclFloat32
#endif

// ANCHOR: watchdog
// Once a second: has NCCL failed (a peer gone, a network error), or has the
// run gone timeout_s without progress (a rank stopped, and this one waits
// inside a collective for it)? Either way the run cannot go on: say which,
// and exit. The exit ends this process's kernels, the collective waiting
// for the gone rank among them; ncclCommAbort would first wait for them.
static void *watch(void *arg) {
    GpuComm *c = arg;
    const struct timespec second = {1, 0};
    for (;;) {
        nanosleep(&second, NULL);
        pthread_mutex_lock(&c->lock);
        const int watching = c->watching;
        const double idle = now_ms() / 1e3 - c->last_progress;
        ncclComm_t comm = comm_of(c);  // NULL while the ranks are still joining
        pthread_mutex_unlock(&c->lock);
        if (!watching) return NULL;
        ncclResult_t async = ncclSuccess;
        if (comm) ncclCommGetAsyncError(comm, &async);
        if (async == ncclSuccess && idle <= c->timeout_s) continue;
        if (async != ncclSuccess)
            fprintf(stderr, "error: rank %d of %d: NCCL reports %s: stopping\n", c->rank,
                    c->world_size, ncclGetErrorString(async));
        else
            fprintf(stderr, "error: rank %d of %d: no progress in %.0f s (--comm-timeout): "
                            "another rank has stopped, never came, or waits elsewhere: "
                            "stopping\n", c->rank, c->world_size, c->timeout_s);
        _exit(1);
    }
}
// ANCHOR_END: watchdog

// ANCHOR: comm_init
int gpu_comm_init(GpuComm *c, const GpuContext *ctx, int rank, int world_size,
                  const char *id_path, double timeout_s, char *err) {
    memset(c, 0, sizeof *c);
    c->rank = rank, c->world_size = world_size, c->timeout_s = timeout_s;
    if (world_size == 1) return 0;
    ncclUniqueId id;
    if (rank == 0) {
        NCCL_CHECK(ncclGetUniqueId(&id));
        if (rendezvous_publish(id_path, &id, sizeof id, err)) return -1;
    } else if (rendezvous_wait(id_path, &id, sizeof id, timeout_s, err)) {
        return -1;
    }
    // The watchdog covers the joining too: a rank that never comes, or a
    // rank that read a gone run's id before rank 0 could refuse the file.
    pthread_mutex_init(&c->lock, NULL);
    c->last_progress = now_ms() / 1e3;
    c->watching = 1;
    pthread_create(&c->watchdog, NULL, watch, c);
    ncclComm_t comm;
    CUDA_CHECK(cudaSetDevice(ctx->device));
    NCCL_CHECK(ncclCommInitRank(&comm, world_size, id, rank));
    pthread_mutex_lock(&c->lock);
    c->nccl = comm;
    pthread_mutex_unlock(&c->lock);
    // Every rank has read the id: it has served its purpose.
    if (rank == 0) remove(id_path);
    // The communication stream at the device's highest priority: when an SM
    // frees up, the all-reduce's blocks go first, ahead of the backward
    // pass's next kernel, which would otherwise fill every SM again.
    int least, greatest;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, greatest));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->join, cudaEventDisableTiming));
    return 0;
}
// ANCHOR_END: comm_init

void gpu_comm_free(GpuComm *c) {
    if (!c->nccl) return;
    pthread_mutex_lock(&c->lock);
    c->watching = 0;
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->watchdog, NULL);
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    NCCL_CHECK(ncclCommDestroy(comm_of(c)));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    CUDA_CHECK(cudaEventDestroy(c->fork));
    CUDA_CHECK(cudaEventDestroy(c->join));
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof *c);
}

void gpu_comm_progress(GpuComm *c) {
    if (!c->nccl) return;
    pthread_mutex_lock(&c->lock);
    c->last_progress = now_ms() / 1e3;
    pthread_mutex_unlock(&c->lock);
}

// The communication stream starts where the model's stream is: after the
// kernels that wrote what it is to send.
static void fork_from(GpuComm *c, const GpuContext *ctx) {
    CUDA_CHECK(cudaEventRecord(c->fork, ctx->stream));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->fork, 0));
}

// ANCHOR: comm_mean
void gpu_comm_mean_async(GpuComm *c, const GpuContext *ctx, floatX *const *ptrs,
                         const size_t *counts, int n) {
    fork_from(c, ctx);
    // One group: NCCL runs the tensors' all-reduces as one operation.
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < n; i++)
        NCCL_CHECK(ncclAllReduce(ptrs[i], ptrs[i], counts[i], NCCL_FLOATX, ncclAvg, comm_of(c),
                                 c->stream));
    NCCL_CHECK(ncclGroupEnd());
}

void gpu_comm_wait(GpuComm *c, const GpuContext *ctx) {
    if (!c->nccl) return;
    CUDA_CHECK(cudaEventRecord(c->join, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(ctx->stream, c->join, 0));
}
// ANCHOR_END: comm_mean

// ANCHOR: mean_to_owners
void gpu_comm_mean_to_owners_async(GpuComm *c, const GpuContext *ctx, floatX *buf,
                                   const size_t *firsts, const size_t *counts, int n,
                                   size_t shard_values) {
    if (!c->nccl) return;
    fork_from(c, ctx);
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < n; i++) {
        // The range, cut at the shards' edges: each part to its owner.
        for (size_t at = firsts[i], end = firsts[i] + counts[i]; at < end;) {
            const int owner = (int)(at / shard_values);
            const size_t edge = (size_t)(owner + 1) * shard_values;
            const size_t count = (end < edge ? end : edge) - at;
            NCCL_CHECK(ncclReduce(buf + at, buf + at, count, NCCL_FLOATX, ncclAvg, owner,
                                  comm_of(c), c->stream));
            at += count;
        }
    }
    NCCL_CHECK(ncclGroupEnd());
}
// ANCHOR_END: mean_to_owners

// ANCHOR: shard_collectives
void gpu_comm_mean_scatter_async(GpuComm *c, const GpuContext *ctx, floatX *buf,
                                 size_t shard_values) {
    if (!c->nccl) return;
    fork_from(c, ctx);
    // In place: rank r's mean lands on its own shard, buf + r * shard_values.
    NCCL_CHECK(ncclReduceScatter(buf, buf + (size_t)c->rank * shard_values, shard_values,
                                 NCCL_FLOATX, ncclAvg, comm_of(c), c->stream));
}

void gpu_comm_gather(GpuComm *c, const GpuContext *ctx, floatX *buf, size_t shard_values) {
    if (!c->nccl) return;
    NCCL_CHECK(ncclAllGather(buf + (size_t)c->rank * shard_values, buf, shard_values, NCCL_FLOATX,
                             comm_of(c), ctx->stream));
}
// ANCHOR_END: shard_collectives

void gpu_comm_gather_floats(GpuComm *c, const GpuContext *ctx, float *x, size_t each) {
    if (!c->nccl) return;
    NCCL_CHECK(ncclAllGather(x + (size_t)c->rank * each, x, each, ncclFloat32, comm_of(c),
                             ctx->stream));
}

void gpu_comm_send(GpuComm *c, const GpuContext *ctx, const void *buf, size_t bytes, int peer) {
    NCCL_CHECK(ncclSend(buf, bytes, ncclUint8, peer, comm_of(c), ctx->stream));
}

void gpu_comm_recv(GpuComm *c, const GpuContext *ctx, void *buf, size_t bytes, int peer) {
    NCCL_CHECK(ncclRecv(buf, bytes, ncclUint8, peer, comm_of(c), ctx->stream));
}

void gpu_comm_mean_floats(GpuComm *c, const GpuContext *ctx, float *x, size_t n) {
    if (!c->nccl) return;
    NCCL_CHECK(ncclAllReduce(x, x, n, ncclFloat32, ncclAvg, comm_of(c), ctx->stream));
}

int gpu_comm_same_everywhere(GpuComm *c, const GpuContext *ctx, uint64_t value,
                             const char *what, char *err) {
    if (!c->nccl) return 0;
    const int n = c->world_size;
    uint64_t *all = NULL, *mine = NULL;
    CUDA_CHECK(cudaMalloc((void **)&all, (size_t)n * sizeof *all));
    CUDA_CHECK(cudaMalloc((void **)&mine, sizeof *mine));
    CUDA_CHECK(cudaMemcpy(mine, &value, sizeof value, cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclAllGather(mine, all, 1, ncclUint64, comm_of(c), ctx->stream));
    uint64_t *host = xmalloc((size_t)n * sizeof *host);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    CUDA_CHECK(cudaMemcpy(host, all, (size_t)n * sizeof *host, cudaMemcpyDeviceToHost));
    int differs = -1;
    for (int r = 1; r < n && differs < 0; r++)
        if (host[r] != host[0]) differs = r;
    free(host);
    CUDA_CHECK(cudaFree(all));
    CUDA_CHECK(cudaFree(mine));
    if (differs < 0) return 0;
    return fail(err, "rank %d's %s is not rank 0's: every rank of a run must be started with "
                     "the same command line", differs, what);
}
#endif
