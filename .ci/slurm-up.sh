#!/usr/bin/env bash
# A single-node Slurm cluster without systemd (Debian slurm-wlm + munge), for the tests
# that submit real job arrays. Idempotent; prints "slurm: idle" when the node is ready.
# Recipe from ../shared/specs/distributed.md §4.1.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! command -v slurmctld >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null
fi
if ! sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
  [ -s /etc/munge/munge.key ] || { mungekey --create --force; chown munge:munge /etc/munge/munge.key; }
  install -d -o munge -g munge -m 0755 /run/munge
  pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
  munge -n | unmunge >/dev/null
  install -d /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
  NODE=$(hostname -s)
  cat >/etc/slurm/slurm.conf <<CONF
ClusterName=evalgrid-ci
SlurmctldHost=$NODE
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MaxArraySize=1001
MinJobAge=600
GresTypes=gpu
NodeName=$NODE CPUs=$(nproc) RealMemory=2000 Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
  echo "NodeName=$NODE Name=gpu File=/dev/null" >/etc/slurm/gres.conf
  pgrep -x slurmctld >/dev/null || slurmctld -i
  pgrep -x slurmd >/dev/null || slurmd
  for _ in $(seq 1 150); do sinfo -h -o '%T' 2>/dev/null | grep -qx idle && break; sleep 0.2; done
fi
echo "slurm: $(sinfo -h -o '%T' | head -1)"
