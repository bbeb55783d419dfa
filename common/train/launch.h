// launch.h: chapter 15: which of several processes this one is. A run on N
// GPUs is N processes, one per GPU, started together by a launcher that
// tells each its place in environment variables:
//
//   launcher                         rank            world size        GPU on its host
//   torchrun, make train-multi       RANK            WORLD_SIZE        LOCAL_RANK
//   mpirun (Open MPI)                OMPI_COMM_WORLD_RANK  _SIZE       OMPI_COMM_WORLD_LOCAL_RANK
//   srun (Slurm)                     SLURM_PROCID    SLURM_NTASKS      SLURM_LOCALID
//
// The first launcher whose rank and size are both set names the run; none
// is a run of one process (rank 0 of 1, on the first GPU). Plain host code,
// tested with the variables set by hand (tests/cpu/test_launch.c).
#ifndef LAUNCH_H
#define LAUNCH_H

typedef struct {
    int rank;          // 0 .. world_size - 1: this process's share of the data
    int world_size;    // processes (GPUs) in the run
    int local_rank;    // its GPU on its host (CUDA's device number)
    const char *by;    // the launcher's name, for messages: "torchrun", "mpirun", "srun", "none"
} Launch;

// This process's place, from the environment (getenv). 0, or -1 with err
// naming the variable and what is wrong with it (not a number, a rank
// outside the world, a world without a rank).
int launch_from_env(Launch *out, char *err);

// The same from a function that reads a variable (NULL: unset): the tests'.
typedef const char *(*EnvReader)(const char *name, void *arg);
int launch_from(Launch *out, EnvReader read, void *arg, char *err);

#endif
