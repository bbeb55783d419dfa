#!/usr/bin/env bash
# test_gpu_memory_limit.sh: --memory-limit GIB is kept to, on a card that
# has no more to give. A ballast (tests/tools/gpu_ballast.c) takes all of the
# GPU but LIMIT GiB (MEMORY_LIMIT_GIB, 16 by default) for the whole test, so
# that a run that took more than its plan said would fail in cudaMalloc, and
# beside it:
#   - the last chapter's GPT-2 124M trains under --memory-limit LIMIT, its
#     --memory table by category with the budget, and the most it held on
#     the device (the trainer's "held at most" line) is within the limit;
#     it fits as asked, so --fit-memory (chapter 14) changes nothing;
#   - GPT-2 355M in the last chapter without --fit-memory, and 124M in
#     chapter 09 under a tighter limit, are refused before anything is
#     allocated (exit 2), naming what fits: a --recompute level (chapter
#     14), a switch (--adamw-8bit), a batch in micro-batches; with the first
#     of the flags named, each trains within its limit;
#   - chapter 05 (no micro-batches), refused, trains with what it names;
#   - chapter 14's 124M under --memory-limit 8, which only a --recompute
#     level (or a smaller batch) fits: refused without --fit-memory, naming
#     the level; with it, it takes that level, says so, and trains within 8.
# Needs a GPU: skipped, saying so, without one.
source "$(dirname "$0")/lib.sh"

LIMIT=${MEMORY_LIMIT_GIB:-16}
run=(--data data/tinyshakespeare --steps 3 --val-every 0 --sample-tokens 0)

last_chapter() { build/train_gpt2_bf16 --list-chapters | awk 'END {print $1}'; }

# held_within GIB: the run in $work/out says the most it held on the device,
# and that is at most GIB.
held_within() {
  local held
  held=$(sed -n 's/^memory: the run held at most \([0-9.]*\) GiB.*/\1/p' "$work/out")
  [ -n "$held" ] || fail "no 'held at most' line: $(tail -3 "$work/out")" || return 1
  awk -v h="$held" -v l="$1" 'BEGIN { exit !(h <= l) }' ||
    fail "the run held $held GiB, over --memory-limit $1" || return 1
  echo "    held at most $held GiB of $1"
}

# trains_within GIB ARGS...: the trainer exits 0 under --memory-limit GIB,
# prints its last step, and held at most GIB.
trains_within() {
  local gib=$1
  shift
  expect_status 0 build/train_gpt2_bf16 "${run[@]}" --memory-limit "$gib" "$@" || return 1
  says "$work/out" "step     3/3" && held_within "$gib"
}

# refused_then_fits GIB WHERE WANT ARGS...: under --memory-limit GIB the run
# is refused (exit 2), not fitting WHERE ("in --memory-limit GIB" or "on the
# GPU"), its first suggestion is WANT (a pattern), and with those flags it
# trains within GIB.
refused_then_fits() {
  local gib=$1 where=$2 want=$3 fix
  shift 3
  expect_status 2 build/train_gpt2_bf16 "${run[@]}" --memory-limit "$gib" "$@" || return 1
  says "$work/err" "the run does not fit $where" || return 1
  fix=$(first_fix "$work/err")
  [[ $fix =~ ^($want)$ ]] || fail "first suggestion '$fix', expected '$want': $(cat "$work/err")" ||
    return 1
  echo "    refused; it fits with $fix"
  # shellcheck disable=SC2086  # the flags, word by word
  trains_within "$gib" "$@" $fix
}

the_last_chapter_trains_within_the_limit() {
  trains_within "$LIMIT" --chapter "$(last_chapter)" --memory || return 1
  says "$work/out" "memory: optimizer state" &&
  says "$work/out" "memory:   fch_gelu     (L,B,T,4C)" &&
  says "$work/out" "memory: CUDA's libraries" &&
  says "$work/out" "memory: budget " || return 1
  ! grep -q -- "--fit-memory" "$work/out" || fail "a run that fits was changed: $(grep -- --fit-memory "$work/out")"
}

# GPT-2 355M at B=16 plans about 23 GiB in the last chapter: the card (LIMIT
# GiB free, less the context) is the budget, and recompute (chapter 14), or
# else micro-batches, fit it. (Without --fit-memory, which would take the
# level itself: the case below.)
a_larger_model_is_refused_and_trains_with_what_it_names() {
  refused_then_fits "$LIMIT" "on the GPU" "--recompute (gelu|norms|block)|-b [0-9]+ --grad-accum [0-9]+" \
    --chapter "$(last_chapter)" --no-fit-memory --model 355m
}

# The two cases below set limits of 8 and 8.8 GiB, tighter than the card
# left by the ballast, so that the limit, not the card, is the budget.
card_is_larger_than() {
  awk -v l="$LIMIT" -v g="$1" 'BEGIN { exit !(l >= g + 1) }' ||
    skip "MEMORY_LIMIT_GIB=$LIMIT leaves too little above --memory-limit $1"
}

# Chapter 09 (fp32 moments) plans about 9.05 GiB at 124M, B=16, and with
# the 8-bit moments about 8.58: a limit of 8.8, tighter than the card, is the
# budget, and a --recompute level (which changes no value) or --adamw-8bit is
# the first thing that fits.
a_tighter_limit_is_kept_and_a_switch_is_named() {
  card_is_larger_than 8.8 || return
  refused_then_fits 8.8 "in --memory-limit 8.8" "--recompute (gelu|norms|block)|--adamw-8bit" --chapter 9
}

# Chapter 05 cannot split a step into micro-batches: what it names (a
# --recompute level, or a smaller batch, a smaller step) trains.
without_micro_batches_a_smaller_batch_trains() {
  card_is_larger_than 8 || return
  refused_then_fits 8 "in --memory-limit 8" "--recompute (gelu|norms|block)|(--adamw-8bit )?-b [0-9]+" --chapter 5
}

# Chapter 14 at 124M, B=16 plans about 10.2 GiB, 8.6 with --recompute gelu
# and 7.9 with norms; --adamw-8bit is on already and --no-master-weights
# saves 0.5 GiB: under --memory-limit 8 only a level (or a smaller batch)
# fits. Without --fit-memory the run is refused, naming that level first;
# with it (the chapter's switch) the run takes the level, says so in one
# line, runs at it (the trainer's "recompute:" line) and keeps to the limit.
chapter_14_fits_its_memory_by_recomputing() {
  card_is_larger_than 8 || return
  local level
  expect_status 2 build/train_gpt2_bf16 "${run[@]}" --memory-limit 8 --chapter 14 --no-fit-memory ||
    return 1
  level=$(first_fix "$work/err")
  [[ $level =~ ^--recompute\ (gelu|norms|block)$ ]] ||
    fail "without --fit-memory, first suggestion '$level': $(cat "$work/err")" || return 1
  trains_within 8 --chapter 14 || return 1
  says "$work/out" "memory: --fit-memory: $level, the cheapest level that fits: " &&
  says "$work/out" "within the budget of 8.00 GiB (--memory-limit 8)" &&
  says "$work/out" "recompute: ${level#--recompute }: " || return 1
  echo "    $(grep -- '--fit-memory:' "$work/out")"
}

if ! nvidia-smi -L >/dev/null 2>&1 || [ ! -x build/train_gpt2_bf16 ] || [ ! -x build/tests/gpu_ballast ]; then
  echo "[SKIP] test_gpu_memory_limit: no GPU here (or no GPU trainers or ballast built)"
  exit 0
fi
ballast_out=$(mktemp /tmp/test_shell_ballast_XXXXXX)
build/tests/gpu_ballast "$LIMIT" >"$ballast_out" &
ballast=$!
trap 'kill $ballast 2>/dev/null; wait $ballast 2>/dev/null; rm -f "$ballast_out"' EXIT
wait_for "$ballast_out" "ballast:" 60 || exit 1
echo "    $(cat "$ballast_out")"
check the_last_chapter_trains_within_the_limit
check a_larger_model_is_refused_and_trains_with_what_it_names
check a_tighter_limit_is_kept_and_a_switch_is_named
check without_micro_batches_a_smaller_batch_trains
check chapter_14_fits_its_memory_by_recomputing
finish
