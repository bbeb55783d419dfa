#!/usr/bin/env python3
"""tiktoken_reference.py: reference GPT-2 token ids from tiktoken itself, for
checking our C tokenizer (common/data/tokenizer.c) token for token.

tiktoken's GPT-2 Encoding is built from the SAME local files that the C code
reads (data/raw/gpt2_encoder.json and data/raw/gpt2_vocab.bpe, fetched by
`make data` or tools/fetch_data.sh), with GPT-2's pattern and the special
token <|endoftext|> = 50256. Nothing is downloaded and tiktoken's cache is
not used. Needs `pip install tiktoken`.

Commands (run from the repository root):

  # ids of a text, space-separated on one line, as `build/tokenizer encode` prints them
  python3 tools/tiktoken_reference.py ids tests/data/unicode_sample.txt \
      > tests/data/unicode_sample.ids

  # the count and FNV-1a-64 hash of a text's ids (the format of *.ids.ref)
  python3 tools/tiktoken_reference.py hash data/raw/tinyshakespeare.txt \
      > tests/data/tinyshakespeare.ids.ref

  # compare with the C tokenizer
  build/tokenizer encode FILE | cmp - <(python3 tools/tiktoken_reference.py ids FILE)

Options: --encoder PATH (default data/raw/gpt2_encoder.json),
         --bpe PATH (default data/raw/gpt2_vocab.bpe).

The text is read as bytes and decoded as strict UTF-8 (no newline
translation, no BOM stripping); ids come from encode_ordinary(text), so
"<|endoftext|>" in a text is ordinary text. The hash is FNV-1a, 64-bit
(offset basis 0xcbf29ce484222325, prime 0x100000001b3), over each id written
as 4 little-endian bytes, in order.
"""
import argparse
import os
import sys

# An empty cache directory tells tiktoken to read the files directly and
# write nothing (set before tiktoken reads any file).
os.environ["TIKTOKEN_CACHE_DIR"] = ""

import tiktoken  # noqa: E402
from tiktoken.load import data_gym_to_mergeable_bpe_ranks  # noqa: E402

# GPT-2's pre-tokenization pattern, as GPT-2 published it. Recent tiktoken
# versions write it in an equivalent, faster form (possessive quantifiers and
# a `\s++$` branch); we use tiktoken's own string when it has one, so that the
# reference is exactly what tiktoken.get_encoding("gpt2") does.
GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
try:
    from tiktoken_ext.openai_public import r50k_pat_str as GPT2_PAT  # noqa: E402,F811
except ImportError:
    pass
ENDOFTEXT = "<|endoftext|>"


def gpt2_encoding(encoder_json, vocab_bpe):
    ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=vocab_bpe,
                                            encoder_json_file=encoder_json)
    return tiktoken.Encoding(name="gpt2_local", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                             special_tokens={ENDOFTEXT: 50256}, explicit_n_vocab=50257)


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["ids", "hash"])
    ap.add_argument("file")
    ap.add_argument("--encoder", default="data/raw/gpt2_encoder.json")
    ap.add_argument("--bpe", default="data/raw/gpt2_vocab.bpe")
    args = ap.parse_args()

    enc = gpt2_encoding(args.encoder, args.bpe)
    with open(args.file, "rb") as f:
        text = f.read().decode("utf-8")
    ids = enc.encode_ordinary(text)
    if args.mode == "ids":
        sys.stdout.write(" ".join(map(str, ids)) + "\n")
    else:
        sys.stdout.write(f"count {len(ids)}\nfnv1a64 {fnv1a64(ids):016x}\n")


if __name__ == "__main__":
    main()
