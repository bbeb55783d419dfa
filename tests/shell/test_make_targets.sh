#!/usr/bin/env bash
# test_make_targets.sh: what the Makefile's test targets run and print.
# make test-gpu takes compute-sanitizer from CUDA_HOME, not from the PATH; and
# the GPU tests' output, where no GPU is present, says how many were skipped
# (Criterion's synthesis counts only the tests that ran) and carries no
# "error:" line from a test that passes. Needs nvcc to build the GPU tests:
# skipped, saying so, without it.
source "$(dirname "$0")/lib.sh"

cuda_home=${CUDA_HOME:-/usr/local/cuda}

test_gpu_runs_the_sanitizer_of_cuda_home() {
  make -n test-gpu >"$work/out" 2>&1 || fail "make -n test-gpu: $(tail -2 "$work/out")" || return 1
  says "$work/out" "$cuda_home/bin/compute-sanitizer --tool memcheck"
}

gpu_tests_say_how_many_were_skipped() {
  nvidia-smi -L >/dev/null 2>&1 && return 0  # with a GPU they run: nothing is skipped
  make --no-print-directory gpu-tests-run >"$work/out" 2>&1 || fail "$(tail -3 "$work/out")" ||
    return 1
  grep -q "tests skipped (Criterion's synthesis above counts only the tests that ran)" \
    "$work/out" || fail "no count of the skipped tests" || return 1
  ! grep -q "^error:" "$work/out" || fail "$(grep '^error:' "$work/out" | head -2)"
}

if [ ! -x "$cuda_home/bin/nvcc" ]; then
  echo "[SKIP] test_make_targets: no nvcc at $cuda_home"
  exit 0
fi
check test_gpu_runs_the_sanitizer_of_cuda_home
check gpu_tests_say_how_many_were_skipped
finish
