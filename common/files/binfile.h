// binfile.h: the part every binary file format in common/ shares.
//
// Model checkpoints (checkpoint.h), debug states (debug_state.h), token shards
// (shard.h) and training states (train_state.h) all start the same way:
//   header   256 int32   [0] = a magic number naming the kind of file
//                        [1] = the format's version, the rest the format's own
// followed by a payload whose exact length the header determines. This module
// holds what they have in common: opening a file, measuring it, reading and
// checking its header's magic, checking its length, reading its payload, and
// writing a header. Each format keeps its own checks (version, sizes, token
// ranges, finiteness) in its own file.
//
// Reading goes:
//   BinFile f;
//   int32_t header[BINFILE_HEADER_INTS];
//   if (binfile_open(&f, path, header, MAGIC, "token shard", err) != 0) return -1;
//   ... check header[1..], work out the expected length ...
//   int rc = binfile_expect_length(&f, expected, err, "(header + %d tokens)", n);
//   if (rc == 0) rc = binfile_read(&f, buf, sizeof(uint16_t), n, "tokens", err);
//   binfile_close(&f);
// Check the length before allocating the payload's buffer: then a corrupt count
// in a header can never make a reader allocate a huge one.
//
// Errors follow util.h's convention (0, or -1 with a reason in err) and name
// the file and what is wrong, with the expected and the actual value:
//   "<path>: cannot open: <strerror>"
//   "<path>: is a directory, expected a file"
//   "<path>: not a regular file but a FIFO (a <kind> must be one, of a known length)"
//   "<path>: empty file (0 bytes), expected a 1024-byte <kind> header"
//   "<path>: file is 1000 bytes, shorter than the 1024-byte <kind> header"
//   "<path>: bad magic 20240326, expected 20240520 (not a <kind>)"
//   "<path>: file is 3022 bytes, expected 3024 <detail>"
//   "<path>: read 3 of 8 <what> (read error)"
#ifndef BINFILE_H
#define BINFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/util.h"

#define BINFILE_HEADER_INTS 256
#define BINFILE_HEADER_BYTES (BINFILE_HEADER_INTS * 4)

// A file open for reading, positioned just after its header.
typedef struct {
    FILE *fp;          // NULL once closed
    const char *path;  // the caller's string (not copied), for error messages
    long length;       // the whole file's length in bytes, header included
} BinFile;

// Opens path (a regular file only, and never waiting on a FIFO: util.h's
// open_regular_file), measures it, reads its header into `header` and checks
// that header[0] is `magic`. `kind` names the format in messages ("model
// checkpoint", "token shard"...). On success f is open just after the header;
// on failure nothing is left open (binfile_close is still safe).
int binfile_open(BinFile *f, const char *path, int32_t header[BINFILE_HEADER_INTS],
                 int32_t magic, const char *kind, char *err);

// Checks that the file is exactly `expected` bytes long. The printf-style
// detail, appended to the message, says where that number comes from:
// "(header + 1000 uint16 tokens)", "for B = 4, T = 64".
int binfile_expect_length(const BinFile *f, size_t expected, char *err, const char *detail_fmt,
                          ...) __attribute__((format(printf, 4, 5)));

// Reads the next count items of size bytes into dst; `what` names them in the
// message ("parameters", "tokens"). The file stays open either way.
int binfile_read(BinFile *f, void *dst, size_t size, size_t count, const char *what, char *err);

// Closes the file. Safe to call again, and after a failed binfile_open.
void binfile_close(BinFile *f);

// Writing: atomic_open(path) (util.h), then the header. Continue with
// atomic_write for the payload and finish with atomic_commit. On failure
// nothing is left behind, not even the temporary.
int binfile_create(AtomicFile *af, const char *path, const int32_t header[BINFILE_HEADER_INTS],
                   char *err);

#endif
