// tokenizer: GPT-2's tokenizer on the command line.
//
//   build/tokenizer encode FILE   print FILE's token ids, separated by spaces
//   build/tokenizer decode FILE   FILE holds ids (separated by whitespace);
//                                 write their bytes to stdout
//   build/tokenizer bench FILE    encode FILE several times; print MB/s
//
// Options: --encoder PATH (default data/raw/gpt2_encoder.json),
//          --bpe PATH     (default data/raw/gpt2_vocab.bpe),
//          --runs N       (bench only; default 7).
// `encode` gives exactly the ids of tiktoken's GPT-2 encode_ordinary(text);
// tools/tiktoken_reference.py writes the same format from tiktoken itself.
// Exit status: 0 ok, 1 error (message on stderr), 2 usage error.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "util/spread.h"
#include "util/util.h"

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: tokenizer encode|decode|bench FILE [--encoder PATH] [--bpe PATH] [--runs N]\n"
            "  encode FILE  print the GPT-2 token ids of FILE (UTF-8 text), space-separated\n"
            "  decode FILE  read whitespace-separated ids from FILE, write their bytes to stdout\n"
            "  bench FILE   encode FILE --runs times (default 7), print the median MB/s\n"
            "  --encoder PATH  default data/raw/gpt2_encoder.json\n"
            "  --bpe PATH      default data/raw/gpt2_vocab.bpe\n");
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "tokenizer: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

static int error(const char *reason) {
    fprintf(stderr, "error: %s\n", reason);
    return 1;
}

static int flush_stdout(char *err) {
    if (fflush(stdout) != 0 || ferror(stdout)) return fail(err, "writing to stdout failed");
    return 0;
}

static int cmd_encode(const Tokenizer *tok, const char *path, char *err) {
    size_t len;
    char *text = read_file(path, &len, err);
    if (!text) return -1;
    TokenIds ids = {0};
    char why[ERR_LEN];
    if (tokenizer_encode(tok, text, len, &ids, why) != 0) {
        free(text);
        return fail(err, "%s: %s", path, why);
    }
    free(text);
    // Print through a buffer: a million ids are a few megabytes of text.
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    for (size_t i = 0; i < ids.len; i++) {
        if (cap - n < 16) {
            fwrite(buf, 1, n, stdout);
            n = 0;
        }
        n += (size_t)snprintf(buf + n, cap - n, i ? " %d" : "%d", ids.ids[i]);
    }
    buf[n++] = '\n';
    fwrite(buf, 1, n, stdout);
    free(buf);
    token_ids_free(&ids);
    return flush_stdout(err);
}

static int cmd_decode(const Tokenizer *tok, const char *path, char *err) {
    size_t len, n;
    char *text = read_file(path, &len, err);
    if (!text) return -1;
    // Every id is checked before anything is written: no half-decoded output.
    uint8_t *out;
    int rc = tokenizer_decode_ids_text(tok, path, text, len, &out, &n, err);
    free(text);
    if (rc != 0) return -1;
    fwrite(out, 1, n, stdout);
    free(out);
    return flush_stdout(err);
}

static int cmd_bench(const Tokenizer *tok, const char *path, int runs, char *err) {
    size_t len;
    char *text = read_file(path, &len, err);
    if (!text) return -1;
    double *ms = xmalloc((size_t)runs * sizeof(double));
    size_t tokens = 0;
    char why[ERR_LEN];
    for (int r = 0; r < runs; r++) {
        TokenIds ids = {0};
        double t0 = now_ms();
        int bad = tokenizer_encode(tok, text, len, &ids, why);
        ms[r] = now_ms() - t0;
        tokens = ids.len;
        token_ids_free(&ids);
        if (bad) {
            free(ms);
            free(text);
            return fail(err, "%s: %s", path, why);
        }
    }
    const Spread s = spread_of(ms, runs);
    printf("%s: %zu bytes, %zu tokens; encode median %.2f ms over %d runs (min %.2f, max %.2f)\n",
           path, len, tokens, s.median, runs, s.min, s.max);
    printf("%.1f MB/s\n", s.median > 0 ? len / 1e3 / s.median : 0.0);
    free(ms);
    free(text);
    return flush_stdout(err);
}

int main(int argc, char **argv) {
    const char *encoder = "data/raw/gpt2_encoder.json", *bpe = "data/raw/gpt2_vocab.bpe";
    const char *command = NULL, *file = NULL;
    int runs = 7;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--encoder") == 0 || strcmp(a, "--bpe") == 0 ||
                   strcmp(a, "--runs") == 0) {
            if (i + 1 >= argc) return usage_error("%s needs a value", a);
            const char *v = argv[++i];
            if (strcmp(a, "--encoder") == 0) encoder = v;
            else if (strcmp(a, "--bpe") == 0) bpe = v;
            else {
                char *end;
                long r = strtol(v, &end, 10);
                if (*v == '\0' || *end != '\0' || r < 1 || r > 1000)
                    return usage_error("--runs wants a number from 1 to 1000, not \"%s\"", v);
                runs = (int)r;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("unknown option %s", a);
        } else if (!command) {
            command = a;
        } else if (!file) {
            file = a;
        } else {
            return usage_error("unexpected argument \"%s\"", a);
        }
    }
    if (!command) return usage_error("%s", "missing command");
    if (strcmp(command, "encode") != 0 && strcmp(command, "decode") != 0 &&
        strcmp(command, "bench") != 0)
        return usage_error("unknown command \"%s\"", command);
    if (!file) return usage_error("%s needs a FILE", command);

    char err[ERR_LEN];
    Tokenizer *tok = tokenizer_load(encoder, bpe, err);
    if (!tok) return error(err);
    int rc = strcmp(command, "encode") == 0 ? cmd_encode(tok, file, err)
           : strcmp(command, "decode") == 0 ? cmd_decode(tok, file, err)
                                            : cmd_bench(tok, file, runs, err);
    tokenizer_free(tok);
    return rc == 0 ? 0 : error(err);
}
