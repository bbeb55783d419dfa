# lib.sh: what the shell tests share. Source it first; each test script then
# runs its cases with `check FUNCTION [ARGS...]` and ends with `finish`.
#
# A case is one of the test's functions, named for what it checks; it passes
# when it returns 0, and calls `fail` with what went wrong (or `skip`, with
# why it cannot run here). Every case runs in a subshell, with a fresh
# temporary directory $work, removed afterwards.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
failures=0

fail() {
  echo "    $*" >&2
  return 1
}

# skip REASON: for a case that cannot run here (a tool it needs is missing):
# says why and returns 77, which check reports as [SKIP]. Use it as
# `command -v tool >/dev/null || { skip "tool is not installed"; return; }`.
skip() {
  echo "    $*"
  return 77
}

check() {
  local name=$1 status=0
  work=$(mktemp -d "/tmp/test_shell_XXXXXX")
  ( "$@" ) || status=$?
  if [ "$status" = 0 ]; then
    echo "[PASS] $(basename "$0" .sh)::$name"
  elif [ "$status" = 77 ]; then
    echo "[SKIP] $(basename "$0" .sh)::$name"
  else
    echo "[FAIL] $(basename "$0" .sh)::$name"
    failures=$((failures + 1))
  fi
  rm -rf "$work"
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$(basename "$0"): $failures case(s) failed" >&2
    exit 1
  fi
}

# expect_status WANT COMMAND...: runs COMMAND with its output in $work/out and
# $work/err; fails unless it exits with WANT.
expect_status() {
  local want=$1 got=0
  shift
  "$@" >"$work/out" 2>"$work/err" || got=$?
  [ "$got" = "$want" ] || fail "exit status $got, expected $want: $*" \
    "$(printf '\n    stdout: %s\n    stderr: %s' "$(tail -3 "$work/out")" "$(tail -3 "$work/err")")"
}

# says FILE TEXT: FILE contains TEXT (a fixed string).
says() {
  grep -qF -- "$2" "$1" || fail "$(basename "$1") does not say \"$2\": $(head -c 600 "$1")"
}

# wait_for FILE TEXT SECONDS: until FILE contains TEXT; fails after SECONDS.
wait_for() {
  local i
  for ((i = 0; i < $3 * 20; i++)); do
    grep -qF -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "waited $3 s for \"$2\" in $(basename "$1"): $(tail -3 "$1")"
}

# first_fix FILE: the flags of the first change that a refusal for memory
# names in FILE ("... it fits with -b 8 --grad-accum 2 (about 9.1 GiB, ...)";
# common/train/memory_budget.h), or nothing.
first_fix() {
  grep -o 'it fits with [^(]*' "$1" | head -1 | sed 's/^it fits with //; s/ *$//'
}
