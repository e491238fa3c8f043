#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, from Debian 12's packages, without systemd: for the
# Slurm end-to-end test (Tests/EndToEndTests/SlurmTests.swift) and for trying
# docs/deploy/slurm/pushcast.sbatch by hand.
#
#   scripts/slurm-local.sh up       start munged, slurmctld and slurmd; wait until the node is idle
#   scripts/slurm-local.sh down     stop them (jobs included) and remove the state directory
#   scripts/slurm-local.sh status   say what runs; exit 0 when the node answers, 1 otherwise
#   scripts/slurm-local.sh env      print the `export SLURM_CONF=...` line the Slurm commands need
#
# The three daemons run in the foreground (-F / -D) as children of this script's background jobs,
# their pids in $SLURM_LOCAL_DIR/pids, logs in $SLURM_LOCAL_DIR/log. Everything lives in that
# directory (default /tmp/pushcast-slurm): munge key and socket, slurm.conf, controller state, the
# slurmd spool. Nothing is written under /etc; the Slurm commands find the configuration through
# SLURM_CONF (`eval "$(scripts/slurm-local.sh env)"`). Both `up` and `down` are idempotent.
#
# As root, `up` installs the missing packages (munge slurmctld slurmd slurm-client) first.
#
# Environment: SLURM_LOCAL_DIR (state directory), SLURM_LOCAL_CTLD_PORT (default 6817),
# SLURM_LOCAL_D_PORT (default 6818), SLURM_LOCAL_TIMEOUT (seconds `up` waits, default 60).
set -euo pipefail

state=${SLURM_LOCAL_DIR:-/tmp/pushcast-slurm}
ctld_port=${SLURM_LOCAL_CTLD_PORT:-6817}
d_port=${SLURM_LOCAL_D_PORT:-6818}
timeout=${SLURM_LOCAL_TIMEOUT:-60}
conf=$state/slurm.conf
node=$(hostname -s)
cluster=pushcast-local
# Marks the daemons (and the slurmstepd processes they start) for `down`.
export SLURM_LOCAL_MARK=$state
packages=(munge slurmctld slurmd slurm-client)

say() { echo "slurm-local: $*" >&2; }

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

install_packages() {
    local missing=()
    for package in "${packages[@]}"; do is_installed "$package" || missing+=("$package"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        say "missing Debian packages: ${missing[*]}; install them with:"
        say "    sudo apt-get install -y --no-install-recommends ${missing[*]}"
        exit 1
    fi
    say "installing ${missing[*]}"
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" </dev/null >&2
}

# The pid recorded for a daemon, when that process is still alive.
live_pid() {
    local file=$state/pids/$1
    [ -f "$file" ] || return 1
    local pid
    pid=$(cat "$file")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# The node's state as sinfo prints it (idle, mix, alloc, down*, drain, ...), empty when the
# controller does not answer.
node_state() {
    { SLURM_CONF=$conf timeout 5 sinfo --noheader --nodes="$node" --format=%t 2>/dev/null || true; } | head -n 1 | tr -d ' *'
}

port_in_use() {
    # /proc/net/tcp{,6} lists listening sockets (state 0A) with the port in hex.
    local hex
    hex=$(printf '%04X' "$1")
    awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

write_config() {
    local layout memory
    # slurmd -C prints this machine's real layout; the node line must not claim more than it has.
    layout=$( (slurmd -C 2>/dev/null || true) | head -n 1 | grep -oE '(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' | tr '\n' ' ')
    memory=$( (slurmd -C 2>/dev/null || true) | head -n 1 | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
    [ -n "$layout" ] || layout="CPUs=$(nproc)"
    [ -n "$memory" ] || memory=$(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo)
    cat >"$conf" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster for tests. Not for production.
ClusterName=$cluster
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket.2
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups here (no systemd, maybe a container): track processes by their parent pids.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
# Whole-node allocation, but memory is the only consumable: jobs share the CPUs, so the four
# tasks of an array run at once on a 2-core machine (select/linear allows CR_Memory alone).
SelectType=select/linear
SelectTypeParameters=CR_Memory
DefMemPerNode=256
MailProg=/bin/true
# A node that registers with a valid configuration is usable again at once.
ReturnToService=2
# SIGTERM, then this many seconds before SIGKILL (scancel, time limit): longer than --drain-timeout.
KillWait=30
# Finished jobs stay visible to squeue/scontrol this long.
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=$node NodeAddr=127.0.0.1 ${layout}RealMemory=$memory State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:16
EOF
}

start_daemon() {
    local name=$1
    shift
    # The daemon runs in the foreground as this background job's process: its pid is $!. It keeps
    # none of this script's descriptors but 0-2: a caller that waits for the last holder of a pipe
    # or socket it gave us (Foundation's Process does) would otherwise wait as long as the daemon runs.
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        exec "$@"
    ) >>"$state/log/$name.out" 2>&1 </dev/null &
    echo $! >"$state/pids/$name"
}

diagnose() {
    say "$1"
    for name in munged slurmctld slurmd; do
        if live_pid "$name" >/dev/null; then say "  $name: running (pid $(live_pid "$name"))"; else say "  $name: not running"; fi
    done
    SLURM_CONF=$conf timeout 5 scontrol show node "$node" 2>&1 | grep -E "State=|Reason=" | sed 's/^/slurm-local:   /' >&2 || true
    for log in munged.log munged.out slurmctld.log slurmctld.out slurmd.log slurmd.out; do
        [ -s "$state/log/$log" ] || continue
        say "--- last lines of $state/log/$log"
        tail -n 15 "$state/log/$log" | sed 's/^/    /' >&2
    done
}

up() {
    if [ "$(id -u)" -ne 0 ]; then
        say "up needs root (the daemons run as SlurmUser=root and munged needs /run-like directories it owns)"
        exit 1
    fi
    install_packages
    if live_pid slurmctld >/dev/null && live_pid slurmd >/dev/null && live_pid munged >/dev/null; then
        case "$(node_state)" in
            idle* | mix* | alloc*)
                say "already up: node $node is $(node_state)"
                return 0
                ;;
        esac
        say "daemons running but node $node is '$(node_state)': restarting"
    fi
    down quiet
    for port in "$ctld_port" "$d_port"; do
        if port_in_use "$port"; then
            say "port $port is already in use (another Slurm?); set SLURM_LOCAL_CTLD_PORT / SLURM_LOCAL_D_PORT"
            exit 1
        fi
    done
    mkdir -p "$state"/{munge,ctld,spool,run,log,pids}
    chmod 0755 "$state"
    # munged checks that its key is private and its socket directory not writable by others.
    chmod 0755 "$state/munge"
    if [ ! -s "$state/munge/munge.key" ]; then
        dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
    fi
    chmod 0600 "$state/munge/munge.key"
    write_config

    start_daemon munged munged --foreground --force --socket="$state/munge/munge.socket.2" \
        --key-file="$state/munge/munge.key" --log-file="$state/log/munged.log" \
        --pid-file="$state/run/munged.pid" --seed-file="$state/munge/munged.seed"
    local deadline=$((SECONDS + timeout))
    until [ -S "$state/munge/munge.socket.2" ]; do
        if ! live_pid munged >/dev/null || [ $SECONDS -ge $deadline ]; then
            diagnose "munged did not start"
            down quiet
            exit 1
        fi
        sleep 0.1
    done
    if ! munge --socket="$state/munge/munge.socket.2" -n </dev/null | unmunge --socket="$state/munge/munge.socket.2" >/dev/null 2>&1; then
        diagnose "munged runs but a credential does not round-trip (munge -n | unmunge)"
        down quiet
        exit 1
    fi

    # -i: start with a clean slate, ignoring saved state.
    start_daemon slurmctld slurmctld -D -i -f "$conf"
    start_daemon slurmd slurmd -D -f "$conf" -N "$node"

    local state_now=""
    while :; do
        state_now=$(node_state)
        case "$state_now" in
            idle*)
                say "up: node $node idle ($(nproc) CPUs); export SLURM_CONF=$conf"
                return 0
                ;;
        esac
        for name in slurmctld slurmd; do
            if ! live_pid "$name" >/dev/null; then
                diagnose "$name exited during start-up"
                down quiet
                exit 1
            fi
        done
        if [ $SECONDS -ge $deadline ]; then
            diagnose "node $node not idle after ${timeout}s (state: '${state_now:-no answer from slurmctld}')"
            down quiet
            exit 1
        fi
        sleep 0.2
    done
}

stop_daemon() {
    local name=$1 pid
    pid=$(live_pid "$name") || { rm -f "$state/pids/$name"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "$name (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$state/pids/$name"
}

# Processes left over from this cluster: slurmstepd (which outlives slurmd by design) carries the
# daemons' environment, so SLURM_LOCAL_MARK; a job's own processes carry SLURM_CLUSTER_NAME.
leftovers() {
    local environ
    for environ in /proc/[0-9]*/environ; do
        { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -qxF -e "SLURM_LOCAL_MARK=$state" -e "SLURM_CLUSTER_NAME=$cluster" || continue
        environ=${environ#/proc/}
        [ "${environ%/environ}" != "$$" ] && echo "${environ%/environ}"
    done
}

down() {
    local quiet=${1:-}
    if [ -f "$conf" ] && live_pid slurmctld >/dev/null; then
        # Cancel every job so that their processes end with them.
        SLURM_CONF=$conf timeout 10 scancel --quiet --partition=local 2>/dev/null || true
        for _ in $(seq 50); do
            [ -z "$(SLURM_CONF=$conf timeout 5 squeue --noheader --states=RUNNING,COMPLETING 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    stop_daemon slurmd
    stop_daemon slurmctld
    local pid
    for pid in $(leftovers); do
        kill -KILL "$pid" 2>/dev/null || true
    done
    stop_daemon munged
    if [ -d "$state" ]; then
        rm -rf "$state"
    fi
    [ -n "$quiet" ] || say "down"
}

status() {
    local rc=0
    for name in munged slurmctld slurmd; do
        if live_pid "$name" >/dev/null; then echo "$name: running (pid $(live_pid "$name"))"; else echo "$name: not running"; rc=1; fi
    done
    if [ -f "$conf" ]; then
        echo "node $node: $(node_state || true)"
        echo "export SLURM_CONF=$conf"
        [ -n "$(node_state)" ] || rc=1
    fi
    return $rc
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    env) echo "export SLURM_CONF=$conf" ;;
    *)
        echo "usage: $0 up|down|status|env" >&2
        exit 2
        ;;
esac
