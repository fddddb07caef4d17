#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for tests/test_slurm.py (as root; Debian's
# slurmctld, slurmd, slurm-client, munge, slurmdbd and mariadb-server, installed by
# ./setup.sh --test; no systemd).
#
#   tests/slurm/localhost.sh start    write slurm.conf, start munged, MariaDB and slurmdbd (the
#                                     accounting database: sacct), slurmctld, slurmd
#   tests/slurm/localhost.sh stop     stop them by PID, newest first, wait for each, and
#                                     remove the config files that start wrote
#   tests/slurm/localhost.sh pids     the daemons' PIDs, one per line
#
# A slurm.conf or gres.conf that this script did not write (a real site's) is never touched:
# start refuses. Ours is removed on stop because a slurm.conf naming a controller that is
# down makes every `snakemake` command wait about 9 s: the SLURM executor plugin runs
# `scontrol show config` when it is imported, and scontrol retries the controller.
#
# The node advertises two GPUs for scheduling only (gres gpu:fake:1 backed by /dev/null and
# gpu:fake-sxm4_1g:1 by /dev/zero, a type name with a hyphen): they prove that a job asks for a
# GPU and is scheduled with one, not that CUDA works. It is in
# two partitions, as a site's CPU and GPU nodes would be: `cpu` (the default) and `gpu`; its
# feature `adbench` lets a job's --constraint be checked.
#
# As a site's: accounting (slurmdbd on MariaDB, so `sacct` shows a job's state, exit code and
# largest resident memory after squeue forgot it), and memory enforcement without cgroups
# (which a container without systemd may not delegate): jobacct_gather/linux samples each
# step's memory every second and OverMemoryKill kills a step above its job's --mem, which
# SLURM records OUT_OF_MEMORY.
set -euo pipefail
PIDFILES="/run/slurmd.pid /run/slurmctld.pid /run/slurmdbd.pid /run/mysqld/mysqld.pid
  /run/munge/munged.pid"
CONFIGS="/etc/slurm/slurm.conf /etc/slurm/gres.conf /etc/slurm/slurmdbd.conf"
MARK="# written by tests/slurm/localhost.sh: removed by its stop"
# The second GPU's type: a hyphen, as the names sites' autodetection gives (nvidia_a100-sxm4-80gb)
HYPHENATED="fake-sxm4_1g"
say() { printf '[slurm-localhost] %s\n' "$*" >&2; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_config() {
  local host hardware memory node_hardware
  host=$(hostname -s)
  hardware=$(slurmd -C | head -n 1)  # "NodeName=... CPUs=... ... RealMemory=..."
  memory=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hardware")
  node_hardware=$(sed -e 's/^NodeName=[^ ]* //' -e 's/ *RealMemory=[0-9]*//' <<<"$hardware")
  {
    printf '%s\nNodeName=%s Name=gpu Type=fake File=/dev/null\n' "$MARK" "$host"
    printf 'NodeName=%s Name=gpu Type=%s File=/dev/zero\n' "$host" "$HYPHENATED"
  } > /etc/slurm/gres.conf
  # The tests read finished jobs' requests with scontrol, which keeps a job MinJobAge seconds
  # after it ends, and their states and memory with sacct. 95% of the memory slurmd
  # measures, so the node is never drained for reporting less than configured.
  cat > /etc/slurm/slurm.conf <<EOF
${MARK}
ClusterName=adbench-test
SlurmctldHost=${host}(127.0.0.1)
AuthType=auth/munge
SlurmUser=slurm
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=500
ReturnToService=2
MinJobAge=600
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
GresTypes=gpu
NodeName=${host} NodeAddr=127.0.0.1 ${node_hardware} RealMemory=$(( memory * 95 / 100 )) Gres=gpu:fake:1,gpu:${HYPHENATED}:1 Features=adbench State=UNKNOWN
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP
EOF
  cat > /etc/slurm/slurmdbd.conf <<EOF
${MARK}
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=adbench-test
StorageLoc=adbench_test_acct
EOF
  chown slurm:slurm /etc/slurm/slurmdbd.conf && chmod 0600 /etc/slurm/slurmdbd.conf
}

# MariaDB (Debian's datadir, /var/lib/mysql) with the accounting database and its user, then
# slurmdbd, and the test cluster, its account and root registered (sacctmgr).
start_accounting() {
  install -d -o mysql -g root -m 0755 /run/mysqld
  if ! alive /run/mysqld/mysqld.pid; then
    setsid /usr/sbin/mariadbd --user=mysql --pid-file=/run/mysqld/mysqld.pid \
      >/var/log/slurm/mariadbd.log 2>&1 < /dev/null &
  fi
  wait_for "MariaDB" "mariadb-admin ping >/dev/null 2>&1"
  mariadb -e "CREATE DATABASE IF NOT EXISTS adbench_test_acct;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'adbench-test';
    GRANT ALL ON adbench_test_acct.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  alive /run/slurmdbd.pid || /usr/sbin/slurmdbd
  wait_for "slurmdbd" "sacctmgr -n list cluster >/dev/null 2>&1"
  sacctmgr -n list cluster format=cluster%40 | grep -w adbench-test >/dev/null ||
    sacctmgr -i add cluster adbench-test >/dev/null
  sacctmgr -n list account format=account%40 | grep -w adbench-test >/dev/null ||
    sacctmgr -i add account adbench-test cluster=adbench-test >/dev/null
  sacctmgr -n list assoc user=root account=adbench-test format=account | grep . >/dev/null ||
    sacctmgr -i add user root account=adbench-test cluster=adbench-test >/dev/null
}

ours() {  # by content: files written before the mark was added count too
  grep -qs -e "^ClusterName=adbench-test$" -e "Name=gpu Type=fake File=/dev/null$" \
    -e "^StorageLoc=adbench_test_acct$" "$1"
}

start() {
  local file
  for file in $CONFIGS; do
    [ ! -e "$file" ] || ours "$file" || {
      say "$file exists and was not written by this script: not overwriting it"; exit 1; }
  done
  for daemon in slurmctld slurmd munged slurmdbd mariadbd; do
    command -v "$daemon" >/dev/null || [ -x "/usr/sbin/$daemon" ] || {
      say "$daemon not installed: run ./setup.sh --test (as root)"; exit 1; }
  done
  install -d -o slurm -g slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
  write_config
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  alive /run/munge/munged.pid || runuser -u munge -- /usr/sbin/munged
  munge -n | unmunge >/dev/null
  start_accounting
  alive /run/slurmctld.pid || /usr/sbin/slurmctld
  wait_for "slurmctld" "scontrol ping 2>/dev/null | grep -q UP"
  alive /run/slurmd.pid || /usr/sbin/slurmd
  wait_for "the node to be idle" "[ \"\$(sinfo -h -p cpu -n $(hostname -s) -o %t)\" = idle ]"
  sinfo -o "%P %a %D %t %N %c %m %G" >&2
}

wait_for() {  # what, condition: up to 30 s, then the daemons' logs
  for _ in $(seq 1 60); do eval "$2" && return 0; sleep 0.5; done
  say "timed out waiting for $1"
  tail -n 30 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
  exit 1
}

stop() {
  local file pid
  for file in $PIDFILES; do
    [ -s "$file" ] || continue
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$file"
  done
  for file in $CONFIGS; do
    ! ours "$file" || rm -f "$file"
  done
}

pids() {
  local file
  for file in $PIDFILES; do [ -s "$file" ] && cat "$file"; done
  return 0
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  pids) pids ;;
  *) echo "usage: $0 start|stop|pids" >&2; exit 2 ;;
esac
