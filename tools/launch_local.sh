#!/usr/bin/env bash
# launch_local.sh N PROGRAM [ARGS...]: chapter 15's launcher for one host,
# what `torchrun --no-python --nproc-per-node N` does for a trainer that
# reads its variables: N processes of PROGRAM ARGS, process r told its place
# as torchrun tells it (RANK=r, WORLD_SIZE=N, LOCAL_RANK=r: GPU r), and all
# given one fresh --nccl-id-file where they meet (rendezvous.h). Waits for
# all of them; when one fails, stops the others and exits with its status.
# The variables NCCL reads (NCCL_DEBUG, NCCL_P2P_DISABLE, ...) pass through.
set -u
[ $# -ge 2 ] && [[ $1 =~ ^[1-9][0-9]*$ ]] || {
  echo "usage: $0 N PROGRAM [ARGS...]  (N processes, one a GPU)" >&2; exit 2; }
n=$1; shift
meet=$(mktemp -d "${TMPDIR:-/tmp}/gpt2_ranks.XXXXXX")
pids=()
stop_all() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; }
trap 'stop_all; rm -rf "$meet"' EXIT
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM
for ((r = 0; r < n; r++)); do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r "$@" --nccl-id-file "$meet/nccl_id" &
  pids+=($!)
done
status=0
for ((left = n; left > 0; left--)); do
  wait -n; s=$?
  if [ "$s" != 0 ] && [ "$status" = 0 ]; then
    status=$s
    echo "launch_local: a rank exited with status $s: stopping the others" >&2
    stop_all
  fi
done
exit "$status"
