// shard.h: token shards, the files the data loader reads (llm.c's format).
//
// Layout, little-endian:
//   header   256 int32   [0] = SHARD_MAGIC, [1] = SHARD_VERSION,
//                        [2] = number of tokens N, the rest zero
//   tokens   N uint16    GPT-2 ids fit in 16 bits (50257 < 65536)
// so a shard of N tokens is exactly 1024 + 2 N bytes long.
#ifndef SHARD_H
#define SHARD_H

#include <stddef.h>
#include <stdint.h>

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
#define SHARD_HEADER_BYTES (SHARD_HEADER_INTS * 4)

// Writes n tokens to path (atomically). Every id must be in 0..65535; a
// larger or negative one is an error naming its index. Returns 0 or -1.
int shard_write(const char *path, const int32_t *tokens, size_t n, char *err);

// Reads and checks only the header: magic, version, a non-negative count, and
// that the file's length is exactly what the count says. Sets *n to the count.
// Cheap, so the data loader can size every shard without loading them all.
int shard_read_header(const char *path, size_t *n, char *err);

// Reads a whole shard into a fresh buffer (*tokens, *n of them; free() it),
// after the header checks above and a check that every token is below
// vocab_size. On failure *tokens is NULL and *n is 0.
int shard_read(const char *path, int vocab_size, uint16_t **tokens, size_t *n, char *err);

#endif
