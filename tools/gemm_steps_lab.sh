#!/usr/bin/env bash
# gemm_steps_lab.sh: `make demo-gemm`, appendix E's measurements. The kernel
# lab's gemm_steps family alone (tools/kernel_lab/lab_gemm_steps.c): every
# step of kernels/gemm_steps.cu and cuBLASLt, checked against the CPU, then
# timed at GPT-2's fc, fcproj and qkv GEMMs (B=16, T=1024), each call after
# an L2 flush, into results/<gpu>/gemm_steps/lab.csv, each row labelled
# gemm_steps-VERSION-SHAPE (gemm_steps-s4-mma.sync-swizzled-fc), with the
# run's environment.txt beside it. Steps 5 and 6 run on a Hopper only:
# elsewhere their rows are left out.
#
# Settings (environment variables): LAB (build/kernel_lab_bf16), DEMO_DIR
# (results/<gpu>/gemm_steps).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/demo_env.sh
LAB=${LAB:-build/kernel_lab_bf16}
gpu=$(gpu_slug)
out=${DEMO_DIR:-results/${gpu:-gpu}/gemm_steps}
mkdir -p "$out/logs"
write_environment "$out/environment.txt" \
  "the kernel lab's gemm_steps family: fc, fcproj and qkv at B=16, T=1024; every call after an L2 flush"
lab_family_csv gemm_steps "$out" shape
echo "wrote $out/lab.csv"
