#!/bin/bash
# Regenerates the synthetic sysfs fixture trees in tests/data/<machine>/sys, shaped like the
# machines they are named after but holding only the files softaff reads:
#   devices/system/cpu/online
#   devices/system/cpu/cpuN/cache/indexK/{level,type,id,shared_cpu_list}  (online CPUs only;
#     the level-1 Data/Instruction caches only in the small machines, where they are cheap)
#   devices/system/node/online
#   devices/system/node/nodeN/{cpulist,meminfo,distance}
# and the /proc samples in tests/data/proc (proc/stat itself is the capture of this host).
#
#   tests/data/make-fixtures.sh                  rebuild the synthetic machines and /proc samples
#   tests/data/make-fixtures.sh --capture-host   also capture this machine into this-host/
#
# After a change, regenerate the goldens: SOFTAFF_REGENERATE_GOLDEN=1 meson test -C BUILD host-topology
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

# cpulist of the numbers given on stdin (one a line), ranges merged.
cpulist() {
    sort -n | uniq | awk '
        NR == 1 { first = $1; last = $1; next }
        $1 == last + 1 { last = $1; next }
        { out = out sep (first == last ? first : first "-" last); sep = ","; first = $1; last = $1 }
        END { if (NR > 0) print out sep (first == last ? first : first "-" last); else print "" }'
}

# range FIRST LAST: the numbers, one a line
range() { seq "$1" "$2"; }

# new_machine NAME: starts an empty tree
new_machine() {
    machine="$here/$1"
    rm -rf "$machine/sys"
    sys="$machine/sys/devices/system"
    mkdir -p "$sys/cpu" "$sys/node"
}

# set_online CPULIST / set_nodes_online NODELIST
set_online() { echo "$1" > "$sys/cpu/online"; }
set_nodes_online() { echo "$1" > "$sys/node/online"; }

# node ID CPULIST MEMTOTAL_KB MEMFREE_KB DISTANCE_ROW
node() {
    local d="$sys/node/node$1"
    mkdir -p "$d"
    echo "$2" > "$d/cpulist"
    echo "$5" > "$d/distance"
    local used=$(($3 - $4))
    printf 'Node %s MemTotal:       %8s kB\nNode %s MemFree:        %8s kB\nNode %s MemUsed:        %8s kB\n' \
        "$1" "$3" "$1" "$4" "$1" "$used" > "$d/meminfo"
}

# cache CPU INDEX LEVEL TYPE ID SHARED_CPULIST   (ID "-" leaves the id file out)
cache() {
    local d="$sys/cpu/cpu$1/cache/index$2"
    mkdir -p "$d"
    echo "$3" > "$d/level"
    echo "$4" > "$d/type"
    [ "$5" = "-" ] || echo "$5" > "$d/id"
    echo "$6" > "$d/shared_cpu_list"
}

# l1 CPU INDEX TYPE: a level-1 split cache (softaff reads only its type)
l1() {
    local d="$sys/cpu/cpu$1/cache/index$2"
    mkdir -p "$d"
    echo 1 > "$d/level"
    echo "$3" > "$d/type"
}

# ---- intel-2s22c-smt: 2 sockets x 22 cores x 2 threads; node0 = 0-21,44-65 ----
make_intel() {
    new_machine intel-2s22c-smt
    set_online 0-87
    set_nodes_online 0-1
    node 0 0-21,44-65 98304000 91234560 "10 21"
    node 1 22-43,66-87 98566144 93456128 "21 10"
    for c in $(range 0 87); do
        local core=$((c % 44)) socket=$(((c % 44) / 22))
        local l3="$((socket * 22))-$((socket * 22 + 21)),$((socket * 22 + 44))-$((socket * 22 + 65))"
        cache "$c" 2 2 Unified "$core" "$core,$((core + 44))"
        cache "$c" 3 3 Unified "$socket" "$l3"
    done
    echo "0-10,44-54;11-21,55-65;22-43,66-87" > "$machine/custom"
}

# ---- epyc-4n-2llc: 2 sockets, 4 nodes (NPS2), 2 CCX (L3) per node, 32 cores x 2 threads ----
make_epyc() {
    new_machine epyc-4n-2llc
    set_online 0-63
    set_nodes_online 0-3
    local rows=("10 12 32 32" "12 10 32 32" "32 32 10 12" "32 32 12 10")
    for n in 0 1 2 3; do
        node "$n" "$((n * 8))-$((n * 8 + 7)),$((n * 8 + 32))-$((n * 8 + 39))" 33554432 \
            $((30000000 + n * 111111)) "${rows[$n]}"
    done
    for c in $(range 0 63); do
        local core=$((c % 32)) ccx=$(((c % 32) / 4))
        local l3="$((ccx * 4))-$((ccx * 4 + 3)),$((ccx * 4 + 32))-$((ccx * 4 + 35))"
        cache "$c" 2 2 Unified "$core" "$core,$((core + 32))"
        cache "$c" 3 3 Unified "$ccx" "$l3"
    done
    echo "0-15,32-47;16-31,48-63" > "$machine/custom"
}

# ---- sparse-8n: node ids 0-6,8; node2 memoryless; node4 memory only (no CPU); node3 half
# offline; node5 all offline; CPU 28 online but in no node. The L3 is index4 (not index3) and
# has no id file, so the LLC id is the lowest CPU sharing it. ----
make_sparse() {
    new_machine sparse-8n
    set_online 0-13,20-28
    set_nodes_online 0-6,8
    local ids=(0 1 2 3 4 5 6 8)
    local cpus=(0-3 4-7 8-11 12-15 "" 16-19 20-23 24-27)
    local mem=(8388608 8388608 0 8388608 16777216 4194304 8388608 8388608)
    for i in $(range 0 7); do
        local row="" j
        for j in $(range 0 7); do
            local d
            if [ "$i" = "$j" ]; then d=10
            elif [ $((i / 2)) = $((j / 2)) ]; then d=12
            elif [ "$i" = 4 ] || [ "$j" = 4 ]; then d=30
            else d=20; fi
            row="$row${row:+ }$d"
        done
        local free=$((mem[i] / 2))
        node "${ids[$i]}" "${cpus[$i]}" "${mem[$i]}" "$free" "$row"
    done
    for c in $(range 0 13) $(range 20 28); do
        local first=$((c / 4 * 4))
        local l3="$first-$((first + 3))"
        [ "$c" = 28 ] && l3=28
        l1 "$c" 0 Data
        l1 "$c" 1 Instruction
        cache "$c" 2 2 Unified "$c" "$c"
        cache "$c" 3 1 Unified "$c" "$c"
        cache "$c" 4 3 Unified - "$l3"
    done
    echo "0-7;8-13;20-28" > "$machine/custom"
}

# ---- no-l3-4c: a small 4-CPU machine (e.g. an Arm board) with an L2 per pair and no L3 ----
make_no_l3() {
    new_machine no-l3-4c
    set_online 0-3
    set_nodes_online 0
    node 0 0-3 4194304 2097152 "10"
    for c in 0 1 2 3; do
        local pair=$((c / 2))
        l1 "$c" 0 Data
        l1 "$c" 1 Instruction
        cache "$c" 2 2 Unified "$pair" "$((pair * 2))-$((pair * 2 + 1))"
    done
    echo "0-1;2-3" > "$machine/custom"
}

# ---- this-host: this machine's real sysfs, the files softaff reads ----
capture_host() {
    new_machine this-host
    local real=/sys/devices/system
    cp "$real/cpu/online" "$sys/cpu/online"
    if [ -e "$real/node/online" ]; then
        cp "$real/node/online" "$sys/node/online"
        for d in "$real"/node/node[0-9]*; do
            local n
            n=$(basename "$d")
            mkdir -p "$sys/node/$n"
            cp "$d/cpulist" "$d/distance" "$d/meminfo" "$sys/node/$n/"
        done
    fi
    for d in "$real"/cpu/cpu[0-9]*/cache/index[0-9]*; do
        [ -e "$d" ] || continue
        local rel=${d#"$real"/}
        mkdir -p "$sys/$rel"
        for f in level type id shared_cpu_list; do
            [ -e "$d/$f" ] && cp "$d/$f" "$sys/$rel/$f"
        done
    done
    echo "0;1" > "$machine/custom"
    # and a real /proc/stat sample of it
    mkdir -p "$here/proc"
    cp /proc/stat "$here/proc/stat"
}

# ---- /proc samples ----
make_proc() {
    local p="$here/proc"
    mkdir -p "$p/256cpu"
    # 256 CPUs: two samples one second (100 ticks) apart; CPU c is c % 101 percent busy, with
    # guest time inside user for the odd CPUs, and CPU 255 vanishes in the second sample.
    awk 'BEGIN {
        for (s = 0; s < 2; s++) {
            file = s ? "'"$p"'/256cpu/stat.2" : "'"$p"'/256cpu/stat.1"
            printf "cpu  0 0 0 0 0 0 0 0 0 0\n" > file
            for (c = 0; c < 256; c++) {
                if (s == 1 && c == 255) continue
                busy = c % 101
                user = 1000 + c * 7 + s * int(busy * 6 / 10)
                sys = 500 + c * 3 + s * (busy - int(busy * 6 / 10))
                idle = 100000 + c + s * (100 - busy)
                guest = (c % 2) ? 900 + s * int(busy * 6 / 10) : 0
                printf "cpu%d %d 0 %d %d 0 0 0 0 %d 0\n", c, user, sys, idle, guest > file
            }
            printf "intr 12345 0 0\nctxt 987654\nbtime 1700000000\nprocesses 4242\nprocs_running 3\nprocs_blocked 0\n" > file
        }
    }'

    # A QEMU process 4242: the main (emulator) thread, the vCPU thread "CPU 0/KVM" and a thread
    # whose comm holds spaces and ')' ("a) b) c"). stat has the 52 fields of a 5.x/6.x kernel;
    # field 38 (exit_signal) is -1 for threads, field 39 (processor) is set per thread.
    local tail='1 4242 4242 0 -1 4194624 9133 0 3 0 1234 567 0 0 20 0 3 0 265391 3133440 410'
    tail="$tail 18446744073709551615 1 1 0 0 0 0 0 4096 134234626 0 0 0 -1"
    local t
    rm -rf "$p/4242"
    for t in 4242 4243 4244; do mkdir -p "$p/4242/task/$t"; done
    echo "4242 (qemu-system-x86) S $tail 1 0 0 0 0 0 0 0 0 0 0 0 0 0" > "$p/4242/task/4242/stat"
    echo "4243 (CPU 0/KVM) R $tail 3 0 0 0 0 0 0 0 0 0 0 0 0 0" > "$p/4242/task/4243/stat"
    echo "4244 (a) b) c) S $tail 7 0 0 0 0 0 0 0 0 0 0 0 0 0" > "$p/4242/task/4244/stat"
    echo "1200000000 34000000 5120" > "$p/4242/task/4242/schedstat"
    echo "987654321012 123456789 40212" > "$p/4242/task/4243/schedstat"
    echo "5 6 7" > "$p/4242/task/4244/schedstat"
    for t in 4242 4243 4244; do
        local allowed=0-7
        [ "$t" = 4243 ] && allowed=0-3,8
        printf 'Name:\tthread\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t%s\nCpus_allowed:\t1ff\nCpus_allowed_list:\t%s\nMems_allowed_list:\t0\n' \
            "$t" "$allowed" > "$p/4242/task/$t/status"
    done

    # An old kernel's /proc/stat: 7 columns (no steal, guest, guest_nice).
    cat > "$p/stat.old-kernel" <<'END'
cpu  1200 30 400 88000 50 5 7
cpu0 600 10 200 44000 20 2 3
cpu1 600 20 200 44000 30 3 4
intr 1000
ctxt 2000
btime 1100000000
processes 300
procs_running 1
procs_blocked 0
END
}

case "${1:-}" in
--capture-host) capture_host ;;
"") ;;
*) echo "usage: $0 [--capture-host]" >&2; exit 2 ;;
esac
make_intel
make_epyc
make_sparse
make_no_l3
make_proc
echo "fixtures written under $here"
