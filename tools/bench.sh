#!/usr/bin/env bash
# bench.sh: measure every chapter at the same settings, and PyTorch beside
# them, into results/<gpu>/. Run by `make bench` on a GPU machine.
#
#   results/<gpu>/results.csv       one row per run: median ms/step over the
#                                   timed steps, tok/s, TFLOP/s, MFU, peak
#                                   memory, and the time split by phase
#   results/<gpu>/environment.txt   GPU, driver, CUDA, PyTorch, date, commit
#   results/<gpu>/logs/<label>.txt  each of our runs, step by step (loss curves)
#   results/<gpu>/profile_chNN.csv  each chapter's step, kernel by kernel
#                                   (--profile: device ms per step and share),
#                                   from a run of its own so that the timed
#                                   runs carry no profiling marks
#   results/<gpu>/profile_chNN_BM.csv  the last two chapters', at the
#                                   headline's batch M (HEAD_B)
#
# Settings (environment variables): B (16), T (1024), STEPS (25: 5 warm-up +
# 20 timed), LARGE_B (32: a second, larger batch where memory allows),
# HEAD_B (64: the batch of the headline rows, the last three chapters and
# PyTorch's best recipe side by side, of the last two chapters' profiles at
# that batch, and of the last one's micro-batch row),
# TRAINER_FP32 (build/train_gpt2_fp32), TRAINER_BF16 (build/train_gpt2_bf16),
# PYTHON (python3), CHAPTERS (every chapter of the table; none: no chapter's
# row or profile), HEADLINE (1: the rows at HEAD_B; 0: not), HEAD_CHAPTERS (the
# headline's chapters: the last three of the table), PYTORCH (1: also
# PyTorch's rows; 0: ours only), PROFILE_STEPS (5).
#
# PYTORCH_ONLY (a bash regular expression: only PyTorch's rows whose label
# matches it, to split PyTorch's rows over two calls of one session),
# OURS (1: our rows and profiles; 0: PyTorch's only), EXTRAS (1: the ablations and the
# larger batch too; last: only those of the last chapter; 0: none), APPEND (1: add the rows to an existing results.csv and keep its
# environment.txt: a bench split over two sessions of one machine).
# RESULTS (results/<gpu>: where the files go). WHEELS (build/wheels: where
# tools/fetch_torchao.sh puts torchao's wheel, which PyTorch's float8 and
# 8-bit AdamW rows need). SIZES (0: not; 1: also; only: nothing else):
# chapter 14's rows, GPT-2 medium (B=8) and XL (B=4) in our trainer's memory
# budget and in PyTorch's eager recipe, plain, checkpointed, and with 8-bit
# AdamW; `APPEND=1 SIZES=only bash tools/bench.sh` adds them to a session.
# GPUS (unset: one GPU, as above; N >= 2: also, after all the rest, chapter
# 15's rows on several GPUs of this machine): the last chapter at B per GPU
# on 1, 2, 4, ... GPUs up to N (and N), through tools/launch_local.sh (one
# GPU: the trainer alone), labelled ch15-g1, ch15-g2, ..., and on N without
# the overlap and with ZeRO-1, its mean in one reduce-scatter and with the overlap
# (ch15-gN-no-overlap-comm, ch15-gN-zero1, ch15-gN-zero1-overlap-comm); and PyTorch's best
# recipe in DistributedDataParallel under torchrun on 1 and N GPUs
# (pytorch-ddp-g1, pytorch-ddp-gN) and with ZeRO-1 on N (pytorch-ddp-zero-gN);
# each row's tok/s is the total over its GPUs. The files go to
# results/<gpu>xN unless RESULTS says otherwise. The multi-GPU rows alone:
# `GPUS=2 CHAPTERS=none EXTRAS=0 HEADLINE=0 PYTORCH_ONLY=-ddp- bash tools/bench.sh`.
#
# Each chapter runs in the trainer built for its precision: the chapter
# table (--list-chapters: chapter, precision, switch, title) says which.
set -uo pipefail
cd "$(dirname "$0")/.."
# Nothing to measure without a GPU: say so, write nothing, and fail.
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench: no GPU here (nvidia-smi finds none): nothing was measured or written" >&2
  exit 1
fi
GPUS=${GPUS:-}
if [ -n "$GPUS" ]; then
  if ! [[ $GPUS =~ ^[0-9]+$ ]] || [ "$GPUS" -lt 2 ]; then
    echo "bench: GPUS=$GPUS: the number of GPUs of the multi-GPU rows, 2 or more (unset: none)" >&2
    exit 1
  fi
  if [ "$(nvidia-smi -L | grep -c '^GPU ')" -lt "$GPUS" ]; then
    echo "bench: GPUS=$GPUS, but nvidia-smi lists $(nvidia-smi -L | grep -c '^GPU ') GPU(s): nothing was measured or written" >&2
    exit 1
  fi
fi
B=${B:-16} T=${T:-1024} STEPS=${STEPS:-25} WARMUP=${WARMUP:-5} LARGE_B=${LARGE_B:-32} HEAD_B=${HEAD_B:-64}
TRAINER_FP32=${TRAINER_FP32:-build/train_gpt2_fp32} TRAINER_BF16=${TRAINER_BF16:-build/train_gpt2_bf16}
PYTHON=${PYTHON:-python3} PYTORCH=${PYTORCH:-1} PROFILE_STEPS=${PROFILE_STEPS:-5}
EXTRAS=${EXTRAS:-1} OURS=${OURS:-1} APPEND=${APPEND:-0} PYTORCH_ONLY=${PYTORCH_ONLY:-}
HEADLINE=${HEADLINE:-1} SIZES=${SIZES:-0}
# SIZES=only: chapter 14's rows and no other (no chapter, ablation, headline
# or other PyTorch row; PYTORCH_ONLY may still pick some of its own).
if [ "$SIZES" = only ]; then
  CHAPTERS=none EXTRAS=0 HEADLINE=0 PYTORCH_ONLY=${PYTORCH_ONLY:-'^pytorch-(medium|xl)(-|$)'}
fi
WHEELS=${WHEELS:-build/wheels}
table=$("$TRAINER_FP32" --list-chapters)
last=$(echo "$table" | awk 'NR > 1 {print $1}' | tail -1)
# The headline's chapters: the last three (each chapter's gain at HEAD_B
# beside the chapter before it, for the last two), or HEAD_CHAPTERS (a
# chapter's own headline: HEAD_CHAPTERS="11 12" for chapter 12's); the B=HEAD_B
# profiles are the last two of them.
head_chapters=${HEAD_CHAPTERS:-$(echo "$table" | awk 'NR > 1 {print $1}' | tail -3)}

trainer_for() {  # chapter -> the trainer binary of its precision
  case $(echo "$table" | awk -v ch="$1" 'NR > 1 && $1 == ch {print $2}') in
    bf16) echo "$TRAINER_BF16" ;;
    *) echo "$TRAINER_FP32" ;;
  esac
}

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
slug=$(echo "$gpu_name" | grep -oiE 'H100|H200|A100|L40S|L4|RTX ?[0-9]+' | head -1 | tr 'A-Z ' 'a-z_')
slug=${slug:-$(echo "$gpu_name" | tr 'A-Z ' 'a-z_')}
# Several GPUs (GPUS) are another machine than one: results/h100x2, say.
out=${RESULTS:-results/$slug${GPUS:+x$GPUS}}
mkdir -p "$out/logs"
csv=$out/results.csv
if [ "$APPEND" != 1 ] || [ ! -f "$csv" ]; then
  echo "label,chapter,B,T,steps,ms_per_step,tok_per_s,tflops,mfu,peak_mem_gib,data_ms,forward_ms,backward_ms,optimizer_ms" > "$csv"
fi

# torchao (PyTorch's float8 training, for the float8 rows) does not come
# with torch, and a GPU machine may have no package index: its wheel travels
# with the tree in $WHEELS (tools/fetch_torchao.sh). It is installed into a
# folder of this run's own, put on PYTHONPATH for PyTorch's rows only, so the
# machine's Python stays as it was. Without it, the float8 rows (and
# SIZES's 8-bit AdamW rows, torchao.optim) are skipped with a line that says
# why (unless that Python already has torchao). Only a table with chapter
# 13 has those rows.
torchao_site= torchao_missing= torchao_note=
if [ "$PYTORCH" != 0 ] && [ "$last" -ge 13 ]; then
  torchao_wheel=$(ls "$WHEELS"/torchao-*.whl 2>/dev/null | sort -V | tail -1)
  if [ -n "$torchao_wheel" ]; then
    torchao_site=$(mktemp -d)
    torchao_dir=$torchao_site  # removed at the end, even when the install failed
    trap 'rm -rf "$torchao_dir"' EXIT
    if $PYTHON -m pip --version >/dev/null 2>&1; then
      log=$($PYTHON -m pip install --quiet --no-deps --no-index --target "$torchao_site" \
            "$torchao_wheel" 2>&1) || torchao_missing="pip could not install $torchao_wheel: $(tail -1 <<<"$log")"
    else
      # No pip in that Python: a pure-Python wheel is a zip archive laid
      # out as installed, so unpacking it is the same install.
      log=$($PYTHON -m zipfile -e "$torchao_wheel" "$torchao_site" 2>&1) \
        || torchao_missing="could not unpack $torchao_wheel: $(tail -1 <<<"$log")"
    fi
    # The wheel also ships torchao's own tests as a top-level package named
    # test, which on PYTHONPATH would hide Python's package of that name.
    rm -rf "$torchao_site/test"
    torchao_note="$(basename "$torchao_wheel") from $WHEELS, for the float8 and 8-bit AdamW rows"
  elif $PYTHON -c 'import torchao.float8, torchao.optim' >/dev/null 2>&1; then
    torchao_note="$PYTHON's own, for the float8 and 8-bit AdamW rows"
  else
    torchao_missing="no torchao wheel in $WHEELS: run tools/fetch_torchao.sh (where pip reaches PyPI) first"
  fi
  [ -z "$torchao_missing" ] || { torchao_site=; torchao_note="none: the float8 and 8-bit AdamW rows were skipped ($torchao_missing)"; }
fi

# GPUS: the GPU counts of chapter 15's rows, 1, 2, 4, ... up to GPUS, and
# GPUS itself; and what the multi-GPU part runs, for environment.txt.
gpu_counts() {
  local k=1
  while [ "$k" -lt "$GPUS" ]; do echo "$k"; k=$((k * 2)); done
  echo "$GPUS"
}
ddp_recipe=compile-bf16-sdpa-vocab-tied-fused-lossonly  # PyTorch's best, in DDP
multi_gpu_note() {
  local ran=
  [ "$OURS" = 1 ] && ran="our last chapter on $(echo $(gpu_counts)) GPUs (ch15-gK, tools/launch_local.sh)"
  [ "$PYTORCH" = 1 ] && ran="${ran:+$ran; }PyTorch's $ddp_recipe in DDP under torchrun on 1 and $GPUS GPUs and with --zero on $GPUS (pytorch-ddp-gK, pytorch-ddp-zero-g$GPUS${PYTORCH_ONLY:+: those matching $PYTORCH_ONLY})"
  echo "$GPUS of the $(nvidia-smi -L | grep -c '^GPU ') GPUs that nvidia-smi lists, B=$B per GPU: ${ran:-nothing (OURS=$OURS, PYTORCH=$PYTORCH)}"
}

[ "$APPEND" = 1 ] || {
  echo "gpu: $gpu_name"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  echo "cuda: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2)"
  echo "pytorch: $($PYTHON -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  [ -z "$torchao_note" ] || echo "torchao: $torchao_note"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # COMMIT names the code when the tree was copied without its .git folder.
  echo "commit: ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "settings: B=$B T=$T steps=$STEPS warmup=$WARMUP large_B=$LARGE_B head_B=$HEAD_B; data TinyShakespeare (ours), random tokens (PyTorch)"
  [ -z "$GPUS" ] || echo "gpus: $(multi_gpu_note)"
} > "$out/environment.txt"

# One trainer run; a failure (out of memory at the large batch) or a run
# refused for memory (its plan over --memory-limit) is reported, and the
# benchmark goes on. With ranks=K (K >= 2) set by the caller, the run is K
# processes, one a GPU, started by tools/launch_local.sh (chapter 15): b is
# each one's batch, and rank 0 writes the row, its tok/s the total.
ours() {  # label, batch, chapter, flags...
  local label=$1 b=$2 ch=$3; shift 3
  local trainer log=$out/logs/$label.txt; trainer=$(trainer_for "$ch")
  local run=("$trainer")
  [ "${ranks:-1}" = 1 ] || run=(bash tools/launch_local.sh "$ranks" "$trainer")
  echo "== $label (B=$b, ${run[*]}): log in $log =="
  "${run[@]}" --chapter "$ch" "$@" -b "$b" -t "$T" --steps "$STEPS" --val-every 0 --sample-tokens 0 \
    --log-every 1 --bench-csv "$csv" --bench-warmup "$WARMUP" --bench-label "$label" \
    > "$log" 2>&1 || echo "!! $label at B=$b $(grep -q 'does not fit' "$log" && echo refused || echo failed): $(grep -v '^launch_local:' "$log" | tail -1)"
  grep '^bench:' "$log"
}

# The chapter's step kernel by kernel: the warm-up, then PROFILE_STEPS
# profiled steps (profiler.h), into profile_chNN.csv (profile_chNN_BM.csv at
# a batch M other than B); the table is also at the end of the log.
profile() {  # chapter [batch]
  local ch=$1 b=${2:-$B} label; label=ch$(printf %02d "$1")
  [ "$b" = "$B" ] || label=${label}_B$b
  local trainer; trainer=$(trainer_for "$ch")
  echo "== $label profile (B=$b): $out/profile_$label.csv =="
  "$trainer" --chapter "$ch" -b "$b" -t "$T" --steps $((WARMUP + PROFILE_STEPS)) --val-every 0 \
    --sample-tokens 0 --log-every 1 --bench-warmup "$WARMUP" --profile "$PROFILE_STEPS" \
    --profile-csv "$out/profile_$label.csv" --memory > "$out/logs/$label-profile.txt" 2>&1 \
    || echo "!! $label profile failed: $(tail -1 "$out/logs/$label-profile.txt")"
  grep '^profile:' "$out/logs/$label-profile.txt" | head -12
}

# One PyTorch row. With nproc=K set by the caller, K processes, one a GPU,
# under torchrun (the torchrun of PYTHON's torch: python -m
# torch.distributed.run), in DistributedDataParallel: the output goes to
# logs/<label>.txt, and rank 0 writes the row, its tok/s the total.
pytorch() {  # label, batch, mode, more of pytorch_reference.py's flags...
  [ "$PYTORCH" = 1 ] || { [ "$PYTORCH" = best ] && [ "$3" = compile-bf16-flash ]; } || return 0
  [ -z "$PYTORCH_ONLY" ] || [[ $1 =~ $PYTORCH_ONLY ]] || return 0
  # An appended session's row of a label results.csv already has is a rerun:
  # it gets a label of its own, and the first row keeps its number.
  local label=$1
  grep -q "^$label," "$csv" && label=$label-rerun
  # The float8 and 8-bit AdamW modes need torchao (installed above, or the
  # reason it is not).
  if [[ $3 == *-float8 || $3 == *-8bit ]] && [ -n "$torchao_missing" ]; then
    echo "== $label (B=$2) skipped: $torchao_missing =="
    return 0
  fi
  local pythonpath=${PYTHONPATH:-}
  [ -z "$torchao_site" ] || pythonpath=$torchao_site${pythonpath:+:$pythonpath}
  local bench=(tools/pytorch_reference.py bench --mode "$3" --B "$2" --T "$T"
               --steps $((STEPS - WARMUP)) --warmup "$WARMUP" --label "$label" --out-csv "$csv.torch" "${@:4}")
  if [ -z "${nproc:-}" ]; then
    echo "== $label (B=$2) =="
    PYTHONPATH=$pythonpath $PYTHON "${bench[@]}" || echo "!! $1 at B=$2 failed (see above)"
    return 0
  fi
  local log=$out/logs/$label.txt
  echo "== $label (B=$2 per GPU, torchrun on $nproc GPU$([ "$nproc" = 1 ] || echo s)): log in $log =="
  PYTHONPATH=$pythonpath $PYTHON -m torch.distributed.run --standalone --nproc-per-node "$nproc" \
    "${bench[@]}" > "$log" 2>&1 \
    || echo "!! $1 at B=$2 on $nproc GPUs failed: $(grep -m1 'bench: \|Error' "$log" || tail -1 "$log")"
  grep "^# losses\|^$label," "$log"
}

chapters=${CHAPTERS:-$(echo "$table" | awk 'NR > 1 {print $1}')}
[ "$chapters" = none ] && chapters=
# An appended session says so in environment.txt: its rows are another run's.
[ "$APPEND" = 1 ] && echo "appended: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}:$([ "$OURS" = 1 ] && [ -n "$chapters" ] && echo " chapters $(echo $chapters) and their profiles")$([ "$SIZES" != 0 ] && echo " chapter 14's GPT-2 medium and XL rows (SIZES=$SIZES)")$([ "$PYTORCH" != 0 ] && echo " PyTorch rows ($PYTORCH${PYTORCH_ONLY:+, matching $PYTORCH_ONLY})")${torchao_note:+; torchao: $torchao_note}$([ -n "$GPUS" ] && echo "; gpus: $(multi_gpu_note)")" >> "$out/environment.txt"
[ "$OURS" = 1 ] && for ch in $chapters; do ours "ch$(printf %02d "$ch")" "$B" "$ch"; done
[ "$OURS" = 1 ] && for ch in $chapters; do profile "$ch"; done
# Leave-one-out ablations at the last chapter: each run-time switch off in
# turn. Only switches of the last chapter's precision: chapter 02's change,
# bf16, is a build, not a switch (its ablation is the fp32 chapters' rows),
# and tensor-cores (TF32) means nothing to bf16 GEMMs.
last_prec=$(echo "$table" | awk -v ch="$last" 'NR > 1 && $1 == ch {print $2}')
# (A chapter's switches are comma-separated in the table: chapter 11 has three.)
# Chapter 11's graphs need sync avoidance and the fused optimizer (train_gpu.c):
# those two are turned off with the graphs; chapter 13's FP8 needs kernel
# fusion's cuBLASLt GEMMs, and is turned off with it. Chapter 14's
# fit-memory changes only a run over its budget, which these are not: its
# row would be the chapter's own again, so it has none.
[ "$EXTRAS" != 0 ] && [ "$OURS" = 1 ] && for sw in $(echo "$table" | awk -v p="$last_prec" 'NR > 1 && $3 != "-" && $2 == p {print $3}' | tr , '\n'); do
  case $sw in
    sync-avoidance|fused-optimizer) also=--no-cuda-graphs ;;
    kernel-fusion) also=--no-fp8 ;;  # chapter 13's FP8 GEMMs are cuBLASLt's (chapter 04)
    fit-memory) continue ;;
    *) also= ;;
  esac
  ours "ch$(printf %02d "$last")-no-$sw" "$B" "$last" "--no-$sw" $also
done
pytorch pytorch-eager-fp32 "$B" eager-fp32
pytorch pytorch-eager-tf32 "$B" eager-tf32
pytorch pytorch-eager-bf16 "$B" eager-bf16  # beside chapters 02 and 03
# From chapter 04 on, each chapter has PyTorch's matching recipe beside it
# (tools/pytorch_reference.py --list-modes): torch.compile with the eager
# attention, then + SDPA, + the padded vocabulary, + tying, + fused AdamW.
for entry in 4:compile-bf16 5:compile-bf16-sdpa 6:compile-bf16-sdpa-vocab \
             7:compile-bf16-sdpa-vocab-tied; do
  [ "${entry%%:*}" -le "$last" ] && pytorch "pytorch-${entry#*:}" "$B" "${entry#*:}"
done
# PyTorch's default AdamW (foreach, not fused): the unfused optimizer a
# PyTorch user starts from, beside chapter 09's fused one.
[ "$last" -ge 9 ] && pytorch pytorch-foreach "$B" compile-bf16-sdpa-vocab-tied-foreach
# PyTorch's best single-GPU recipe (all of the above and fused AdamW): the
# book's target, and chapter 08's row; and the same recipe whose compiled
# forward returns only the loss (no (B,T,Vp) logits kept as an output), the
# stronger of the two, which the book compares with.
pytorch pytorch-compile-bf16-flash "$B" compile-bf16-flash
pytorch pytorch-lossonly "$B" compile-bf16-sdpa-vocab-tied-fused-lossonly
# That recipe with the blocks' matrix products in float8 (torchao's
# tensorwise scaling; the lm_head stays bf16), beside chapter 13's FP8 GEMMs.
[ "$last" -ge 13 ] && pytorch pytorch-float8 "$B" compile-bf16-sdpa-vocab-tied-fused-lossonly-float8
# The larger batch, and the runs the chapters' own arguments rest on:
# chapter 03's fit of a step's time against the batch (chapters 00 and 03 at
# B=LARGE_B) and its switch turned off in its own chapter.
if [ "$EXTRAS" = 1 ]; then
  if [ "$OURS" = 1 ]; then
    ours "ch00-B$LARGE_B" "$LARGE_B" 0
    ours "ch03-B$LARGE_B" "$LARGE_B" 3
    ours "ch03-no-sync-avoidance" "$B" 3 --no-sync-avoidance
  fi
  pytorch "pytorch-eager-fp32-B$LARGE_B" "$LARGE_B" eager-fp32
fi
[ "$EXTRAS" != 0 ] && [ "$OURS" = 1 ] && ours "ch$(printf %02d "$last")-B$LARGE_B" "$LARGE_B" "$last"

# The headline: the last chapter and PyTorch's best recipe at HEAD_B, in
# this run, side by side, and the two chapters before the last beside them
# (what each of the last two chapters bought at that batch); the same step of
# HEAD_B sequences made of micro-batches of B (--grad-accum), in the memory
# of B; and the last two chapters' steps at HEAD_B kernel by kernel.
if [ "$OURS" = 1 ] && [ "$HEADLINE" = 1 ]; then
  for ch in $head_chapters; do
    ours "ch$(printf %02d "$ch")-B$HEAD_B" "$HEAD_B" "$ch"
  done
  [ "$EXTRAS" != 0 ] && ours "ch$(printf %02d "$last")-B${B}x$((HEAD_B / B))" "$B" "$last" --grad-accum $((HEAD_B / B))
  if [ "$HEAD_B" != "$B" ]; then
    for ch in $(printf '%s\n' $head_chapters | tail -2); do profile "$ch" "$HEAD_B"; done
  fi
fi
if [ "$HEADLINE" = 1 ]; then
  pytorch "pytorch-compile-bf16-flash-B$HEAD_B" "$HEAD_B" compile-bf16-flash
  pytorch "pytorch-lossonly-B$HEAD_B" "$HEAD_B" compile-bf16-sdpa-vocab-tied-fused-lossonly
  [ "$last" -ge 13 ] && pytorch "pytorch-float8-B$HEAD_B" "$HEAD_B" compile-bf16-sdpa-vocab-tied-fused-lossonly-float8
fi

# Chapter 14 (SIZES): GPT-2 medium at B=8 in 8 GiB and XL at B=4 in 16 GiB,
# chapter 14's step with every block's activations recomputed (the level
# --fit-memory would take for both: the runs are those that were measured
# in chapter 13 with these flags), and XL's weights without an fp32 master
# copy (their updates rounded stochastically into bf16): a plan over the
# budget is refused, the line says so, and the bench goes on; and
# PyTorch's eager recipe at the same batches, plain, with every block
# checkpointed, and with torchao's 8-bit AdamW too (its memory unlimited:
# the rows say how much it held).
if [ "$SIZES" != 0 ] && [ "$last" -ge 14 ]; then
  if [ "$OURS" = 1 ]; then
    ours ch14-medium-8g 8 14 --model 355m --memory-limit 8 --recompute block
    ours ch14-xl-16g 4 14 --model 1558m --memory-limit 16 --recompute block --no-master-weights
    # XL in 16 GiB keeping its fp32 master weights: one layer's gradients,
    # applied in the backward pass (without clipping), and the moments on
    # the host.
    ours ch14-xl-16g-master 4 14 --model 1558m --memory-limit 16 --recompute block \
      --update-in-backward --grad-clip 0 --offload-optimizer
  fi
  for size in medium:8:355m xl:4:1558m; do
    IFS=: read -r name b model <<<"$size"
    recipe=eager-bf16-sdpa-vocab-tied-fused-lossonly
    pytorch "pytorch-$name" "$b" "$recipe" --model "$model"
    pytorch "pytorch-$name-ckpt" "$b" "$recipe-ckpt" --model "$model"
    pytorch "pytorch-$name-ckpt-8bit" "$b" "$recipe-ckpt-8bit" --model "$model"
  done
fi

# Several GPUs (GPUS), after everything else: chapter 15, our last chapter
# at B per GPU on 1, 2, 4, ... GPUs, each row's tok/s the total, and on GPUS
# GPUs without its switch (the gradients averaged after the backward pass,
# not beside it); and PyTorch's best recipe in DDP on 1 and GPUS GPUs, and
# with ZeRO-1 (--zero) on GPUS.
if [ -n "$GPUS" ]; then
  if [ "$OURS" = 1 ]; then
    for k in $(gpu_counts); do ranks=$k ours "ch15-g$k" "$B" "$last"; done
    ranks=$GPUS ours "ch15-g$GPUS-no-overlap-comm" "$B" "$last" --no-overlap-comm
    # ZeRO-1 with its gradients' mean in one reduce-scatter, and with the
    # overlap (each layer's parts reduced to their owners: more bytes).
    ranks=$GPUS ours "ch15-g$GPUS-zero1" "$B" "$last" --shard-optimizer --no-overlap-comm
    ranks=$GPUS ours "ch15-g$GPUS-zero1-overlap-comm" "$B" "$last" --shard-optimizer
  fi
  nproc=1 pytorch pytorch-ddp-g1 "$B" "$ddp_recipe"
  nproc=$GPUS pytorch "pytorch-ddp-g$GPUS" "$B" "$ddp_recipe"
  nproc=$GPUS pytorch "pytorch-ddp-zero-g$GPUS" "$B" "$ddp_recipe" --zero
fi

# PyTorch's rows, without their own header line.
[ -f "$csv.torch" ] && grep -v '^label,' "$csv.torch" >> "$csv" && rm -f "$csv.torch"
echo
if command -v column >/dev/null; then column -s, -t < "$csv"; else cat "$csv"; fi
echo "wrote $csv and $out/environment.txt"
