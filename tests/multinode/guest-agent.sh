#!/bin/bash
# /sbin/softaff-mn-agent: runs the host's commands, one at a time, over the virtio-serial port
# named org.softaff.mn.agent. Line protocol (mnhost.py is the other end), base64 fields, '-' = empty:
#   host:  PING <id>                      guest: PONG <id> <uptime>
#   host:  RUN <id> <timeout-s> <cmd>     guest: DONE <id> <exit status> <stdout> <stderr>
# A command runs in bash -c with stdin from /dev/null; timeout(1) kills it at the limit (status 124).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
NAME=org.softaff.mn.agent

find_port() {
    local p
    for p in /sys/class/virtio-ports/*; do
        if [ "$(cat "$p/name" 2>/dev/null)" = "$NAME" ]; then
            echo "/dev/${p##*/}"
            return 0
        fi
    done
    return 1
}

b64() { if [ -s "$1" ]; then base64 -w0 "$1"; else echo -; fi; }

run_one() {
    local id=$1 tmo=$2 cmd rc
    if [ "$3" = - ]; then cmd=; else cmd=$(printf '%s' "$3" | base64 -d); fi
    (cd / && exec timeout -k 5 "$tmo" bash -c "$cmd") </dev/null >/tmp/.agent.out 2>/tmp/.agent.err
    rc=$?
    printf 'DONE %s %s %s %s\n' "$id" "$rc" "$(b64 /tmp/.agent.out)" "$(b64 /tmp/.agent.err)" >&3
}

serve() {
    local verb id arg1 arg2
    while read -r verb id arg1 arg2 <&3; do
        case $verb in
        PING) printf 'PONG %s %s\n' "$id" "$(cut -d' ' -f1 /proc/uptime)" >&3 ;;
        RUN) run_one "$id" "$arg1" "$arg2" ;;
        *) echo "softaff-mn-agent: unknown request '$verb'" >/dev/console ;;
        esac
    done
}

port=
for _ in $(seq 100); do
    port=$(find_port) && [ -c "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || {
    echo "softaff-mn-agent: no virtio port named $NAME" >/dev/console
    exec sleep infinity
}
echo "softaff-mn: agent on $port at $(cut -d' ' -f1 /proc/uptime)s" >/dev/console
# read returns EOF while no host end is connected: reopen after a pause and wait again.
while true; do
    exec 3<>"$port"
    serve
    exec 3<&-
    sleep 0.2
done
