// util.h: the small things every file needs: error messages that name the
// culprit, checked allocation, whole-file reads and atomic writes, a seeded RNG.
//
// Error convention (used by every reader and parser in common/):
//   a function that can fail on bad input returns 0 on success and -1 on
//   failure, and writes a one-line, human-readable reason into `err`
//   (a caller-provided buffer of ERR_LEN bytes). Reasons name the file or flag
//   and what is wrong with it. Programs print the reason and exit with the
//   status exit_status.h gives (2 for bad input, 1 for a run that failed);
//   tests compare it. Nothing in common/ calls exit() on bad *input*; only on a
//   programming error or out-of-memory.
#ifndef UTIL_H
#define UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {  // the .cu files call die() and friends too
#endif

#define ERR_LEN 512

// Formats a reason into err (if err is not NULL) and returns -1, so that
// failing paths read as `return fail(err, "%s: truncated", path);`.
int fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Out-of-memory and programming errors are fatal: print and exit(1).
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void *xmalloc(size_t bytes);
void *xcalloc(size_t count, size_t size);

// Opens an existing file for reading. A directory is refused by name ("is a
// directory"): Linux lets fopen open one, and the first read or seek then
// fails with a baffling message. *regular_size gets the length of a regular
// file and -1 for anything else (a pipe, a device). NULL and err on failure.
// For text, which may come through a pipe: a FIFO's open waits for its
// writer, as cat's does. Files that need a length use open_regular_file.
FILE *open_for_reading(const char *path, long *regular_size, char *err);

// Opens an existing regular file for reading, and nothing else: a directory
// is refused as above, anything else by name and kind ("not a regular file
// but a FIFO (a <kind> must be one, of a known length)"), `kind` naming what
// the caller reads. It never waits: fopen of a FIFO blocks until a writer
// comes, perhaps forever, before fstat could tell that it is no file, so the
// path is opened with O_NONBLOCK and checked first. *size gets the length.
FILE *open_regular_file(const char *path, const char *kind, long *size, char *err);

// Reads a whole file into a fresh buffer (NUL-terminated for convenience; the
// terminator is not counted in *len). Returns NULL and sets err on failure.
char *read_file(const char *path, size_t *len, char *err);

// Atomic write: open `path`.tmp, write, then rename over `path`, so a crash
// never leaves a half-written file under the real name.
//
// A temporary is never left behind either: every failure removes it, and the
// temporaries being written are listed where an exit (atexit) and a second
// Ctrl-C (stop_signal.h) find and remove them.
typedef struct {
    FILE *fp;          // NULL once finished or aborted
    int slot;          // this temporary's entry in the list; -1 when none
    char final_path[1024];
    char tmp_path[1040];
} AtomicFile;
int atomic_open(AtomicFile *af, const char *path, char *err);
int atomic_write(AtomicFile *af, const void *data, size_t bytes, char *err);
// Flushes the temporary to the disk (fflush, fsync) and closes it, without
// renaming: a pair of files can be finished both before either is renamed.
int atomic_finish(AtomicFile *af, char *err);
int atomic_commit(AtomicFile *af, char *err);  // atomic_finish if not yet, then rename
void atomic_abort(AtomicFile *af);             // fclose + remove the temporary
// Removes every temporary still being written. Async-signal-safe (it only
// calls unlink), for a signal handler that is about to _exit.
void atomic_remove_temporaries(void);

// Flushes dir's entries to the disk: a rename is a change to the directory,
// not to the file, and without this a power cut can undo it even though the
// file's bytes were synced. Opens dir (O_RDONLY | O_DIRECTORY) and fsyncs it.
// A file system that cannot sync a directory (EINVAL) has nothing to flush.
// Errors name the directory.
int sync_directory(const char *dir, char *err);

// Deterministic RNG (xorshift64*), seeded per use. Not for cryptography.
typedef struct { uint64_t state; } Rng;
void rng_seed(Rng *rng, uint64_t seed);
uint32_t rng_u32(Rng *rng);
float rng_uniform(Rng *rng);              // in [0, 1)
float rng_normal(Rng *rng);               // standard normal, Box-Muller
uint32_t rng_below(Rng *rng, uint32_t n); // uniform in [0, n)

// Wall clock in milliseconds (monotonic).
double now_ms(void);

#ifdef __cplusplus
}
#endif

#endif
