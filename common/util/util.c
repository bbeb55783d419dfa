// util.c: see util.h.
#define _POSIX_C_SOURCE 200809L
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int fail(char *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die("out of memory allocating %zu bytes", bytes);
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) die("out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

FILE *open_for_reading(const char *path, long *regular_size, char *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fail(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *why = NULL;
    if (fstat(fileno(fp), &st) != 0) why = strerror(errno);
    else if (S_ISDIR(st.st_mode)) why = "is a directory, expected a file";
    if (why) {
        fclose(fp);
        fail(err, "%s: %s", path, why);
        return NULL;
    }
    *regular_size = S_ISREG(st.st_mode) ? (long)st.st_size : -1;
    return fp;
}

// What a file that is not a regular one is, for a message.
static const char *kind_of_file(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "neither a file nor a directory";
}

// Why the open file fd cannot be read as `kind`, or NULL when it is a regular
// file; then *size is its length.
static const char *not_regular(int fd, const char *kind, long *size, char *why, size_t cap) {
    struct stat st;
    if (fstat(fd, &st) != 0) return strerror(errno);
    if (S_ISDIR(st.st_mode)) return "is a directory, expected a file";
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, cap, "not a regular file but %s (a %s must be one, of a known length)",
                 kind_of_file(st.st_mode), kind);
        return why;
    }
    *size = (long)st.st_size;
    return NULL;
}

FILE *open_regular_file(const char *path, const char *kind, long *size, char *err) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fail(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char buf[ERR_LEN];
    const char *why = not_regular(fd, kind, size, buf, sizeof buf);
    FILE *fp = NULL;
    // A regular file's reads never wait, O_NONBLOCK or not; it is cleared all
    // the same, so that the FILE behaves as any that fopen opened.
    if (!why && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) fp = fdopen(fd, "rb");
    if (!fp) {
        if (!why) why = strerror(errno);
        close(fd);
        fail(err, "%s: %s", path, why);
    }
    return fp;
}

char *read_file(const char *path, size_t *len, char *err) {
    long size;
    FILE *fp = open_for_reading(path, &size, err);
    if (!fp) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            char *bigger = realloc(buf, cap + 1);
            if (!bigger) die("out of memory reading %s", path);
            buf = bigger;
        }
    }
    int bad = ferror(fp) ? errno : 0;
    fclose(fp);
    if (bad) {
        free(buf);
        fail(err, "%s: read error: %s", path, strerror(bad));
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

// ---- the temporaries being written ------------------------------------------
// A short list, so that atomic_remove_temporaries can find them from an
// atexit handler or a signal handler. A slot's path is written before the
// slot is marked in use, and the signal fence keeps the compiler from
// swapping the two: a handler never sees a half-copied path.
#define MAX_TEMPORARIES 8
static char temp_paths[MAX_TEMPORARIES][1040];
static volatile sig_atomic_t temp_in_use[MAX_TEMPORARIES];

void atomic_remove_temporaries(void) {
    for (int i = 0; i < MAX_TEMPORARIES; i++)
        if (temp_in_use[i]) {
            unlink(temp_paths[i]);
            temp_in_use[i] = 0;
        }
}

static int list_temporary(const char *tmp_path) {
    static int removed_at_exit = 0;  // die() in the middle of a write, for one
    if (!removed_at_exit) removed_at_exit = atexit(atomic_remove_temporaries) == 0;
    for (int i = 0; i < MAX_TEMPORARIES; i++)
        if (!temp_in_use[i]) {
            snprintf(temp_paths[i], sizeof temp_paths[i], "%s", tmp_path);
            atomic_signal_fence(memory_order_seq_cst);
            temp_in_use[i] = 1;
            return i;
        }
    return -1;  // more than MAX_TEMPORARIES at once: written, just not listed
}

static void unlist_temporary(AtomicFile *af) {
    if (af->slot >= 0) temp_in_use[af->slot] = 0;
    af->slot = -1;
}

int atomic_open(AtomicFile *af, const char *path, char *err) {
    af->fp = NULL;
    af->slot = -1;
    if (strlen(path) >= sizeof(af->final_path))
        return fail(err, "%s: path too long", path);
    snprintf(af->final_path, sizeof(af->final_path), "%s", path);
    snprintf(af->tmp_path, sizeof(af->tmp_path), "%s.tmp", path);
    af->slot = list_temporary(af->tmp_path);
    af->fp = fopen(af->tmp_path, "wb");
    if (!af->fp) {
        int e = errno;
        unlist_temporary(af);
        return fail(err, "%s: cannot create: %s", af->tmp_path, strerror(e));
    }
    return 0;
}

int atomic_write(AtomicFile *af, const void *data, size_t bytes, char *err) {
    if (bytes && fwrite(data, 1, bytes, af->fp) != bytes) {
        int e = errno;
        atomic_abort(af);
        return fail(err, "%s: write failed: %s", af->final_path, strerror(e));
    }
    return 0;
}

int atomic_finish(AtomicFile *af, char *err) {
    if (!af->fp) return 0;  // finished already
    // fsync: the rename must never publish a file whose bytes are not yet on
    // the disk (after a power cut, the new name with old or missing bytes).
    int bad = fflush(af->fp) != 0 || ferror(af->fp) || fsync(fileno(af->fp)) != 0;
    int e = errno;
    bad |= fclose(af->fp) != 0;
    af->fp = NULL;
    if (bad) {
        atomic_abort(af);
        return fail(err, "%s: write failed: %s", af->final_path, strerror(e));
    }
    return 0;
}

int atomic_commit(AtomicFile *af, char *err) {
    if (atomic_finish(af, err) != 0) return -1;
    if (rename(af->tmp_path, af->final_path) != 0) {
        int e = errno;
        atomic_abort(af);
        return fail(err, "%s: cannot rename into place: %s", af->final_path, strerror(e));
    }
    unlist_temporary(af);
    return 0;
}

int sync_directory(const char *dir, char *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return fail(err, "%s: cannot open the directory to sync it: %s", dir,
                            strerror(errno));
    int bad = fsync(fd) != 0 && errno != EINVAL;
    int e = errno;
    close(fd);
    if (bad) return fail(err, "%s: cannot sync the directory: %s", dir, strerror(e));
    return 0;
}

void atomic_abort(AtomicFile *af) {
    if (af->fp) fclose(af->fp);
    af->fp = NULL;
    remove(af->tmp_path);
    unlist_temporary(af);
}

void rng_seed(Rng *rng, uint64_t seed) {
    // SplitMix64 scrambles the seed so that seeds 0, 1, 2... give unrelated
    // streams, and the state is never zero (xorshift's one fixed point).
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    rng->state = z ? z : 0x2545F4914F6CDD1Dull;
}

uint32_t rng_u32(Rng *rng) {
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

float rng_uniform(Rng *rng) {
    return (rng_u32(rng) >> 8) / 16777216.0f;  // 24 random bits: exact in float
}

float rng_normal(Rng *rng) {
    // Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
    float u1 = 1.0f - rng_uniform(rng);
    float u2 = rng_uniform(rng);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

uint32_t rng_below(Rng *rng, uint32_t n) {
    // Rejection sampling removes the modulo bias.
    uint32_t limit = UINT32_MAX - UINT32_MAX % n;
    uint32_t r;
    do r = rng_u32(rng);
    while (r >= limit);
    return r % n;
}

double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
