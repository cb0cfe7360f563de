#!/bin/sh
# Checks the generated systemd unit with `systemd-analyze verify` (works offline, without systemd
# as PID 1). Its ExecStart is pointed at the softaffd just built, since verify wants the binary
# to exist. Any message (unknown key, bad value) fails; a missing systemd-analyze skips (77).
# Usage: unit-check.sh UNIT-FILE SOFTAFFD-BINARY
set -eu

unit=$1
softaffd=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "systemd-analyze not found: skipped"
    exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|^ExecStart=[^ ]*softaffd|ExecStart=$softaffd|" "$unit" >"$dir/softaffd.service"
grep -q "^ExecStart=$softaffd --foreground\$" "$dir/softaffd.service" || {
    echo "ExecStart of $unit is not '.../softaffd --foreground'" >&2
    exit 1
}
out=$(systemd-analyze verify --man=no "$dir/softaffd.service" 2>&1) || {
    echo "$out"
    exit 1
}
# verify only warns (exit 0) about unknown keys and bad values: treat every message as an error.
if [ -n "$out" ]; then
    echo "$out"
    exit 1
fi
echo "systemd-analyze verify: ok"
