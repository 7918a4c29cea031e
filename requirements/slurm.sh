#!/usr/bin/env bash
# A real single-node Slurm on this machine for module 11 (HyperPod's Slurm, in miniature): slurmctld + slurmd +
# munge, one node, one partition, requeue allowed.
#
#   bash requirements/slurm.sh              # install (root with apt) if missing, configure, start; idempotent
#   bash requirements/slurm.sh --no-install # only configure and start what is installed (the notebook's call)
#
# Called by `make test` and `make course` (so by .ci/run) before the tests; never fails them: where Slurm cannot be
# had (not root, no apt-get, macOS) it says why on one line and exits 0, and module 11 runs everything else.
# Exit 0 also when it worked: `sinfo` then shows the node idle. What it does is what was tried by hand on a
# Debian 12 machine with slurm-wlm 22.05.8 (apt-get install slurm-wlm munge; a munge key; a slurm.conf with
# JobRequeue=1; the three daemons). Every wait is bounded. A second call with everything up does nothing.
set -uo pipefail

INSTALL=1
[ "${1:-}" = "--no-install" ] && INSTALL=0
say() { echo "slurm set-up: $*"; }

if [ "$(uname -s)" != "Linux" ]; then say "not available on $(uname -s) (Slurm daemons need Linux); module 11 runs without it"; exit 0; fi

up() { sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; }
if command -v sinfo >/dev/null 2>&1 && up; then say "running ($(sinfo -h -o '%P %D %T' | head -1))"; exit 0; fi

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
mkdir -p "$CONF_DIR" /var/spool/slurmctld /var/spool/slurmd /run/munge /var/log/slurm
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
# written by fmlab's requirements/slurm.sh: one node, one partition (module 11)
ClusterName=fmlab
SlurmctldHost=$HOST
SlurmUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
MinJobAge=600
NodeName=$HOST CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
)"
if [ -f "$CONF_DIR/slurm.conf" ] && ! grep -q "written by fmlab" "$CONF_DIR/slurm.conf"; then
  say "not touched: $CONF_DIR/slurm.conf exists and is not fmlab's; start your Slurm yourself"; exit 0
fi
if [ "$(cat "$CONF_DIR/slurm.conf" 2>/dev/null)" != "$CONF" ]; then echo "$CONF" > "$CONF_DIR/slurm.conf"; fi

pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged || /usr/sbin/munged -f
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd

for _ in $(seq 1 30); do
  if up; then say "running ($(sinfo -h -o '%P %D %T' | head -1))"; exit 0; fi
  # a node left DOWN or DRAINED by an earlier run comes back (ReturnToService=2 does this too, eventually)
  scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1
  sleep 1
done
say "started, but the node is not idle after 30 s: $(sinfo -h -o '%T %E' 2>&1 | head -1); see /var/log/slurm/"
exit 0
