#!/bin/bash
# e2e/ulfm_fuzz.sh: random kill schedules on the Open MPI build (ULFM), where e2e/ulfm.sh has
# chosen ones. Each run kills one to three ranks at random places (FTLLM_TEST_KILL: a region
# or a kill point, the rank's N-th pass of it, N in 1..6; a place a rank never reaches kills
# nothing), with validation, checkpoints every 2 steps and, in one layout, asynchronous ones.
# Whatever dies, a run must end one of two ways: exit 0 with the fault-free run's step-6
# checkpoint (/params and /optim bitwise), or exit 5 (a wipe-out: the requeue path), and
# never FATAL, crash or hang (each run under a timeout). The schedules come from a fixed seed
# per layout, so a failure is repeated by its printed FTLLM_TEST_KILL. (A schedule that killed
# both replicas of dp 2 x tp 2 found that the ranks left waiting read an end event nobody
# sent: FATAL, exit 4; now exit 5.) FTLLM_FUZZ_RUNS: runs per layout (default 5);
# FTLLM_FUZZ_SEED: added to every layout's seed (default 0), to explore other schedules;
# FTLLM_FUZZ_CLEAN: fault-free asynchronous runs at the end (default 8).
# Skips (one line saying why) when the Open MPI build is not there.
set -u
source "$(dirname "$0")/lib.bash"
e2e_need_openmpi ulfm_fuzz
runs=${FTLLM_FUZZ_RUNS:-5}
places=(step data forward backward gradsync optimizer eval checkpoint agreed idle regrid write)
small="run.progress=lines spare.r=2 train.steps=6 dmr.mode=off faults.schedule= train.sample_tokens=0 model.channels=32 model.layers=2 model.heads=2 model.seq_len=16 train.batch=2 train.val_batches=1 train.val_every=2 checkpoint.interval=2 checkpoint.keep=9"

# mpirun N DIR ARGS...: one run (ULFM on), its output in $E2E_TMP/out; the exit code
mpirun_ft() {
  local np=$1 dir=$2; shift 2
  rm -rf "$dir"
  timeout "${E2E_TIMEOUT:-300}" "$OMPI/bin/mpirun" --oversubscribe --with-ft ulfm -x OMP_NUM_THREADS=1 \
    -x FTLLM_TEST_KILL -x LSAN_OPTIONS -n "$np" "$FTLLM" train inputs/default.ini "$@" \
    checkpoint.dir="$dir" > "$E2E_TMP/out" 2>&1
}

# layout NAME SEED NP ARGS...: the fault-free run, then $runs random schedules
layout() {
  local name=$1 seed=$2 np=$3; shift 3
  export FTLLM_TEST_KILL=
  local ref=$E2E_TMP/ref-$seed
  mpirun_ft "$np" "$ref" "$@"
  local rc=$?
  if [ "$rc" -ne 0 ] || [ ! -f "$ref/default.step-00000006.h5" ]; then
    bad "$name: fault-free" "exit code $rc: $(tr -d '\0' < "$E2E_TMP/out" | grep -a 'FATAL\|error' | head -c 600)"
    return
  fi
  ok "$name: fault-free"
  RANDOM=$((seed + ${FTLLM_FUZZ_SEED:-0}))
  for t in $(seq 1 "$runs"); do
    local k="" j nk=$((1 + RANDOM % 3))
    for j in $(seq 1 "$nk"); do
      k="$k${k:+,}$((RANDOM % np)):${places[$((RANDOM % ${#places[@]}))]}:$((1 + RANDOM % 6))"
    done
    export FTLLM_TEST_KILL=$k
    local dir=$E2E_TMP/run-$seed-$t what
    mpirun_ft "$np" "$dir" "$@"
    rc=$?
    if tr -d '\0' < "$E2E_TMP/out" | grep -aq 'FATAL\|Sanitizer\|runtime error'; then
      bad "$name: FTLLM_TEST_KILL=$k" "exit code $rc: $(tr -d '\0' < "$E2E_TMP/out" | grep -a 'FATAL\|Sanitizer\|runtime error' | head -c 600)"
    elif [ "$rc" -eq 5 ]; then
      ok "$name: FTLLM_TEST_KILL=$k: exit 5 (a wipe-out)"
    elif [ "$rc" -ne 0 ]; then
      bad "$name: FTLLM_TEST_KILL=$k" "exit code $rc (want 0 or 5): $(tr -d '\0' < "$E2E_TMP/out" | tail -c 600)"
    else
      what="$ref/default.step-00000006.h5 $dir/default.step-00000006.h5"
      # shellcheck disable=SC2086
      if [ -f "$dir/default.step-00000006.h5" ] && h5diff $what /params > /dev/null 2>&1 \
        && h5diff $what /optim > /dev/null 2>&1; then
        ok "$name: FTLLM_TEST_KILL=$k: the fault-free checkpoint, bitwise"
      else bad "$name: FTLLM_TEST_KILL=$k" "exit 0, but step 6's checkpoint differs from the fault-free run's (or is missing)"; fi
    fi
  done
  export FTLLM_TEST_KILL=
}

# shellcheck disable=SC2086
layout "dp 4" 101 4 parallel.dp=4 $small
# shellcheck disable=SC2086
layout "dp 2 x tp 2, asynchronous checkpoints" 202 4 parallel.dp=2 parallel.tp=2 checkpoint.async=true $small
# shellcheck disable=SC2086
layout "dp 3 + 2 hot spares" 303 5 parallel.dp=3 spare.spares=2 $small
# shellcheck disable=SC2086
layout "dp 2 x pp 2, naive DMR" 404 4 parallel.dp=2 parallel.pp=2 parallel.microbatches=2 $small dmr.mode=naive
# No death at all, asynchronous checkpoints, again and again: the write's agreement before the
# file ran as MPIX_Comm_agree in the background thread, and Open MPI 5 gave it 0 on every rank
# though all gave 1 (the training thread agreeing at the same time) in about one run of 20:
# the write abandoned, the writer's revoked communicators failed the next one, exit 5. Now an
# all-reduce (ckpt_write.c); each run must end 0 with every checkpoint (steps 2, 4, 6)
export FTLLM_TEST_KILL=
bad_runs=""
for t in $(seq 1 "${FTLLM_FUZZ_CLEAN:-8}"); do
  # shellcheck disable=SC2086
  mpirun_ft 4 "$E2E_TMP/clean-$t" parallel.dp=2 parallel.tp=2 checkpoint.async=true $small
  rc=$?
  for s in 2 4 6; do [ -f "$E2E_TMP/clean-$t/default.step-0000000$s.h5" ] || rc="$rc, no step $s"; done
  # the failing run's own lines (the next run overwrites $E2E_TMP/out)
  [ "$rc" = 0 ] || bad_runs="$bad_runs run $t: $rc ($(tr -d '\0' < "$E2E_TMP/out" | grep -a 'error\|abandon' | head -c 300));"
  rm -rf "$E2E_TMP/clean-$t"
done
if [ -z "$bad_runs" ]; then ok "dp 2 x tp 2, asynchronous checkpoints, no death: ${FTLLM_FUZZ_CLEAN:-8} runs, exit 0, every checkpoint"
else bad "dp 2 x tp 2, asynchronous checkpoints, no death" "$bad_runs"; fi
e2e_finish
