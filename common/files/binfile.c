// binfile.c: see binfile.h.
#include "files/binfile.h"

#include <stdarg.h>
#include <string.h>

int binfile_open(BinFile *f, const char *path, int32_t header[BINFILE_HEADER_INTS],
                 int32_t magic, const char *kind, char *err) {
    f->fp = NULL;
    f->path = path;
    f->length = -1;
    long length;
    FILE *fp = open_regular_file(path, kind, &length, err);  // never waits on a FIFO
    if (!fp) return -1;
    // Measure first, so that a short file is reported with its length rather
    // than as a bare read error.
    int rc = 0;
    if (length == 0)
        rc = fail(err, "%s: empty file (0 bytes), expected a %d-byte %s header", path,
                  BINFILE_HEADER_BYTES, kind);
    else if (length < BINFILE_HEADER_BYTES || fread(header, BINFILE_HEADER_BYTES, 1, fp) != 1)
        rc = fail(err, "%s: file is %ld bytes, shorter than the %d-byte %s header", path, length,
                  BINFILE_HEADER_BYTES, kind);
    else if (header[0] != magic)
        rc = fail(err, "%s: bad magic %d, expected %d (not a %s)", path, header[0], magic, kind);
    if (rc != 0) {
        fclose(fp);
        return rc;
    }
    f->fp = fp;
    f->length = length;
    return 0;
}

int binfile_expect_length(const BinFile *f, size_t expected, char *err, const char *detail_fmt,
                          ...) {
    if ((size_t)f->length == expected) return 0;
    char detail[ERR_LEN];
    va_list ap;
    va_start(ap, detail_fmt);
    vsnprintf(detail, sizeof(detail), detail_fmt, ap);
    va_end(ap);
    return fail(err, "%s: file is %ld bytes, expected %zu %s", f->path, f->length, expected,
                detail);
}

int binfile_read(BinFile *f, void *dst, size_t size, size_t count, const char *what, char *err) {
    size_t got = fread(dst, size, count, f->fp);
    if (got != count)
        return fail(err, "%s: read %zu of %zu %s (read error)", f->path, got, count, what);
    return 0;
}

void binfile_close(BinFile *f) {
    if (f->fp) fclose(f->fp);
    f->fp = NULL;
}

int binfile_create(AtomicFile *af, const char *path, const int32_t header[BINFILE_HEADER_INTS],
                   char *err) {
    if (atomic_open(af, path, err) != 0) return -1;
    return atomic_write(af, header, BINFILE_HEADER_BYTES, err);  // aborts itself on failure
}
