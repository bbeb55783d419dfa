// test_rendezvous.c: chapter 15's rendezvous.h: the NCCL id through a file.
// Published by one side and read by the other, whole; a stale file refused
// by the publisher; a reader that waits for a writer who comes later; a
// reader that gives up, saying why.
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "file_helpers.h"
#include "train/rendezvous.h"
#include "util/util.h"

enum { ID = 128 };

static void id_of(unsigned char id[ID], int seed) {
    for (int i = 0; i < ID; i++) id[i] = (unsigned char)(seed * 31 + i);
}

Test(rendezvous, what_rank_0_publishes_the_others_read_whole) {
    const char *path = tmp_path("rendezvous_id");
    remove(path);
    unsigned char id[ID], got[ID];
    char err[ERR_LEN] = "";
    id_of(id, 1);
    cr_assert_eq(rendezvous_publish(path, id, ID, err), 0, "%s", err);
    cr_assert_eq(rendezvous_wait(path, got, ID, 1.0, err), 0, "%s", err);
    cr_assert(memcmp(id, got, ID) == 0);
    remove(path);
}

Test(rendezvous, a_file_already_there_is_refused_by_rank_0) {
    const char *path = tmp_path("rendezvous_stale");
    unsigned char id[ID];
    char err[ERR_LEN] = "";
    id_of(id, 2);
    remove(path);
    cr_assert_eq(rendezvous_publish(path, id, ID, err), 0, "%s", err);
    cr_assert_eq(rendezvous_publish(path, id, ID, err), -1);
    cr_assert(strstr(err, "exists already") != NULL, "%s", err);
    remove(path);
}

typedef struct {
    const char *path;
    unsigned char id[ID];
} Late;

static void *publish_later(void *arg) {
    Late *l = arg;
    const struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    char err[ERR_LEN];
    if (rendezvous_publish(l->path, l->id, ID, err)) fprintf(stderr, "%s\n", err);
    return NULL;
}

Test(rendezvous, a_reader_waits_for_a_writer_who_comes_later) {
    Late l = {tmp_path("rendezvous_late"), {0}};
    remove(l.path);
    id_of(l.id, 3);
    pthread_t t;
    pthread_create(&t, NULL, publish_later, &l);
    unsigned char got[ID];
    char err[ERR_LEN] = "";
    cr_assert_eq(rendezvous_wait(l.path, got, ID, 5.0, err), 0, "%s", err);
    pthread_join(t, NULL);
    cr_assert(memcmp(l.id, got, ID) == 0);
    remove(l.path);
}

Test(rendezvous, a_reader_gives_up_and_a_short_file_is_not_an_id) {
    const char *path = tmp_path("rendezvous_none");
    remove(path);
    unsigned char got[ID];
    char err[ERR_LEN] = "";
    cr_assert_eq(rendezvous_wait(path, got, ID, 0.05, err), -1);
    cr_assert(strstr(err, "no NCCL id in") != NULL && strstr(err, "rank 0") != NULL, "%s", err);
    FILE *f = fopen(path, "wb");
    fputs("short", f);
    fclose(f);
    cr_assert_eq(rendezvous_wait(path, got, ID, 1.0, err), -1);
    cr_assert(strstr(err, "fewer than 128 bytes") != NULL, "%s", err);
    remove(path);
}
