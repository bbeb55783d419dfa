#!/usr/bin/env bash
# test_bench.sh: `make bench` (tools/bench.sh) on a machine without a GPU
# fails, saying why, and writes nothing into results/. Runs everywhere: a
# stand-in nvidia-smi that finds no GPU goes first on the PATH.
source "$(dirname "$0")/lib.sh"

without_a_gpu_bench_fails_and_writes_nothing() {
  mkdir -p "$work/bin"
  printf '#!/bin/sh\necho "No devices were found" >&2\nexit 6\n' >"$work/bin/nvidia-smi"
  chmod +x "$work/bin/nvidia-smi"
  local before after
  before=$(find results -newer "$work/bin/nvidia-smi" | sort)
  PATH="$work/bin:$PATH" expect_status 1 bash tools/bench.sh || return 1
  says "$work/err" "bench: no GPU here" || return 1
  after=$(find results -newer "$work/bin/nvidia-smi" | sort)
  [ "$before" = "$after" ] || fail "bench wrote: $after"
}

check without_a_gpu_bench_fails_and_writes_nothing
finish
