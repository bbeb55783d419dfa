// util.c: see util.h.
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

char *read_file(const char *path, size_t *len, char *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fail(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
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
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        fail(err, "%s: read error", path);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

int atomic_open(AtomicFile *af, const char *path, char *err) {
    if (strlen(path) >= sizeof(af->final_path))
        return fail(err, "%s: path too long", path);
    snprintf(af->final_path, sizeof(af->final_path), "%s", path);
    snprintf(af->tmp_path, sizeof(af->tmp_path), "%s.tmp", path);
    af->fp = fopen(af->tmp_path, "wb");
    if (!af->fp)
        return fail(err, "%s: cannot create: %s", af->tmp_path, strerror(errno));
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

int atomic_commit(AtomicFile *af, char *err) {
    int bad = fflush(af->fp) != 0 || ferror(af->fp);
    bad |= fclose(af->fp) != 0;
    af->fp = NULL;
    if (bad) {
        remove(af->tmp_path);
        return fail(err, "%s: write failed", af->final_path);
    }
    if (rename(af->tmp_path, af->final_path) != 0) {
        int e = errno;
        remove(af->tmp_path);
        return fail(err, "%s: cannot rename into place: %s", af->final_path, strerror(e));
    }
    return 0;
}

void atomic_abort(AtomicFile *af) {
    if (af->fp) fclose(af->fp);
    af->fp = NULL;
    remove(af->tmp_path);
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
