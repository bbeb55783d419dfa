// test_launch.c: chapter 15's launch.h: each launcher's variables, set by
// hand (torchrun's, mpirun's and srun's are not on every machine), name the
// process's rank, the world and its GPU; what is wrong with them is said.
#include <criterion/criterion.h>
#include <string.h>

#include "train/launch.h"
#include "util/util.h"

// An environment of the test's own: "NAME=value" strings, NULL-terminated.
static const char *read_list(const char *name, void *arg) {
    const char *const *vars = arg;
    const size_t n = strlen(name);
    for (; *vars; vars++)
        if (!strncmp(*vars, name, n) && (*vars)[n] == '=') return *vars + n + 1;
    return NULL;
}

static Launch launched(const char *const *vars) {
    Launch l;
    char err[ERR_LEN] = "";
    cr_assert_eq(launch_from(&l, read_list, (void *)vars, err), 0, "%s", err);
    return l;
}

static void refused(const char *const *vars, const char *says) {
    Launch l;
    char err[ERR_LEN] = "";
    cr_assert_eq(launch_from(&l, read_list, (void *)vars, err), -1);
    cr_assert(strstr(err, says) != NULL, "'%s' should say '%s'", err, says);
}

Test(launch, no_launcher_is_one_process_on_the_first_gpu) {
    const char *none[] = {"HOME=/root", NULL};
    const Launch l = launched(none);
    cr_assert_eq(l.rank, 0);
    cr_assert_eq(l.world_size, 1);
    cr_assert_eq(l.local_rank, 0);
    cr_assert_str_eq(l.by, "none");
}

Test(launch, torchrun_mpirun_and_srun_each_name_the_rank_the_world_and_the_gpu) {
    const char *torchrun[] = {"RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", NULL};
    const char *mpirun[] = {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
                            "OMPI_COMM_WORLD_LOCAL_RANK=3", NULL};
    const char *srun[] = {"SLURM_PROCID=6", "SLURM_NTASKS=16", "SLURM_LOCALID=2", NULL};
    Launch l = launched(torchrun);
    cr_assert(l.rank == 5 && l.world_size == 8 && l.local_rank == 1);
    cr_assert_str_eq(l.by, "torchrun");
    l = launched(mpirun);
    cr_assert(l.rank == 3 && l.world_size == 4 && l.local_rank == 3);
    cr_assert_str_eq(l.by, "mpirun");
    l = launched(srun);
    cr_assert(l.rank == 6 && l.world_size == 16 && l.local_rank == 2);
    cr_assert_str_eq(l.by, "srun");
}

Test(launch, without_a_local_rank_the_rank_is_the_gpu) {
    const char *vars[] = {"RANK=1", "WORLD_SIZE=2", NULL};
    cr_assert_eq(launched(vars).local_rank, 1);
}

Test(launch, the_first_launcher_set_names_the_run) {
    // torchrun started under an allocation of Slurm: torchrun's are this process's.
    const char *vars[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1", "RANK=1", "WORLD_SIZE=2", NULL};
    const Launch l = launched(vars);
    cr_assert_str_eq(l.by, "torchrun");
    cr_assert_eq(l.world_size, 2);
}

Test(launch, what_is_wrong_is_said) {
    const char *outside[] = {"RANK=2", "WORLD_SIZE=2", NULL};
    refused(outside, "RANK=2 is not a rank of WORLD_SIZE=2 (0 to 1)");
    const char *half[] = {"RANK=0", NULL};
    refused(half, "RANK is set without WORLD_SIZE");
    const char *words[] = {"OMPI_COMM_WORLD_RANK=one", "OMPI_COMM_WORLD_SIZE=2", NULL};
    refused(words, "OMPI_COMM_WORLD_RANK='one': not a whole number from 0");
    const char *empty[] = {"SLURM_PROCID=0", "SLURM_NTASKS=0", NULL};
    refused(empty, "SLURM_NTASKS='0': not a whole number from 1");
    const char *local[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=-1", NULL};
    refused(local, "LOCAL_RANK='-1'");
}
