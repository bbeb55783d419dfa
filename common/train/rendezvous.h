// rendezvous.h: chapter 15: how the processes of a run find each other.
// NCCL connects N processes once every one of them holds the same unique
// id, 128 bytes that rank 0 makes (ncclGetUniqueId) and that name where it
// listens. The launchers start the processes but carry no bytes between
// them, so the id goes through a file: rank 0 writes it, atomically (a
// temporary renamed into place: a reader sees all of it or nothing), and
// the other ranks wait for it to appear, then read it. On one host the file
// is anywhere; on many, on a filesystem every host mounts (the chapter says
// more).
//
// A file that is there before rank 0 writes is refused, by rank 0: it is a
// run's that is gone, and a rank that read it would wait for processes that
// no longer listen. Rank 0 removes the file once NCCL has connected every
// rank, which is after every rank has read it.
#ifndef RENDEZVOUS_H
#define RENDEZVOUS_H

#include <stddef.h>

// Rank 0: the id's n bytes into a new file at path. 0, or -1 with err (the
// file exists already; it cannot be written).
int rendezvous_publish(const char *path, const void *id, size_t n, char *err);

// The other ranks: waits until path holds n bytes (polling, every 10 ms),
// at most timeout_s seconds, then reads them into id. 0, or -1 with err
// (the time ran out, naming the file and rank 0's part; the file is not n
// bytes long).
int rendezvous_wait(const char *path, void *id, size_t n, double timeout_s, char *err);

#endif
