#!/usr/bin/env bash
# test_fetch_data.sh: without a network, tools/fetch_data.sh says which file
# could not be downloaded and why, and how to use DATA_MIRROR; a DATA_MIRROR
# that is not a folder is named; with a good one the files arrive.
source "$(dirname "$0")/lib.sh"

# A curl that fails as curl fails without a network (exit 6).
no_network_path() {
  mkdir -p "$work/bin"
  printf '#!/bin/sh\necho "curl: (6) Could not resolve host: example.org" >&2\nexit 6\n' \
    >"$work/bin/curl"
  chmod +x "$work/bin/curl"
  echo "$work/bin:$PATH"
}

no_network_names_the_file_and_data_mirror() {
  local path
  path=$(no_network_path)
  expect_status 1 env -u DATA_MIRROR PATH="$path" bash tools/fetch_data.sh "$work/raw" || return 1
  says "$work/err" "could not download tinyshakespeare.txt" || return 1
  says "$work/err" "curl exit 6: curl: (6) Could not resolve host" || return 1
  says "$work/err" "DATA_MIRROR=/path/to/that/folder make data" || return 1
  says "$work/err" "gpt2_vocab.bpe" || return 1
  [ -z "$(ls "$work/raw")" ] || fail "left behind: $(ls "$work/raw")"
}

a_data_mirror_that_is_not_a_folder_is_named() {
  expect_status 1 env DATA_MIRROR="$work/nowhere" bash tools/fetch_data.sh "$work/raw" || return 1
  says "$work/err" "DATA_MIRROR=$work/nowhere is not a directory"
}

a_good_mirror_gives_the_files() {
  local mirror=${DATA_MIRROR:-$root/../shared/data}
  [ -d "$mirror" ] || { echo "    (no mirror at $mirror: skipped)"; return 0; }
  expect_status 0 env DATA_MIRROR="$mirror" bash tools/fetch_data.sh "$work/raw" || return 1
  [ -s "$work/raw/gpt2_vocab.bpe" ] || fail "gpt2_vocab.bpe did not arrive"
}

check no_network_names_the_file_and_data_mirror
check a_data_mirror_that_is_not_a_folder_is_named
check a_good_mirror_gives_the_files
finish
