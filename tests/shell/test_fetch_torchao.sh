#!/usr/bin/env bash
# test_fetch_torchao.sh: tools/fetch_torchao.sh keeps nothing that is not
# the checked wheel. Runs offline: a stand-in Python plays pip download,
# failing (no network) or handing back a file whose sha256 is wrong.
source "$(dirname "$0")/lib.sh"

# A stand-in Python whose `-m pip download ... -d DIR` runs $1 (shell code,
# with $dir set to DIR).
stand_in_pip() {
  mkdir -p "$work/bin"
  cat >"$work/bin/python" <<PY
#!/usr/bin/env bash
while [ \$# -gt 0 ]; do [ "\$1" = -d ] && dir=\$2; shift; done
$1
PY
  chmod +x "$work/bin/python"
}

without_a_network_it_fails_saying_so_and_writes_no_wheel() {
  stand_in_pip 'echo "ERROR: No matching distribution found for torchao==0.18.0" >&2; exit 1'
  WHEELS="$work/wheels" PYTHON="$work/bin/python" expect_status 1 bash tools/fetch_torchao.sh || return 1
  says "$work/err" "fetch_torchao: pip could not download torchao 0.18.0 (no network here?" || return 1
  [ -z "$(ls "$work/wheels" 2>/dev/null)" ] || fail "wheels: $(ls "$work/wheels")"
}

a_wheel_with_the_wrong_checksum_is_not_kept() {
  stand_in_pip 'echo not-a-wheel >"$dir/torchao-0.18.0-py3-none-any.whl"'
  WHEELS="$work/wheels" PYTHON="$work/bin/python" expect_status 1 bash tools/fetch_torchao.sh || return 1
  says "$work/err" "fetch_torchao: torchao-0.18.0-py3-none-any.whl: checksum mismatch" || return 1
  [ -z "$(ls "$work/wheels" 2>/dev/null)" ] || fail "wheels: $(ls "$work/wheels")"
}

check without_a_network_it_fails_saying_so_and_writes_no_wheel
check a_wheel_with_the_wrong_checksum_is_not_kept
finish
