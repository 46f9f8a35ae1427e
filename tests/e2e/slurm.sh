#!/bin/bash
# e2e/slurm.sh: the jobscripts as a cluster user submits them, on a real Slurm (22.05, Debian's
# slurmctld + slurmd + munge) started for this test on this machine (tests/slurm/cluster.bash:
# one node, its own ports and files, stopped at exit whatever happens):
#  - cpu.sbatch on 2 ranks (dp 2, the default deck's bit flip): completes with exit 0, its output
#    holds the job's environment (git revision, hosts, Slurm variables, MPI), ftllm's echo of
#    the resolved deck, the caught flip and the verdict;
#  - requeue.sbatch made to crash once: its first attempt's fault file (a `fail` line) wipes out
#    replica 1, the only holder of its shard (spare.r 1), before step 5: exit 5; the job requeues
#    itself, and the second attempt resumes from the step-3 checkpoint (checkpoint.resume=auto),
#    trains steps 4-6 only and ends with the losses of a run that never failed; and once more
#    with a crash: its ranks killed (SIGKILL) while the step-6 checkpoint is being written, the
#    job requeues itself and resumes from the step-3 checkpoint, the last one that verifies;
#  - fault-study.sbatch as a 3-task array (seeds 1-3, its own fault file each) and
#    fault-study-summary.sh as a job depending on it: every flip caught, the totals add up;
#  - gpu.sbatch on 2 stand-in GPUs (its Slurm side: allocation, one GPU per task, srun; ftllm on
#    the CPU backend here): each task sees its own single GPU and the run completes.
# Without Slurm it checks only that the jobscripts parse (bash -n) and refuse bad arguments with
# one line and exit 2, and skips the rest (counted) when not root or the Slurm/munge packages are
# missing.
set -u
source "$(dirname "$0")/lib.bash"
source "$(dirname "$0")/../slurm/cluster.bash"
for f in jobscripts/*.sbatch jobscripts/*.sh; do
  if bash -n "$f" 2> "$E2E_TMP/err"; then ok "bash -n $f"; else bad "bash -n $f" "$(cat "$E2E_TMP/err")"; fi
done
# usage CHECK WANT_STDERR CMD...: CMD exits 2 with the one line WANT_STDERR on stderr
usage() {
  local name=$1 want=$2 rc; shift 2
  "$@" > /dev/null 2> "$E2E_TMP/err"; rc=$?
  if [ "$rc" -eq 2 ] && [ "$(cat "$E2E_TMP/err")" = "$want" ]; then ok "$name"
  else bad "$name" "exit $rc, stderr: $(head -c 400 "$E2E_TMP/err"); want exit 2 and: $want"; fi
}
usage "cpu.sbatch without a deck" "usage: sbatch jobscripts/cpu.sbatch DECK [section.key=value ...]" \
  env -u SLURM_SUBMIT_DIR bash jobscripts/cpu.sbatch
usage "gpu.sbatch, a missing deck" "gpu.sbatch: deck 'no.ini' not found (from $PWD)" \
  env -u SLURM_SUBMIT_DIR bash jobscripts/gpu.sbatch no.ini
usage "requeue.sbatch, a bad FTLLM_MAX_REQUEUES" "FTLLM_MAX_REQUEUES = 'x': expected a whole number >= 0" \
  env -u SLURM_SUBMIT_DIR FTLLM_MAX_REQUEUES=x bash jobscripts/requeue.sbatch inputs/default.ini
usage "fault-study.sbatch outside an array" "fault-study.sbatch: not an array task (submit it with sbatch --array=1-N)" \
  env -u SLURM_SUBMIT_DIR -u SLURM_ARRAY_TASK_ID bash jobscripts/fault-study.sbatch inputs/default.ini
usage "fault-study-summary.sh, not a study" "fault-study-summary.sh: $E2E_TMP: no seed-*.out files (expected the outputs of fault-study.sbatch)" \
  env -u SLURM_SUBMIT_DIR jobscripts/fault-study-summary.sh "$E2E_TMP"
# the environment block never ends a job (set -euo pipefail), even with nothing to list
out=$(env -i PATH="$PATH" HOME="${HOME:-/}" bash -c 'set -euo pipefail; source jobscripts/job-env.sh
  module() { :; }; job_env_print check; echo "after: ok"' 2>&1)
if grep -q '^job: git ' <<< "$out" && grep -q '^job: modules none' <<< "$out" && grep -q '^after: ok$' <<< "$out"
then ok "job_env_print outside Slurm, an empty module list"; else bad "job_env_print outside Slurm" "$out"; fi
why=$(slurm_missing)
if [ -n "$why" ]; then
  echo "SKIP slurm: $why"
  echo "[  SKIPPED ] 1 test(s)."
  if grep -l 'Sanitizer\|runtime error' "$d"/*.out "$d"/study/*.out > "$d/san" 2>/dev/null; then
  bad "no sanitizer report in the jobs' outputs" "$(cat "$d/san")"
else ok "no sanitizer report in the jobs' outputs"; fi
# shellcheck disable=SC2154 # fail: lib.bash's count
if [ "$fail" -ne 0 ]; then # for the log: what the daemons said
  for f in "$d"/slurm/slurmctld.log "$d"/slurm/slurmd.log; do
    echo "---- $f (errors, last 30) ----"; grep -iE 'error|fail|requeue' "$f" | tail -30
  done
fi
e2e_finish
  exit
fi
trap 'slurm_down; rm -rf "$E2E_TMP"' EXIT
trap 'exit 143' TERM INT HUP
d=$E2E_TMP
if slurm_up "$d/slurm" 2; then ok "one-node Slurm up ($(sinfo -h -o '%N: %c CPUs, %G'))"
else bad "one-node Slurm up" "see above"; e2e_finish; exit 1; fi
host=$(hostname -s)

# wait_job ID [SECONDS]: waits until job ID (every task of an array) has left the queue; then
# STATE, EXIT and RESTARTS hold its record (of task 0 for an array). A requeued job, which Slurm
# holds back for about two minutes, is let go 3 s later instead: not in the second of its
# requeue, when slurmd would still take its new launch credential for the one it revoked
# ("Job N already killed, do not launch batch job").
# Every wait ends by the test's deadline (7 minutes after the start), so a cluster that cannot
# run the jobs fails the test in bounded time.
deadline=$((SECONDS + 420))
wait_job() {
  local id=$1 limit=${2:-180} t0=$SECONDS s info let_go=0
  [ $((t0 + limit)) -le "$deadline" ] || limit=$((deadline > t0 ? deadline - t0 : 1))
  while [ $((SECONDS - t0)) -lt "$limit" ]; do
    s=$(squeue -h -r -j "$id" -o '%T %r' 2>/dev/null)
    [ -z "$s" ] && break
    if [ "$let_go" -eq 0 ] && grep -q 'PENDING BeginTime' <<< "$s"; then
      scontrol update JobId="$id" StartTime=now+3 && let_go=1
    fi
    sleep 1
  done
  info=$(scontrol show job "$id" 2>/dev/null | tr ' ' '\n')
  STATE=$(sed -n 's/^JobState=//p' <<< "$info" | head -1)
  EXIT=$(sed -n 's/^ExitCode=//p' <<< "$info" | head -1)
  RESTARTS=$(sed -n 's/^Restarts=//p' <<< "$info" | head -1)
  [ -n "$s" ] && STATE="still queued after $limit s ($s)"
  echo "job $id: $STATE, exit $EXIT, restarts $RESTARTS ($((SECONDS - t0)) s)"
}
# hasf NAME FILE REGEX: FILE has a line matching REGEX
hasf() {
  if grep -qE -- "$3" "$2"; then ok "$1"; else bad "$1" "no '$3' in $2: $(tail -c 800 "$2")"; fi
}
# before NAME FILE RE1 RE2: the first line matching RE1 comes before the last one matching RE2
before() {
  local a b
  a=$(grep -nE -- "$3" "$2" | head -1 | cut -d: -f1) b=$(grep -nE -- "$4" "$2" | tail -1 | cut -d: -f1)
  if [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]; then ok "$1"
  else bad "$1" "'$3' (line ${a:-none}) not before '$4' (line ${b:-none}) in $2"; fi
}
tiny="train.steps=6 model.layers=2 model.channels=32 model.heads=2 model.seq_len=16 train.batch=2 train.val_batches=0 train.sample_tokens=0"
two="-N1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1"

# --- cpu.sbatch: 2 ranks, the default deck (naive DMR, one flip at step 3) ---
# shellcheck disable=SC2086
id=$(sbatch --parsable $two -o "$d/cpu.out" jobscripts/cpu.sbatch inputs/default.ini parallel.dp=2 $tiny \
  checkpoint.dir="$d/ckpt-cpu")
wait_job "$id" 120
[ "$STATE $EXIT" = "COMPLETED 0:0" ] && ok "cpu.sbatch: completed, exit 0" || bad "cpu.sbatch" "$STATE, exit $EXIT: $(tail -c 800 "$d/cpu.out")"
rev=$(git rev-parse HEAD 2>/dev/null || echo unknown)
hasf "cpu.sbatch: git revision" "$d/cpu.out" "^job: git $rev"
hasf "cpu.sbatch: hosts" "$d/cpu.out" "^job: hosts $host "
hasf "cpu.sbatch: Slurm variables" "$d/cpu.out" "^job: env SLURM_JOB_ID=$id\$"
hasf "cpu.sbatch: MPI version" "$d/cpu.out" "^job: mpi MPICH [0-9]"
hasf "cpu.sbatch: resolved deck" "$d/cpu.out" "^; resolved configuration of inputs/default.ini"
hasf "cpu.sbatch: the whole resolved deck beside the outputs" "$d/ckpt-cpu/default.deck.ini" "^dp = 2 "
hasf "cpu.sbatch: 2 ranks" "$d/cpu.out" "train: deck inputs/default.ini, 2 ranks, layout dp 2 "
hasf "cpu.sbatch: the flip caught" "$d/cpu.out" "^faults: sdc injected 1, detected 1, rolled back 1, missed 0"
hasf "cpu.sbatch: verdict" "$d/cpu.out" "^verdict: OK \(trained 6 steps"
hasf "cpu.sbatch: exit code line" "$d/cpu.out" "^job: ftllm exit code 0\$"

# --- requeue.sbatch: a wipe-out before step 5 on the first attempt only ---
printf 'fail step=5 replica=1   ; spare.r 1: replica 1 is the only holder of shard 1\n' > "$d/wipe.faults"
# spare.wipeout=requeue: exit 5 at once (the default restarts in-process from the checkpoint)
rq="parallel.dp=2 spare.r=1 spare.wipeout=requeue dmr.mode=off faults.schedule= $tiny checkpoint.interval=3 run.name=rq"
# shellcheck disable=SC2086
id=$(FTLLM_FIRST_ATTEMPT_FAULTS=$d/wipe.faults sbatch --parsable $two -o "$d/rq.out" \
  jobscripts/requeue.sbatch inputs/default.ini $rq checkpoint.dir="$d/ckpt")
wait_job "$id" 240
[ "$STATE $EXIT $RESTARTS" = "COMPLETED 0:0 1" ] && ok "requeue.sbatch: completed after 1 requeue" \
  || bad "requeue.sbatch" "$STATE, exit $EXIT, restarts $RESTARTS: $(tail -c 800 "$d/rq.out")"
f=$d/rq.out
hasf "requeue: attempt 1 wiped out" "$f" "^verdict: FAILED \(SPARe wipe-out after step 4"
hasf "requeue: attempt 1 exit 5" "$f" "^job: ftllm exit code 5 \(attempt 1\)\$"
hasf "requeue: requeued" "$f" "^job: requeued \(exit code 5\)"
hasf "requeue: attempt 2 environment" "$f" "^job: env SLURM_RESTART_COUNT=1\$"
hasf "requeue: resumed at the checkpoint's step" "$f" "^resumed from $d/ckpt/rq\.step-0*3\.h5: step 3,"
before "requeue: resumed after the requeue" "$f" "^job: requeued" "^resumed from"
n1=$(grep -cE '^step +1/6 ' "$f") n4=$(grep -cE '^step +4/6 ' "$f") n6=$(grep -cE '^step +6/6 ' "$f")
[ "$n1 $n4 $n6" = "1 2 1" ] && ok "requeue: attempt 2 trained steps 4-6 only" \
  || bad "requeue: steps per attempt" "step 1 x$n1, step 4 x$n4, step 6 x$n6 (want 1 2 1)"
hasf "requeue: attempt 2 verdict" "$f" "^verdict: OK \(trained 6 steps"
hasf "requeue: attempt 2 exit 0" "$f" "^job: ftllm exit code 0 \(attempt 2\)\$"
# the same run, never failed, straight under mpiexec: the same losses (a resume is exact)
losses() { grep -E '^step +[4-6]/6 ' "$1" | sed 's/.*| loss \([0-9.]*\) |.*/\1/' | tail -3 | tr '\n' ' '; }
# shellcheck disable=SC2086
OMP_NUM_THREADS=1 timeout 120 mpiexec -n 2 "$FTLLM" train inputs/default.ini $rq checkpoint.interval=0 \
  checkpoint.dir="$d/ref" > "$d/ref.out" 2>&1
want=$(losses "$d/ref.out") got=$(losses "$f")
[ -n "$want" ] && [ "$got" = "$want" ] && ok "requeue: losses of steps 4-6 equal the run without the failure" \
  || bad "requeue: losses" "resumed: $got; never failed: $want"

# --- requeue.sbatch after a crash: the ranks are killed while the step-6 checkpoint is being
# written (checkpoint.debug_delay_ms widens that window); the step-3 one is complete ---
cr="parallel.dp=2 dmr.mode=off faults.schedule= $tiny checkpoint.interval=3 checkpoint.debug_delay_ms=100 run.name=cr"
# shellcheck disable=SC2086
id=$(sbatch --parsable $two -o "$d/cr.out" jobscripts/requeue.sbatch inputs/default.ini $cr checkpoint.dir="$d/ckpt")
t0=$SECONDS
until [ -f "$d/ckpt/cr.step-00000003.h5" ] && compgen -G "$d/ckpt/cr.step-00000006.h5.tmp*" > /dev/null; do
  [ $((SECONDS - t0)) -lt 120 ] && [ "$SECONDS" -lt "$deadline" ] || break
  sleep 0.2
done
if [ -f "$d/ckpt/cr.step-00000003.h5" ] && scancel --signal=KILL "$id.0"; then
  ok "requeue crash: the ranks killed during the step-6 checkpoint ($((SECONDS - t0)) s)"
else bad "requeue crash" "no step-3 checkpoint and step-6 write after 120 s: $(ls "$d/ckpt"; tail -c 600 "$d/cr.out")"; fi
wait_job "$id" 240
[ "$STATE $EXIT $RESTARTS" = "COMPLETED 0:0 1" ] && ok "requeue crash: completed after 1 requeue" \
  || bad "requeue crash" "$STATE, exit $EXIT, restarts $RESTARTS: $(tail -c 800 "$d/cr.out")"
f=$d/cr.out
grep -E '^job: (ftllm exit code|requeued)' "$d/cr.out" # for the log
hasf "requeue crash: requeued on a signal's exit code" "$f" "^job: requeued \(exit code (1[3-9][0-9]|2[0-5][0-9])\)"
hasf "requeue crash: resumed at step 3" "$f" "^resumed from $d/ckpt/cr\.step-0*3\.h5: step 3,"
before "requeue crash: resumed after the requeue" "$f" "^job: requeued" "^resumed from"
hasf "requeue crash: attempt 2 verdict" "$f" "^verdict: OK \(trained 6 steps"
hasf "requeue crash: attempt 2 exit 0" "$f" "^job: ftllm exit code 0 \(attempt 2\)\$"

# --- fault-study.sbatch: 3 seeds, then the summary as a dependent job ---
# shellcheck disable=SC2086
aid=$(FTLLM_STUDY=$d/study FTLLM_SDC="count=3 steps=1-4" sbatch --parsable --array=1-3 -n1 \
  --cpus-per-task=1 -o "$d/fs-%A_%a.log" jobscripts/fault-study.sbatch inputs/default.ini $tiny dmr.mode=naive)
sid=$(sbatch --parsable -n1 --cpus-per-task=1 --dependency=afterany:"$aid" -o "$d/summary.out" \
  jobscripts/fault-study-summary.sh "$d/study")
wait_job "$aid" 180
wait_job "$sid" 60
[ "$STATE $EXIT" = "COMPLETED 0:0" ] && ok "fault-study-summary.sh job: completed, exit 0" \
  || bad "fault-study-summary.sh job" "$STATE, exit $EXIT: $(cat "$d/summary.out")"
for s in 1 2 3; do
  hasf "fault study seed $s: its own fault file" "$d/study/seed-$s.faults" "^sdc-random seed=$s count=3 steps=1-4\$"
  hasf "fault study seed $s: every flip caught" "$d/study/seed-$s.out" "^faults: sdc injected ([1-9][0-9]*), detected \1, rolled back \1, missed 0"
  hasf "fault study seed $s: exit 0" "$d/study/seed-$s.out" "^job: ftllm exit code 0\$"
done
inj=$(sed -n 's/^faults: sdc injected \([0-9]*\),.*/\1/p' "$d"/study/seed-*.out | paste -sd+ | bc)
hasf "fault study summary: 3 runs" "$d/summary.out" "^total: 3 run\(s\) reported \(3 exit 0, 0 without a faults: line\), injected $inj, detected $inj, rolled back $inj, missed 0"
[ "$(wc -l < "$d/study/summary.csv")" -eq 4 ] && ok "fault study summary.csv: header + 3 rows" \
  || bad "fault study summary.csv" "$(cat "$d/study/summary.csv")"

# --- gpu.sbatch on 2 stand-in GPUs: one GPU per task ---
# shellcheck disable=SC2086
id=$(sbatch --parsable $two -o "$d/gpu.out" jobscripts/gpu.sbatch inputs/default.ini parallel.dp=2 $tiny run.backend=cpu \
  checkpoint.dir="$d/ckpt-gpu")
wait_job "$id" 120
[ "$STATE $EXIT" = "COMPLETED 0:0" ] && ok "gpu.sbatch: completed, exit 0" || bad "gpu.sbatch" "$STATE, exit $EXIT: $(tail -c 800 "$d/gpu.out")"
hasf "gpu.sbatch: task 0 has GPU 0 only" "$d/gpu.out" "^job: task 0 on $host: CUDA_VISIBLE_DEVICES=0\$"
hasf "gpu.sbatch: task 1 has GPU 1 only" "$d/gpu.out" "^job: task 1 on $host: CUDA_VISIBLE_DEVICES=1\$"
hasf "gpu.sbatch: verdict" "$d/gpu.out" "^verdict: OK \(trained 6 steps"
if grep -l 'Sanitizer\|runtime error' "$d"/*.out "$d"/study/*.out > "$d/san" 2>/dev/null; then
  bad "no sanitizer report in the jobs' outputs" "$(cat "$d/san")"
else ok "no sanitizer report in the jobs' outputs"; fi
# shellcheck disable=SC2154 # fail: lib.bash's count
if [ "$fail" -ne 0 ]; then # for the log: what the daemons said
  for f in "$d"/slurm/slurmctld.log "$d"/slurm/slurmd.log; do
    echo "---- $f (errors, last 30) ----"; grep -iE 'error|fail|requeue' "$f" | tail -30
  done
fi
e2e_finish
