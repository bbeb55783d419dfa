#!/usr/bin/env bash
# fetch_data.sh DEST: put TinyShakespeare and GPT-2's tokenizer files in DEST,
# copied from $DATA_MIRROR when it is set (CI and our machines use
# ../shared/data), else downloaded from their canonical addresses. Either way
# each file is checked against tools/data.sha256 before it is used.
set -euo pipefail
dest=${1:?usage: fetch_data.sh DEST}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dest"

# our name | mirror name | canonical address
files=(
  "tinyshakespeare.txt|tinyshakespeare.txt|https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
  "gpt2_encoder.json|gpt2_encoder.json|https://openaipublic.blob.core.windows.net/gpt-2/models/124M/encoder.json"
  "gpt2_vocab.bpe|gpt2_vocab.bpe|https://openaipublic.blob.core.windows.net/gpt-2/models/124M/vocab.bpe"
)

for entry in "${files[@]}"; do
  IFS='|' read -r name mirror_name url <<<"$entry"
  want=$(awk -v f="$name" '$2 == f {print $1}' "$here/data.sha256")
  out="$dest/$name"
  if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$want" ]; then
    continue
  fi
  if [ -n "${DATA_MIRROR:-}" ]; then
    src="$DATA_MIRROR/$mirror_name"
    [ -f "$src" ] || { echo "fetch_data: DATA_MIRROR=$DATA_MIRROR has no $mirror_name" >&2; exit 1; }
    cp "$src" "$out.tmp"
  else
    echo "fetch_data: downloading $url"
    curl -fsSL --retry 3 -o "$out.tmp" "$url"
  fi
  got=$(sha256sum "$out.tmp" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    rm -f "$out.tmp"
    echo "fetch_data: $name: checksum mismatch (got $got, expected $want)" >&2
    exit 1
  fi
  mv "$out.tmp" "$out"
done
