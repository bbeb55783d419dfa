// launch.c: chapter 15's exercise: which of several processes this one is,
// from the variables its launcher set (common/train/launch.h says what it
// must return). solutions/15_multi_gpu/ has it complete;
// exercises/15_multi_gpu/ has the body of launch_from cut out.
#include "train/launch.h"

#include <errno.h>
#include <stdlib.h>

#include "exercise.h"
#include "util/util.h"

typedef struct {
    const char *by, *rank, *size, *local;
} LauncherVars;

// ANCHOR: launchers
static const LauncherVars LAUNCHERS[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};
// ANCHOR_END: launchers

// The variable `name` as a number >= lowest into *out: 0, or -1 with err.
static int read_int(EnvReader read, void *arg, const char *name, int lowest, int *out,
                    char *err) {
    const char *s = read(name, arg);
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (end == s || *end != 0 || errno || v < lowest || v > 1 << 20)
        return fail(err, "%s='%s': not a whole number from %d", name, s, lowest);
    *out = (int)v;
    return 0;
}

// ANCHOR: launch_from
int launch_from(Launch *out, EnvReader read, void *arg, char *err) {
    *out = (Launch){0, 1, 0, "none"};
    // EXERCISE BEGIN: for each launcher of LAUNCHERS in order: skip it when neither its rank nor its size variable is set (read(name, arg) is NULL); one without the other is an error; else read both with read_int (size from 1, rank from 0), refuse a rank >= the size, take the local rank when it is set (else the rank), set out->by, and return 0
    // EXERCISE STUB: (void)read, (void)arg, (void)err, (void)read_int, (void)LAUNCHERS;  // every process is rank 0 of 1
    for (size_t i = 0; i < sizeof LAUNCHERS / sizeof LAUNCHERS[0]; i++) {
        const LauncherVars *v = &LAUNCHERS[i];
        const int has_rank = read(v->rank, arg) != NULL, has_size = read(v->size, arg) != NULL;
        if (!has_rank && !has_size) continue;
        if (has_rank != has_size)
            return fail(err, "%s is set without %s: a launcher (%s) sets both",
                        has_rank ? v->rank : v->size, has_rank ? v->size : v->rank, v->by);
        out->by = v->by;
        if (read_int(read, arg, v->size, 1, &out->world_size, err) ||
            read_int(read, arg, v->rank, 0, &out->rank, err))
            return -1;
        if (out->rank >= out->world_size)
            return fail(err, "%s=%d is not a rank of %s=%d (0 to %d)", v->rank, out->rank, v->size,
                        out->world_size, out->world_size - 1);
        // Without a local rank, one host: the rank is the GPU.
        out->local_rank = out->rank;
        if (read(v->local, arg) && read_int(read, arg, v->local, 0, &out->local_rank, err))
            return -1;
        return 0;
    }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: reading the launcher's variables
    return 0;
}
// ANCHOR_END: launch_from

static const char *read_getenv(const char *name, void *arg) {
    (void)arg;
    return getenv(name);
}

int launch_from_env(Launch *out, char *err) { return launch_from(out, read_getenv, NULL, err); }
