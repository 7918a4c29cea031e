#!/usr/bin/env bash
# A real two-node Slurm on this machine for module 11 (HyperPod's Slurm, in miniature): slurmctld, munge, and two
# slurmd daemons on one host, each standing for one node (node-1 and node-2, each with this machine's CPUs), one
# partition, requeue allowed.
#
#   bash requirements/slurm.sh              # install (root with apt) if missing, configure, start; idempotent
#   bash requirements/slurm.sh --no-install # only configure and start what is installed (the notebook's call)
#
# Called by `make test` and `make course` (so by .ci/run) before the tests; never fails them: where Slurm cannot be
# had (not root, no apt-get, macOS) it says why on one line and exits 0, and module 11 runs everything else.
# Exit 0 also when it worked: `sinfo` then shows both nodes idle. What it does is what was tried by hand on a
# Debian 12 machine with slurm-wlm 22.05.8 (apt-get install slurm-wlm munge; a munge key; a slurm.conf with
# JobRequeue=1; the daemons). Two nodes on one host: each slurmd runs as `slurmd -N node-K` with its own port, spool
# folder and log (slurm.conf's NodeHostname, Port and %n), and /etc/hosts gets one line so that the node names
# resolve (torchrun's rendezvous runs on the first node, by name). Every wait is bounded. A second call with
# everything up does nothing; a machine set up earlier with one node is moved to two (its old jobs are dropped).
set -uo pipefail

INSTALL=1
[ "${1:-}" = "--no-install" ] && INSTALL=0
say() { echo "slurm set-up: $*"; }

if [ "$(uname -s)" != "Linux" ]; then say "not available on $(uname -s) (Slurm daemons need Linux); module 11 runs without it"; exit 0; fi

NODES=(node-1 node-2)
# both nodes take jobs (and the configuration is the two-node one: an older one-node set-up is moved on below)
up() { [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -cE '^node-[12] (idle|mixed|allocated|completing)')" = 2 ]; }
running() { say "running ($(sinfo -h -o '%P %D %T %N' | head -1))"; }
if command -v sinfo >/dev/null 2>&1 && up; then running; exit 0; fi

if [ "$(id -u)" != "0" ]; then say "not available: starting slurmctld/slurmd needs root (run this script as root, or sudo)"; exit 0; fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  if [ "$INSTALL" = 0 ]; then say "not installed (run: sudo bash requirements/slurm.sh)"; exit 0; fi
  if ! command -v apt-get >/dev/null 2>&1; then say "not available: no apt-get to install slurm-wlm and munge"; exit 0; fi
  say "installing slurm-wlm and munge with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  if ! timeout 600 apt-get install -y -q slurm-wlm munge >/tmp/fmlab-slurm-apt.log 2>&1; then
    timeout 300 apt-get update -q >>/tmp/fmlab-slurm-apt.log 2>&1
    if ! timeout 600 apt-get install -y -q slurm-wlm munge >>/tmp/fmlab-slurm-apt.log 2>&1; then
      say "not available: apt-get install slurm-wlm munge failed (see /tmp/fmlab-slurm-apt.log)"; exit 0
    fi
  fi
fi

CONF_DIR=/etc/slurm
[ -d /etc/slurm-llnl ] && [ ! -d /etc/slurm ] && CONF_DIR=/etc/slurm-llnl
mkdir -p "$CONF_DIR" /var/spool/slurmctld /var/spool/slurmd/node-1 /var/spool/slurmd/node-2 /run/munge /var/log/slurm
if [ ! -f /etc/munge/munge.key ]; then
  if command -v mungekey >/dev/null 2>&1; then mungekey -c >/dev/null 2>&1
  else dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; fi
fi
chown munge:munge /etc/munge/munge.key /run/munge 2>/dev/null
chmod 400 /etc/munge/munge.key

HOST="$(hostname -s)"
CPUS="$(nproc)"
MEMORY_MB="$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)"
CONF="$(cat <<CONF
# written by fmlab's requirements/slurm.sh: two nodes on one host, one partition (module 11)
ClusterName=fmlab
SlurmctldHost=$HOST
SlurmUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
KillOnBadExit=1
MinJobAge=600
NodeName=node-1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001 CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN
NodeName=node-2 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17002 CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN
PartitionName=debug Nodes=node-[1-2] Default=YES MaxTime=INFINITE State=UP
CONF
)"
if [ -f "$CONF_DIR/slurm.conf" ] && ! grep -q "written by fmlab" "$CONF_DIR/slurm.conf"; then
  say "not touched: $CONF_DIR/slurm.conf exists and is not fmlab's; start your Slurm yourself"; exit 0
fi
FRESH=""
if [ "$(cat "$CONF_DIR/slurm.conf" 2>/dev/null)" != "$CONF" ]; then
  echo "$CONF" > "$CONF_DIR/slurm.conf"
  # daemons started with another configuration (the one-node set-up of earlier versions) stop; the controller
  # starts clean (-c: the old node and its jobs are forgotten)
  pkill -x slurmctld; pkill -x slurmd; sleep 1; FRESH="-c"
fi
if ! getent hosts node-1 >/dev/null || ! getent hosts node-2 >/dev/null; then
  echo "127.0.0.1 node-1 node-2  # fmlab's requirements/slurm.sh: the two Slurm nodes of module 11" >> /etc/hosts
fi

pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged || /usr/sbin/munged -f
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld $FRESH
for node in "${NODES[@]}"; do pgrep -f "slurmd -N $node\$" >/dev/null || /usr/sbin/slurmd -N "$node"; done

for _ in $(seq 1 30); do
  if up; then running; exit 0; fi
  # a node left DOWN or DRAINED by an earlier run comes back (ReturnToService=2 does this too, eventually)
  for node in "${NODES[@]}"; do scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1; done
  sleep 1
done
say "started, but the nodes are not both idle after 30 s: $(sinfo -h -N -o '%N %T %E' 2>&1 | tr '\n' ' '); see /var/log/slurm/"
exit 0
