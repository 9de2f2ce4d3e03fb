#!/usr/bin/env bash
# A two-node SLURM cluster on this host, to run the study's SLURM profile and multi-node jobs for real
# (`make slurm-up`, `make test-slurm`, docs/cluster.md). Needs root; installs Debian's SLURM 22.05 and munge if missing.
#
#   tools/checks/slurm_local_cluster.sh up     # install if needed, write the config, start munged, slurmctld, 2 slurmd
#   tools/checks/slurm_local_cluster.sh down   # cancel every job, stop the daemons of the pid files, undo /etc entries
#
# Nodes n1 and n2 are two slurmd daemons with their own port and spool, both at 127.0.0.1, each with all of this
# host's CPUs and memory and 2 fake GPUs (links to /dev/null: GPU requests are scheduled and checked, but no GPU
# exists). All traffic stays on loopback.
#
# Everything lives in $RLSCALE_SLURM_DIR (default /tmp/rlscale-slurm): config, munge key and socket, spool, state,
# pid files and logs, kept after `down` until the next `up`. Outside it, `up` adds two marked entries that `down`
# removes:
# - /etc/slurm/slurm.conf, a link to the config (refused if that file exists already). Clients inside a job only
#   find the default path: the executor plugin's job step drops SLURM_CONF, with every SLURM_* variable, from the
#   environment of the command it runs (its srun, or a multi-node rule's shell).
# - an /etc/hosts line resolving n1 and n2 to 127.0.0.1, as DNS resolves node names on a real cluster (the study's
#   c10d rendezvous connects to the first node by name).
set -euo pipefail

STATE_DIR=${RLSCALE_SLURM_DIR:-/tmp/rlscale-slurm}
# Private ports, away from SLURM's defaults (6817, 6818): slurmctld, then one per slurmd.
CTLD_PORT=${RLSCALE_SLURM_PORT:-16817}
NODES=(n1 n2)
PARTITION=local
GPUS_PER_NODE=2
CONF=$STATE_DIR/etc/slurm.conf
SYSTEM_CONF=/etc/slurm/slurm.conf
MUNGE_SOCKET=$STATE_DIR/munge/munge.socket
HOSTS_MARK="# rlscale local SLURM cluster"
READY_TIMEOUT_S=60
STOP_TIMEOUT_S=30

log() { echo "[local-cluster] $*" >&2; }

install_packages() {
    local missing=() tool
    for tool in munged mungekey slurmctld slurmd sinfo; do
        command -v "$tool" >/dev/null || missing+=("$tool")
    done
    ((${#missing[@]} == 0)) && return
    log "installing slurmctld slurmd slurm-client munge (missing: ${missing[*]})"
    # Keep the packages from starting their services on the system config: this script runs its own daemons.
    local deny_services=/usr/sbin/policy-rc.d created_policy=false
    if [[ ! -e $deny_services ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$deny_services"
        chmod +x "$deny_services"
        created_policy=true
    fi
    local status=0
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            slurmctld slurmd slurm-client munge >/dev/null || status=$?
    if $created_policy; then
        rm -f "$deny_services"
    fi
    return "$status"
}

write_slurm_conf() {
    local cpus mem_mb nodes_csv index
    # nproc alone honours OMP_NUM_THREADS, which the Makefile sets to 1.
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    # Below the total: slurmd drains a node whose RealMemory exceeds the memory it finds.
    mem_mb=$(free -m | awk '/^Mem:/ {print int($2 * 0.9)}')
    nodes_csv=$(IFS=,; echo "${NODES[*]}")
    cat >"$CONF" <<EOF
# Written by tools/checks/slurm_local_cluster.sh up.
ClusterName=rlscale-local
# slurmctld starts only on the host that SlurmctldHost names.
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$STATE_DIR/ctld
SlurmctldPidFile=$STATE_DIR/run/slurmctld.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdSpoolDir=$STATE_DIR/spool/%n
SlurmdPidFile=$STATE_DIR/run/slurmd-%n.pid
SlurmdLogFile=$STATE_DIR/log/slurmd-%n.log
# No usable cgroups in a container: tracking by parent pid still finds every descendant of a job, the launchers'
# own sessions (setsid) included, so scancel and time limits reach the ranks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# No accounting database, hence no sacct: the executor plugin polls squeue, and each finished job is one line of
# the job-completion log (id, state, nodes, CPUs, memory).
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE_DIR/log/jobcomp.log
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# The node lines, not slurmd's detection, define the nodes: two of them share this host's hardware.
SlurmdParameters=config_overrides
ReturnToService=2
# Finished jobs stay visible to squeue this long (the plugin's status checks need them).
MinJobAge=300
# Seconds from the SIGTERM of scancel or a time limit to the SIGKILL.
KillWait=10
GresTypes=gpu
PartitionName=$PARTITION Nodes=$nodes_csv Default=YES MaxTime=INFINITE State=UP
EOF
    for index in "${!NODES[@]}"; do
        echo "NodeName=${NODES[$index]} NodeAddr=127.0.0.1 Port=$((CTLD_PORT + 1 + index)) CPUs=$cpus" \
            "RealMemory=$mem_mb Gres=gpu:$GPUS_PER_NODE State=UNKNOWN" >>"$CONF"
    done
    # slurmd drops GPUs without device files, so each fake GPU is a link to /dev/null (a character device). Jobs
    # that ask for GPUs get CUDA_VISIBLE_DEVICES as on a real node; task/none enforces no device access.
    local gpu
    for ((gpu = 0; gpu < GPUS_PER_NODE; gpu++)); do
        ln -sfn /dev/null "$STATE_DIR/fake-gpus/gpu$gpu"
    done
    echo "NodeName=$nodes_csv Name=gpu File=$STATE_DIR/fake-gpus/gpu[0-$((GPUS_PER_NODE - 1))]" \
        >"$STATE_DIR/etc/gres.conf"
}

link_system_entries() {
    if [[ -e $SYSTEM_CONF && $(readlink "$SYSTEM_CONF") != "$CONF" ]]; then
        log "ERROR: $SYSTEM_CONF exists (a SLURM installation of its own); not replacing it"
        exit 1
    fi
    mkdir -p "$(dirname "$SYSTEM_CONF")"
    ln -sfn "$CONF" "$SYSTEM_CONF"
    grep -q "$HOSTS_MARK" /etc/hosts || echo "127.0.0.1 ${NODES[*]} $HOSTS_MARK" >>/etc/hosts
}

unlink_system_entries() {
    [[ $(readlink "$SYSTEM_CONF" 2>/dev/null) == "$CONF" ]] && rm -f "$SYSTEM_CONF"
    if grep -q "$HOSTS_MARK" /etc/hosts; then
        # /etc/hosts may be a bind mount (containers): rewrite it in place rather than replace the file.
        grep -v "$HOSTS_MARK" /etc/hosts >"$STATE_DIR/hosts.without-cluster"
        cat "$STATE_DIR/hosts.without-cluster" >/etc/hosts
    fi
}

# Print the pid of a pid file if that process is alive; fail otherwise.
live_pid() {
    local pid
    [[ -s $1 ]] || return 1
    pid=$(<"$1")
    kill -0 "$pid" 2>/dev/null && echo "$pid"
}

start_daemons() {
    local node
    live_pid "$STATE_DIR/run/munged.pid" >/dev/null ||
        munged --force --key-file="$STATE_DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
            --pid-file="$STATE_DIR/run/munged.pid" --log-file="$STATE_DIR/log/munged.log" \
            --seed-file="$STATE_DIR/munge/munged.seed"
    # -c: a clean start, without the jobs and node states of an earlier run.
    live_pid "$STATE_DIR/run/slurmctld.pid" >/dev/null || slurmctld -c -f "$CONF"
    for node in "${NODES[@]}"; do
        live_pid "$STATE_DIR/run/slurmd-$node.pid" >/dev/null || slurmd -f "$CONF" -N "$node"
    done
}

wait_until_idle() {
    local deadline=$((SECONDS + READY_TIMEOUT_S)) states=""
    while ((SECONDS < deadline)); do
        states=$(sinfo --noheader --Node --format='%N %t' 2>/dev/null || true)
        if (($(grep -c ' idle$' <<<"$states") == ${#NODES[@]})); then
            log "up: ${NODES[*]} idle, partition $PARTITION (config and logs: $STATE_DIR)"
            return 0
        fi
        sleep 1
    done
    log "ERROR: nodes not idle after ${READY_TIMEOUT_S}s: ${states:-no answer from slurmctld}; see $STATE_DIR/log"
    return 1
}

# Stop the daemon of a pid file: SIGTERM, then SIGKILL if it is still there after STOP_TIMEOUT_S.
stop_daemon() {
    local pid_file=$1 pid deadline=$((SECONDS + STOP_TIMEOUT_S))
    if pid=$(live_pid "$pid_file"); then
        kill -TERM "$pid"
        while kill -0 "$pid" 2>/dev/null; do
            if ((SECONDS >= deadline)); then
                log "$(basename "$pid_file" .pid) ($pid) still running ${STOP_TIMEOUT_S}s after SIGTERM; killing it"
                kill -KILL "$pid" 2>/dev/null || true
                deadline=$((SECONDS + STOP_TIMEOUT_S))
            fi
            sleep 0.2
        done
    fi
    rm -f "$pid_file"
}

# Cancel every job and wait until their steps, and so their processes, have ended: slurmd must outlive them.
cancel_jobs() {
    local deadline=$((SECONDS + STOP_TIMEOUT_S))
    live_pid "$STATE_DIR/run/slurmctld.pid" >/dev/null || return 0
    scancel --partition="$PARTITION" 2>/dev/null || true
    while [[ -n $(squeue --noheader --states=PENDING,RUNNING,COMPLETING --format=%i 2>/dev/null) ]]; do
        if ((SECONDS >= deadline)); then
            log "WARNING: jobs still ending after ${STOP_TIMEOUT_S}s: $(squeue --noheader --format='%i %T %N')"
            return 0
        fi
        sleep 0.5
    done
}

up() {
    ((EUID == 0)) || { log "ERROR: run as root (the daemons run as root here)"; exit 1; }
    install_packages
    if live_pid "$STATE_DIR/run/slurmctld.pid" >/dev/null; then
        log "already running"
    else
        down 2>/dev/null  # daemons left from a half-started cluster
        rm -rf "${STATE_DIR:?}"/{etc,ctld,log,run,spool}
        mkdir -p "$STATE_DIR"/{etc,munge,ctld,log,run,fake-gpus} "${NODES[@]/#/$STATE_DIR/spool/}"
        [[ -s $STATE_DIR/munge/munge.key ]] || mungekey --create --keyfile="$STATE_DIR/munge/munge.key"
        write_slurm_conf
    fi
    link_system_entries
    start_daemons
    wait_until_idle
}

down() {
    local node
    cancel_jobs
    for node in "${NODES[@]}"; do
        stop_daemon "$STATE_DIR/run/slurmd-$node.pid"
    done
    stop_daemon "$STATE_DIR/run/slurmctld.pid"
    stop_daemon "$STATE_DIR/run/munged.pid"
    unlink_system_entries
    log "down (logs kept in $STATE_DIR/log until the next up)"
}

case ${1:-} in
    up) up ;;
    down) down ;;
    *)
        echo "usage: $0 up|down" >&2
        exit 2
        ;;
esac
