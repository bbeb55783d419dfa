#!/usr/bin/env bash
# test_gpu_first_run.sh: what a reader runs first works. Every chapter's own
# command, as `make train CH=N` runs it (GPT-2 124M, B=16, T=1024, with its
# validation and its sample at the end), for a few steps; the last chapter
# again with the kernels of every GPU (GPT2_PORTABLE_KERNELS=1), which is what
# an A100 or an RTX card runs; and every chapter on a smaller card: beside a
# ballast that leaves 10, 16 or 24 GiB of the GPU free, a chapter either
# trains or is refused before it starts, naming what fits (a smaller batch,
# or a switch), and the first thing it names then trains. Needs a GPU:
# skipped, saying so, without one.
#
# FIRST_RUN_CSV=path appends each run's planned and measured memory there.
# FIRST_RUN_CARDS="10 16 24" (the default) picks the card sizes.
source "$(dirname "$0")/lib.sh"

chapters() { build/train_gpt2_fp32 --list-chapters | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}'; }
last_chapter() { chapters | tail -1; }

# trains CH ARGS: `make train CH=CH ARGS=...` exits 0, prints its last step
# and its sample; the memory it planned and used goes to FIRST_RUN_CSV.
trains() {
  local ch=$1 args=$2
  expect_status 0 make --no-print-directory train CH="$ch" ARGS="$args" || return 1
  says "$work/out" "---- sample after step" || return 1
  grep -q "^step .*/.* | loss" "$work/out" || fail "chapter $ch printed no step" || return 1
  ! grep -qi "error" "$work/err" || fail "chapter $ch: $(grep -i error "$work/err" | head -3)"
  record_memory "$ch" "$args"
}

# record_memory CH ARGS: a row of FIRST_RUN_CSV (chapter,args,card_gib,
# planned_gib,free_gib,peak_gib): what the run planned, what the GPU had free,
# and, without a ballast (CARD unset), the most the GPU had in use; beside
# one that count includes the ballast, so it is left out.
record_memory() {
  [ -n "${FIRST_RUN_CSV:-}" ] || return 0
  [ -s "$FIRST_RUN_CSV" ] || echo "chapter,args,card_gib,planned_gib,free_gib,peak_gib" >"$FIRST_RUN_CSV"
  local planned free peak=
  planned=$(sed -n 's/^memory: \([0-9.]*\) GiB planned.*/\1/p' "$work/out")
  free=$(sed -n 's/.*; \([0-9.]*\) GiB were free$/\1/p' "$work/out")
  [ -n "${CARD:-}" ] ||
    peak=$(grep '^step .* GiB |' "$work/out" | tail -1 | sed 's/.* | \([0-9.]*\) GiB | .*/\1/')
  echo "$1,$2,${CARD:-},$planned,$free,$peak" >>"$FIRST_RUN_CSV"
}

every_chapter_samples_after_its_default_run() {
  local ch
  for ch in $(chapters); do
    trains "$ch" "--steps 3" || return 1
  done
}

the_last_chapter_runs_on_the_kernels_of_every_gpu() {
  GPT2_PORTABLE_KERNELS=1 trains "$(last_chapter)" "--steps 3" || return 1
  says "$work/out" "the kernels of every GPU (no wgmma)"
}

# fits_or_refuses CH GIB: chapter CH beside the ballast trains, or exits 2
# saying the run does not fit and what does ("it fits with FLAGS"), and then
# trains with the first FLAGS it names. Returns 0 when it trained as asked,
# 3 when it was refused and trained with the flags it named, 1 on failure.
fits_or_refuses() {
  local ch=$1 gib=$2 args="--steps 3 --val-every 0 --sample-tokens 8" status=0 fix
  make --no-print-directory train CH="$ch" ARGS="$args" >"$work/out" 2>"$work/err" || status=$?
  case $status in
    0) CARD=$gib record_memory "$ch" "$args" ;;
    2) says "$work/err" "does not fit on the GPU" || return 1
       fix=$(first_fix "$work/err")
       [ -n "$fix" ] || fail "chapter $ch at $gib GiB names nothing that fits: $(cat "$work/err")" ||
         return 1
       CARD=$gib trains "$ch" "$args $fix" || return 1
       return 3 ;;
    *) fail "chapter $ch at $gib GiB: exit $status: $(tail -2 "$work/err")" ;;
  esac
}

# The cards, smallest first. A chapter that trains at its default batch on a
# card trains on every larger one: each card tries the chapters the one
# before it refused (every chapter on the first).
every_chapter_fits_a_smaller_card_or_names_the_batch() {
  local gib ch refused todo ballast bad=0
  todo=$(chapters)
  for gib in ${FIRST_RUN_CARDS:-10 16 24}; do
    build/tests/gpu_ballast "$gib" >"$work/ballast" &
    ballast=$!
    wait_for "$work/ballast" "ballast:" 60 || { kill $ballast; return 1; }
    refused=
    for ch in $todo; do
      local status=0
      fits_or_refuses "$ch" "$gib" || status=$?
      [ $status = 3 ] && refused="$refused $ch"
      [ $status = 1 ] && { bad=1; break; }
    done
    kill $ballast
    wait $ballast 2>/dev/null
    [ $bad = 0 ] || return 1
    echo "    $gib GiB: chapters refused at B=16:${refused:- none}"
    todo=$refused
  done
}

if ! nvidia-smi -L >/dev/null 2>&1 || [ ! -x build/train_gpt2_fp32 ] || [ ! -x build/tests/gpu_ballast ]; then
  echo "[SKIP] test_gpu_first_run: no GPU here (or no GPU trainers built)"
  exit 0
fi
check every_chapter_samples_after_its_default_run
check the_last_chapter_runs_on_the_kernels_of_every_gpu
check every_chapter_fits_a_smaller_card_or_names_the_batch
finish
