// make_seeds.c: writes every seed of fuzz_seeds.h, for the fuzzer to start
// from. Usage: make_seeds DIR (writes DIR/<harness>/<name>).
#include <stdio.h>
#include <sys/stat.h>
#include "fuzz_seeds.h"

int main(int argc, char **argv) {
    if (argc != 2) die("usage: make_seeds DIR");
    const char *dir = argv[1];
    mkdir(dir, 0777);
    char path[1024], err[ERR_LEN];
    for (int i = 0; i < FUZZ_NUM_SEEDS; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, fuzz_seeds[i].harness);
        mkdir(path, 0777);
        snprintf(path, sizeof path, "%s/%s/%s", dir, fuzz_seeds[i].harness, fuzz_seeds[i].name);
        if (fuzz_seeds[i].write(path, err) != 0) die("make_seeds: %s", err);
    }
    return 0;
}
