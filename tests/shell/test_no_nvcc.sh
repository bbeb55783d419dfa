#!/usr/bin/env bash
# test_no_nvcc.sh: without nvcc, the CPU trainer, the tools and the CPU tests
# are still built (nothing CUDA among them), `make test` says the GPU parts
# were skipped, and a target that needs nvcc says so instead of failing
# somewhere in the build. (A full build and run without CUDA's headers takes a
# minute: `make NVCC=/nonexistent test` does it.)
source "$(dirname "$0")/lib.sh"

# What make would run, in a build folder of this case's own.
plan() {
  make -n --no-print-directory NVCC=/nonexistent BUILD="$work/build" "$@" 2>&1
}

the_cpu_parts_build_without_cuda() {
  plan "$work/build/tests/cpu_tests" "$work/build/train_gpt2_cpu" "$work/build/tokenizer" \
    >"$work/plan" || fail "make -n failed: $(tail -3 "$work/plan")" || return 1
  says "$work/plan" "train_gpt2_cpu" || return 1
  ! grep -E "nvcc|\.cu |-lcudart|gpu_ops\.c|gpt2_gpu\.c|train_gpu\.c|check_state\.c" \
    "$work/plan" >"$work/cuda" || fail "CUDA in the plan: $(head -3 "$work/cuda")"
}

make_test_says_the_gpu_parts_were_skipped() {
  make -n --no-print-directory NVCC=/nonexistent BUILD="$work/build" test >"$work/plan" 2>&1
  says "$work/plan" "nvcc not found (/nonexistent): the CUDA code, the GPU trainers and the GPU tests were SKIPPED" ||
    return 1
  ! grep -q "gpu-tests-run\|gpu_tests" "$work/plan" || fail "make test still runs the GPU tests"
}

a_target_that_needs_nvcc_says_so() {
  expect_status 2 make --no-print-directory NVCC=/nonexistent BUILD="$work/build" \
    "$work/build/obj/kernels/gelu.o" || return 1
  says "$work/err" "kernels/gelu.cu: needs nvcc, and there is none at /nonexistent"
}

check the_cpu_parts_build_without_cuda
check make_test_says_the_gpu_parts_were_skipped
check a_target_that_needs_nvcc_says_so
finish
