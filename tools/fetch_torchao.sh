#!/usr/bin/env bash
# fetch_torchao.sh: put torchao's wheel in build/wheels/, checked against the
# sha256 below. torchao holds PyTorch's float8 training, which the bench's
# float8 rows use (tools/pytorch_reference.py's mode
# compile-bf16-sdpa-vocab-tied-fused-lossonly-float8); it does not come with
# torch, and the GPU machines have no package index to install it from. So
# run this where pip reaches PyPI, before the tree travels to the GPU.
# build/ is ignored by git: a copy of the tree must take build/wheels along
# by name. tools/bench.sh installs the wheel from there into a folder of its
# own.
# WHEELS names another folder (bench.sh reads the same variable).
#
# The wheel is pure Python (py3-none-any): the same file for every Python 3
# and every machine. pip is told to look for that kind only (--platform any
# --implementation py --abi none, binaries only), so that this machine's
# Python and platform do not decide which file comes; a py3 wheel fits the
# 3.12 named, as it fits any Python 3.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
version=0.18.0
wheel=torchao-$version-py3-none-any.whl
sha256=5c2b4485341bf28b7fed2c4fc95b9f298e209f41685350f067de85527a05585e
dest=${WHEELS:-build/wheels}  # the folder tools/bench.sh looks in (its WHEELS)

sum_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$dest/$wheel" ] && [ "$(sum_of "$dest/$wheel")" = "$sha256" ]; then
  echo "fetch_torchao: $dest/$wheel is already there (sha256 checked)"
  exit 0
fi
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$PYTHON" -m pip download --quiet torchao=="$version" --no-deps --only-binary=:all: \
     --python-version 3.12 --platform any --implementation py --abi none -d "$tmp"; then
  echo "fetch_torchao: pip could not download torchao $version (no network here? run this" \
       "where pip reaches PyPI, then copy $dest/$wheel here)" >&2
  exit 1
fi
if [ ! -f "$tmp/$wheel" ]; then
  echo "fetch_torchao: pip did not download $wheel (it got: $(ls "$tmp" | tr '\n' ' '))" >&2
  exit 1
fi
got=$(sum_of "$tmp/$wheel")
if [ "$got" != "$sha256" ]; then
  echo "fetch_torchao: $wheel: checksum mismatch (got $got, expected $sha256)" >&2
  exit 1
fi
# One torchao wheel in the folder, so that bench.sh cannot pick another.
rm -f "$dest"/torchao-*.whl
mv "$tmp/$wheel" "$dest/$wheel"
echo "fetch_torchao: wrote $dest/$wheel (sha256 $sha256)"
