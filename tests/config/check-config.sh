#!/bin/sh
# softaffd --check-config on the fixtures in tests/data/config/check-*/ (a main file and its
# softaff.conf.d/ drop-ins) and the fixture host epyc-4n-2llc (4 nodes, partitions 0-3), as a CI
# pipeline runs it: no root, no libvirt, no socket. The valid set prints the merged values and
# exits 0, and its output loads back to the same values; a bad value and a partition the host
# lacks exit 1 with the drop-in's path, the group, the key and the value. Then the same partition
# check at start (exit 1) and on SIGHUP (refused, the running configuration kept).
# Usage: check-config.sh SOFTAFFD-BINARY (SOFTAFF_TEST_DATA: tests/data)
set -eu

softaffd=$1
data=$SOFTAFF_TEST_DATA/config
SOFTAFF_SYSFS_ROOT=$SOFTAFF_TEST_DATA/epyc-4n-2llc/sys
export SOFTAFF_SYSFS_ROOT
unset SOFTAFF_CONFIG
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

fail() {
    echo "FAIL: $*" >&2
    failed=1
}

# has FILE LINE...: every LINE is a whole line of FILE.
has() {
    file=$1
    shift
    for line in "$@"; do
        grep -qxF -- "$line" "$file" || fail "no line '$line' in the output of $file"
    done
}

# The valid set.
ok=$data/check-ok
rc=0
"$softaffd" --check-config --config "$ok/softaff.conf" >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 0 ] || fail "check-ok: exit $rc, expected 0: $(cat "$tmp/err")"
[ ! -s "$tmp/err" ] || fail "check-ok: wrote to stderr: $(cat "$tmp/err")"
has "$tmp/out" \
    "# read: $ok/softaff.conf" \
    "# read: $ok/softaff.conf.d/10-fleet.conf" \
    "# read: $ok/softaff.conf.d/20-site.conf" \
    "uri=qemu+tcp://unreachable.invalid/system" \
    "softness=30" "dwell_ms=3000" "manage=explicit" "max_holdoff_ms=30000" \
    "interval_ms=500" "layout=node" "strict=false" "every=1" \
    "[rule m1-large]" "match_flavor=m1.large*" "preferred=2" "softness=70" \
    "[rule batch]" "match_name=batch-*" "mode=strict"
! grep -q -e README -e 30-old -e nope "$tmp/out" || fail "check-ok: read a file that is no drop-in"
# The rules in order: m1-large (main file, kept in its place), then batch (the drop-in).
order=$(grep '^\[rule ' "$tmp/out" | tr '\n' ' ')
[ "$order" = "[rule m1-large] [rule batch] " ] || fail "check-ok: rules in order '$order'"
[ ! -e /nonexistent/softaff ] || fail "check-ok: created the socket's directory"

# The printed configuration loads back (alone: no drop-ins beside it) to the same values.
mkdir "$tmp/again"
cp "$tmp/out" "$tmp/again/softaff.conf"
rc=0
"$softaffd" --check-config -c "$tmp/again/softaff.conf" >"$tmp/out2" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 0 ] || fail "round trip: exit $rc: $(cat "$tmp/err")"
grep -v '^#' "$tmp/out" >"$tmp/keys1"
grep -v '^#' "$tmp/out2" >"$tmp/keys2"
cmp -s "$tmp/keys1" "$tmp/keys2" || fail "round trip: $(diff "$tmp/keys1" "$tmp/keys2")"

# bad: SET MESSAGE: exit 1, nothing on stdout, exactly this error.
bad() {
    set_dir=$data/$1
    rc=0
    "$softaffd" --check-config --config "$set_dir/softaff.conf" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq 1 ] || fail "$1: exit $rc, expected 1"
    [ ! -s "$tmp/out" ] || fail "$1: printed a configuration"
    want="softaffd: $set_dir/softaff.conf.d/10-fleet.conf: $2"
    [ "$(cat "$tmp/err")" = "$want" ] || fail "$1: error '$(cat "$tmp/err")', expected '$want'"
}
bad check-bad-value "[rule m1-large] softness=150: out of range (allowed: 0-100)"
bad check-bad-partition "[rule m1-large] preferred=7: names no partition of this host \
(partitions of layout node: 0, 1, 2, 3)"

# A rule naming a partition the host lacks stops a start, and a reload keeps the running
# configuration (softaffd in the foreground, backend=qmp without sockets: no libvirt, no root).
mkdir -p "$tmp/run/softaff.conf.d"
printf '[daemon]\nbackend=qmp\nsocket=%s/run/sock\n[rule a]\nmatch_name=x\npreferred=0\n' \
    "$tmp" >"$tmp/run/softaff.conf"
printf '[rule a]\npreferred=9\n' >"$tmp/run/softaff.conf.d/10-bad.conf"
want="$tmp/run/softaff.conf.d/10-bad.conf: [rule a] preferred=9: names no partition of this host \
(partitions of layout node: 0, 1, 2, 3)"
rc=0
timeout 20 "$softaffd" --foreground -c "$tmp/run/softaff.conf" >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] || fail "start with a bad rule: exit $rc, expected 1"
[ "$(cat "$tmp/err")" = "softaffd: $want" ] || fail "start: error '$(cat "$tmp/err")'"

# wait_log TEXT [hup]: until the daemon's log has a line with TEXT (10 s at most); with hup,
# sends SIGHUP first and again every second (GLib drops a SIGHUP that comes while the previous
# reload runs).
wait_log() {
    i=0
    while ! grep -qF -- "$1" "$tmp/log"; do
        [ "${2:-}" = hup ] && [ $((i % 10)) -eq 0 ] && kill -HUP "$pid"
        i=$((i + 1))
        if [ "$i" -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
            fail "reload: no log line '$1': $(cat "$tmp/log")"
            return 1
        fi
        sleep 0.1
    done
}
mv "$tmp/run/softaff.conf.d/10-bad.conf" "$tmp/run/bad.conf.off"
# Not under timeout(1), which takes a SIGHUP as a reason to end the command too. The EXIT trap
# ends the daemon if the test fails on the way.
"$softaffd" --foreground -c "$tmp/run/softaff.conf" >"$tmp/log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
if wait_log "starting"; then
    mv "$tmp/run/bad.conf.off" "$tmp/run/softaff.conf.d/10-bad.conf"
    wait_log "reload refused, keeping the running configuration: $want" hup &&
        rm "$tmp/run/softaff.conf.d/10-bad.conf" &&
        printf '[rule a]\npreferred=3\n' >"$tmp/run/softaff.conf.d/20-good.conf" &&
        wait_log "configuration reloaded" hup
fi
kill -TERM "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 0 ] || fail "softaffd exited $rc after SIGTERM: $(cat "$tmp/log")"

[ "$failed" -eq 0 ] && echo "softaffd --check-config: ok"
exit "$failed"
