#!/usr/bin/env bash
# A throw-away single-node Slurm on Debian (slurm-wlm + munge), to try the sharded runs of
# deploy/slurm/ on one machine. Not for production: no accounting, no cgroups, root only.
#
#   deploy/slurm/single-node.sh install   apt-get install slurm-wlm munge (needs root)
#   deploy/slurm/single-node.sh start     write a one-node slurm.conf, start munged, slurmctld, slurmd
#   deploy/slurm/single-node.sh status    sinfo and squeue
#   deploy/slurm/single-node.sh stop      stop slurmd, slurmctld and munged
#
# The node is this machine (its short host name), with all its CPUs and memory, in one partition
# named `debug`. The daemons run without systemd, so this also works in a container.
set -euo pipefail

CONF_DIR=/etc/slurm
STATE=/var/spool/slurmctld
SPOOL=/var/spool/slurmd
LOGS=/var/log/slurm
RUN=/run/slurm

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "single-node.sh: run as root (it writes $CONF_DIR and starts daemons)" >&2
        exit 1
    fi
}

install() {
    need_root
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge
}

write_conf() {
    local host cpus mem
    host=$(hostname -s)
    cpus=$(nproc --all)
    # Leave 5% of the memory to the system, as slurmd refuses a node that claims more than it has.
    mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.95}' /proc/meminfo)
    mkdir -p "$CONF_DIR" "$STATE" "$SPOOL" "$LOGS" "$RUN"
    if [ -f "$CONF_DIR/slurm.conf" ] && ! grep -q '^# written by single-node.sh' "$CONF_DIR/slurm.conf"; then
        cp "$CONF_DIR/slurm.conf" "$CONF_DIR/slurm.conf.before-single-node"
        echo "kept the previous configuration as $CONF_DIR/slurm.conf.before-single-node"
    fi
    cat >"$CONF_DIR/slurm.conf" <<EOF
# written by single-node.sh: one node, one partition, no accounting
ClusterName=single
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    echo "wrote $CONF_DIR/slurm.conf (node $host, $cpus CPUs, $mem MB)"
}

start() {
    need_root
    command -v slurmctld >/dev/null || { echo "slurmctld not found: run '$0 install' first" >&2; exit 1; }
    write_conf
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile=/etc/munge/munge.key
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    mkdir -p /run/munge && chown munge:munge /run/munge
    if ! pgrep -x munged >/dev/null; then
        runuser -u munge -- /usr/sbin/munged
    fi
    munge -n | unmunge >/dev/null
    echo "munge works"
    pgrep -x slurmctld >/dev/null || slurmctld
    pgrep -x slurmd >/dev/null || slurmd
    # Wait for the node to register and come up idle.
    local i
    for i in $(seq 1 30); do
        if sinfo -h -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; then
            sinfo
            return 0
        fi
        sleep 1
    done
    echo "the node did not come up within 30 s; see $LOGS/" >&2
    sinfo || true
    exit 1
}

status() {
    sinfo
    squeue
}

stop() {
    need_root
    local pidfile
    # Stop only the daemons this script started (by their pid files), never by name.
    for pidfile in "$RUN/slurmd.pid" "$RUN/slurmctld.pid" /run/munge/munged.pid; do
        local pid
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill "$pid"
            echo "stopped $(basename "$pidfile" .pid) ($pid)"
        fi
    done
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    status) status ;;
    stop) stop ;;
    *)
        sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
