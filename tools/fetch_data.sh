#!/usr/bin/env bash
# fetch_data.sh DEST: put TinyShakespeare and GPT-2's tokenizer files in DEST,
# copied from $DATA_MIRROR when it is set (CI and our machines use
# ../shared/data), else downloaded from their canonical addresses. Either way
# each file is checked against tools/data.sha256 before it is used.
#
# Without a network, the download fails: it then says which file and why, and
# how to fetch the three files elsewhere and point DATA_MIRROR at them.
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

# What to do without a network: the three files, and DATA_MIRROR.
explain_mirror() {
  echo "fetch_data: no network here? Download these three files on a machine that has one," >&2
  echo "fetch_data: put them in one folder under these names, and point DATA_MIRROR at it:" >&2
  for entry in "${files[@]}"; do
    IFS='|' read -r _ mirror_name url <<<"$entry"
    printf 'fetch_data:   %-20s %s\n' "$mirror_name" "$url" >&2
  done
  echo "fetch_data: then run: DATA_MIRROR=/path/to/that/folder make data   (or make run, make test)" >&2
}

# download URL OUT: curl, its own error shown in a sentence of ours.
download() {
  local url=$1 out=$2 name=$3 log rc=0
  if ! command -v curl >/dev/null; then
    echo "fetch_data: cannot download $name: curl is not installed (make deps installs it)" >&2
    explain_mirror
    exit 1
  fi
  echo "fetch_data: downloading $url"
  log=$(curl -fsSL --retry 3 --connect-timeout 20 -o "$out" "$url" 2>&1) || rc=$?
  if [ "$rc" != 0 ]; then
    rm -f "$out"
    echo "fetch_data: could not download $name from $url (curl exit $rc: ${log:-no message})" >&2
    explain_mirror
    exit 1
  fi
}

if [ -n "${DATA_MIRROR:-}" ] && [ ! -d "$DATA_MIRROR" ]; then
  echo "fetch_data: DATA_MIRROR=$DATA_MIRROR is not a directory" >&2
  exit 1
fi

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
    download "$url" "$out.tmp" "$name"
  fi
  got=$(sha256sum "$out.tmp" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    rm -f "$out.tmp"
    echo "fetch_data: $name: checksum mismatch (got $got, expected $want)" >&2
    exit 1
  fi
  mv "$out.tmp" "$out"
done
