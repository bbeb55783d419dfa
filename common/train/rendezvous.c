// rendezvous.c: see rendezvous.h.
#define _POSIX_C_SOURCE 200809L  // nanosleep
#include "train/rendezvous.h"

#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "util/util.h"

int rendezvous_publish(const char *path, const void *id, size_t n, char *err) {
    struct stat st;
    if (stat(path, &st) == 0)
        return fail(err, "%s exists already: a run that is gone left it (remove it), or another "
                         "run uses it (give this one a path of its own)", path);
    AtomicFile af;
    if (atomic_open(&af, path, err) || atomic_write(&af, id, n, err)) {
        atomic_abort(&af);
        return -1;
    }
    return atomic_commit(&af, err);
}

int rendezvous_wait(const char *path, void *id, size_t n, double timeout_s, char *err) {
    const double start = now_ms() / 1e3;
    const struct timespec pause = {0, 10 * 1000 * 1000};
    FILE *f;
    while (!(f = fopen(path, "rb"))) {
        if (now_ms() / 1e3 - start > timeout_s)
            return fail(err, "no NCCL id in %s after %.0f s: rank 0 writes it when it starts (is "
                             "it running, with the same path?)", path, timeout_s);
        nanosleep(&pause, NULL);
    }
    // Renamed into place whole: what is there is all of it.
    const size_t got = fread(id, 1, n, f);
    const int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != n || extra)
        return fail(err, "%s is not an NCCL id: %s than %zu bytes", path,
                    got != n ? "fewer" : "more", n);
    return 0;
}
