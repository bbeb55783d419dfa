// prepare_data: TinyShakespeare as train and val token shards.
//
//   build/prepare_data --text FILE --encoder encoder.json --bpe vocab.bpe --out DIR
//
// The text's documents are its passages, separated by blank lines ("\n\n");
// each becomes the end-of-text token followed by the passage's GPT-2 tokens
// (the separating "\n\n" itself is not kept: the end-of-text token marks the
// break). The first 10% of the documents (rounded down) are the validation
// split, DIR/val.bin, and the rest the training split, DIR/train.bin: both in
// shard.h's format. Splitting by documents keeps every passage whole, and
// taking val from the start keeps the split the same on every machine.
// Exit status: 0 ok, 1 error (message on stderr), 2 usage error.
#define _POSIX_C_SOURCE 200809L  // mkdir, stat
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "files/shard.h"
#include "data/tokenizer.h"
#include "util/util.h"

#define VAL_PERCENT 10

typedef struct {
    const char *text, *encoder, *bpe, *out;
} Options;

// ---- the command line --------------------------------------------------------

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: prepare_data --text FILE --encoder encoder.json --bpe vocab.bpe --out DIR\n"
            "  writes DIR/train.bin and DIR/val.bin: the first %d%% of FILE's passages\n"
            "  (separated by blank lines) are val, the rest train\n",
            VAL_PERCENT);
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "prepare_data: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

// Returns 0 when opts is complete, 1 after --help, or 2 after a usage error.
static int parse_args(int argc, char **argv, Options *opts) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        const char **slot = strcmp(a, "--text") == 0      ? &opts->text
                            : strcmp(a, "--encoder") == 0 ? &opts->encoder
                            : strcmp(a, "--bpe") == 0     ? &opts->bpe
                            : strcmp(a, "--out") == 0     ? &opts->out
                                                          : NULL;
        if (!slot) return usage_error("unknown argument \"%s\"", a);
        if (i + 1 >= argc) return usage_error("%s needs a value", a);
        *slot = argv[++i];
    }
    if (!opts->text) return usage_error("%s is required", "--text");
    if (!opts->encoder) return usage_error("%s is required", "--encoder");
    if (!opts->bpe) return usage_error("%s is required", "--bpe");
    if (!opts->out) return usage_error("%s is required", "--out");
    return 0;
}

// ---- documents -------------------------------------------------------------------

typedef struct {
    size_t start, len;  // a passage: bytes [start, start + len) of the text
} Document;

// Where the next "\n\n" at or after `from` starts; len when there is none.
static size_t find_separator(const char *text, size_t len, size_t from) {
    for (size_t i = from; i + 1 < len; i++)
        if (text[i] == '\n' && text[i + 1] == '\n') return i;
    return len;
}

// Splits text at every "\n\n". An empty passage (from three or more newlines
// in a row, or a separator at the very start or end) is not a document.
static Document *split_documents(const char *text, size_t len, size_t *count) {
    size_t cap = 1024, n = 0;
    Document *docs = xmalloc(cap * sizeof(Document));
    for (size_t start = 0; start <= len;) {
        size_t end = find_separator(text, len, start);
        if (end > start) {
            if (n == cap) {
                cap *= 2;
                Document *bigger = realloc(docs, cap * sizeof(Document));
                if (!bigger) die("out of memory splitting documents");
                docs = bigger;
            }
            docs[n++] = (Document){start, end - start};
        }
        start = end + 2;  // past the separator (or past the end)
    }
    *count = n;
    return docs;
}

// Appends <end-of-text> + tokens(passage) for documents [first, last).
static int encode_documents(const Tokenizer *tok, const char *path, const char *text,
                            const Document *docs, size_t first, size_t last, TokenIds *out,
                            char *err) {
    char why[ERR_LEN];
    for (size_t d = first; d < last; d++) {
        token_ids_push(out, tokenizer_eot(tok));
        if (tokenizer_encode(tok, text + docs[d].start, docs[d].len, out, why) != 0)
            return fail(err, "%s: document %zu (from byte %zu of the file): %s", path, d,
                        docs[d].start, why);
    }
    return 0;
}

// ---- output ------------------------------------------------------------------------

// mkdir -p: creates dir and any missing parents.
static int make_dirs(const char *dir, char *err) {
    char path[1024];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return fail(err, "%s: path too long", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return fail(err, "%s: cannot create directory: %s", path, strerror(errno));
        *p = saved;
        if (saved == '\0') break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fail(err, "%s: not a directory", dir);
    return 0;
}

static int write_split(const char *dir, const char *name, const TokenIds *ids, char *err) {
    char path[1024];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return fail(err, "%s/%s: path too long", dir, name);
    return shard_write(path, ids->ids, ids->len, err);
}

// ---- the program ---------------------------------------------------------------

static int prepare(const Options *opts, char *err) {
    size_t len;
    char *text = read_file(opts->text, &len, err);
    if (!text) return -1;
    Tokenizer *tok = tokenizer_load(opts->encoder, opts->bpe, err);
    if (!tok) {
        free(text);
        return -1;
    }
    size_t num_docs;
    Document *docs = split_documents(text, len, &num_docs);
    size_t num_val = num_docs * VAL_PERCENT / 100;

    TokenIds val = {0}, train = {0};
    int rc = num_docs == 0 ? fail(err, "%s: no text to prepare", opts->text) : 0;
    if (rc == 0) rc = encode_documents(tok, opts->text, text, docs, 0, num_val, &val, err);
    if (rc == 0) rc = encode_documents(tok, opts->text, text, docs, num_val, num_docs, &train, err);
    if (rc == 0) rc = make_dirs(opts->out, err);
    if (rc == 0) rc = write_split(opts->out, "val.bin", &val, err);
    if (rc == 0) rc = write_split(opts->out, "train.bin", &train, err);
    if (rc == 0) {
        printf("val:   %zu documents, %zu tokens -> %s/val.bin\n", num_val, val.len, opts->out);
        printf("train: %zu documents, %zu tokens -> %s/train.bin\n", num_docs - num_val,
               train.len, opts->out);
    }
    token_ids_free(&val);
    token_ids_free(&train);
    free(docs);
    tokenizer_free(tok);
    free(text);
    return rc;
}

int main(int argc, char **argv) {
    Options opts = {0};
    int parsed = parse_args(argc, argv, &opts);
    if (parsed != 0) return parsed == 1 ? 0 : parsed;
    char err[ERR_LEN];
    if (prepare(&opts, err) != 0) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    return 0;
}
