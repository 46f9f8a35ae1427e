# shellcheck shell=bash
# tests/slurm/cluster.bash: a private one-node Slurm on this machine, for tests (source it).
#   slurm_up DIR [GPUS]
#                   writes DIR/slurm.conf for this host (its hostname, its CPUs as nproc counts
#                   them without OMP_NUM_THREADS, at least 2, select/cons_tres,
#                   proctrack/linuxproc, task/affinity: no cgroups, no systemd, fits a
#                   container), starts munged, slurmctld and slurmd as root with every file
#                   under DIR and free ports of their own (so it never meets a site's Slurm or
#                   another test's), exports SLURM_CONF, and waits (at most 60 s) until the
#                   node is idle. A watchdog (its own session) stops the daemons if the caller
#                   dies without slurm_down (killed by SIGKILL, say).
#                   GPUS > 0 gives the node that many stand-in GPUs (gres/gpu on the device
#                   files DIR/dev/nvidia0.., made with /dev/null's numbers: Slurm allocates and
#                   binds them and sets CUDA_VISIBLE_DEVICES; nothing opens them), to run a
#                   GPU jobscript's Slurm side on a CPU machine.
#                   Returns 1 with a message on stderr when a daemon does not come up.
#   slurm_down      cancels the cluster's jobs still queued or running, then stops the three
#                   daemons it started (by their pid files), waits for them, and ends the
#                   watchdog.
#   slurm_missing   prints why this machine cannot run it (not root, a package missing), or nothing.
# The caller traps slurm_down on EXIT, so the daemons stop whatever happens.
SLURM_DIR='' _slurm_watchdog=''
_slurm_self=$(readlink -f "${BASH_SOURCE[0]}")

slurm_missing() {
  [ "$(id -u)" -eq 0 ] || { echo "not root (slurmd, munged and slurmctld run as root here)"; return; }
  local p
  for p in munged slurmctld slurmd sbatch scontrol sinfo squeue; do
    command -v "$p" > /dev/null || [ -x "/usr/sbin/$p" ] || {
      echo "no $p: install the Debian packages slurmctld slurmd slurm-client munge" \
           "(scripts/install-deps --test; make test does it)"; return; }
  done
}

# a TCP port nobody listens on, from a range that depends on this shell's pid
_slurm_free_port() {
  local p=$(( 20000 + ($$ * 7 + $1 * 131) % 20000 )) i
  for i in $(seq 200); do
    ss -Hltn "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
    p=$(( p + 1 ))
  done
  return 1
}

slurm_up() {
  SLURM_DIR=$1
  local d=$SLURM_DIR gpus=${2:-0} host cpus p1 p2 i gres="" over=""
  PATH=$PATH:/usr/sbin
  mkdir -p "$d/ctld" "$d/spool" "$d/munge" && chmod 0700 "$d/munge"
  # nproc alone would count OMP_NUM_THREADS (1 under tests/run.sh); 2 at least, for 2-rank jobs
  host=$(hostname -s) cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  [ "$cpus" -ge 2 ] || { cpus=2 over="SlurmdParameters=config_overrides"; }
  p1=$(_slurm_free_port 1) && p2=$(_slurm_free_port 2) || { echo "slurm_up: no free port" >&2; return 1; }
  [ "$p1" != "$p2" ] || p2=$((p2 + 1))
  dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none && chmod 0400 "$d/munge/munge.key"
  munged --force --socket="$d/munge/munge.sock" --key-file="$d/munge/munge.key" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/munge/munged.log" \
    --seed-file="$d/munge/munged.seed" 2> "$d/munge/start.err" ||
    { echo "slurm_up: munged did not start: $(cat "$d/munge/start.err")" >&2; return 1; }
  if [ "$gpus" -gt 0 ]; then
    mkdir -p "$d/dev"
    for i in $(seq 0 $((gpus - 1))); do # Slurm wants device files: /dev/null's numbers
      mknod "$d/dev/nvidia$i" c 1 3 || { echo "slurm_up: mknod $d/dev/nvidia$i failed" >&2; return 1; }
    done
    gres=" Gres=gpu:$gpus"
    echo "NodeName=$host Name=gpu File=$d/dev/nvidia[0-$((gpus - 1))]" > "$d/gres.conf"
  fi
  cat > "$d/slurm.conf" <<CONF
# written by tests/slurm/cluster.bash: a one-node test cluster on $host
ClusterName=ftllmtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$p1
SlurmdPort=$p2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$d/ctld
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
MpiDefault=none
ReturnToService=2
JobRequeue=1
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=300
${gres:+GresTypes=gpu}
$over
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus$gres State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$d/slurm.conf
  # the watchdog: when this shell is gone, slurm_down (in a session of its own, so a kill of
  # this shell's process group misses it)
  # shellcheck disable=SC2016 # expanded by the watchdog's shell
  setsid bash -c 'source "$1"; SLURM_DIR=$2; export SLURM_CONF=$2/slurm.conf PATH=$PATH:/usr/sbin
    while kill -0 "$3" 2>/dev/null; do sleep 2; done; slurm_down' \
    slurm-watchdog "$_slurm_self" "$d" "$$" > /dev/null 2>&1 < /dev/null &
  _slurm_watchdog=$!
  slurmctld -f "$SLURM_CONF" -i 2> "$d/slurmctld.err" ||
    { echo "slurm_up: slurmctld did not start: $(tail -3 "$d/slurmctld.err" "$d/slurmctld.log" 2>/dev/null)" >&2; return 1; }
  slurmd -f "$SLURM_CONF" -N "$host" 2> "$d/slurmd.err" ||
    { echo "slurm_up: slurmd did not start: $(tail -3 "$d/slurmd.err" "$d/slurmd.log" 2>/dev/null)" >&2; return 1; }
  for i in $(seq 60); do
    [ "$(sinfo -h -n "$host" -o %t 2>/dev/null)" = idle ] && return 0
    sleep 1
  done
  echo "slurm_up: node $host not idle after 60 s: $(sinfo -h -N -o '%N %t %E' 2>&1);" \
       "$(tail -3 "$d/slurmctld.log" "$d/slurmd.log" 2>/dev/null)" >&2
  return 1
}

# stops a daemon by its pid file (TERM, then KILL after 10 s)
_slurm_stop() {
  local pidf=$1 pid i
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf" 2>/dev/null)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null
}

slurm_down() {
  [ -n "$SLURM_DIR" ] && [ -d "$SLURM_DIR" ] || return 0
  local i
  if kill -0 "$(cat "$SLURM_DIR/slurmctld.pid" 2>/dev/null)" 2>/dev/null &&
     [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
    scancel --user="$(id -un)" 2>/dev/null # only this cluster's jobs: SLURM_CONF names it
    for i in $(seq 30); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 1; done
  fi
  _slurm_stop "$SLURM_DIR/slurmd.pid"
  _slurm_stop "$SLURM_DIR/slurmctld.pid"
  _slurm_stop "$SLURM_DIR/munge/munged.pid"
  if [ -n "$_slurm_watchdog" ]; then kill "$_slurm_watchdog" 2>/dev/null; _slurm_watchdog=; fi
}
