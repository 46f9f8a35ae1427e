#!/bin/bash
# perf/bench_spare.sh BUILD_DIR: SPARe in the training loop (`ftllm train`, dp 4 on 4 ranks, one
# thread each, dmr off), in one run, configurations interleaved REPS times, medians:
#  1. step time with r = 1, 2, 3 and no failure, as a ratio to r = 1 (the target: r > 1 under
#     2% over: with no failure every replica computes only its own shard);
#  2. step time after k = 1, 2 failed replicas (r 3) against the depth the controller chose, as a
#     ratio to no failure on the same r (the depth is the critical path in shards);
#  3. time from an injected failure to the first step after it: the failure's handling (the
#     survivors' regrid; a hot spare's join, dp 3 + 1 spare; a wipe-out's in-process restart
#     from a checkpoint) and that first step, from the run's own `spare:` line and step lines.
# The fixed-order reduction against MPI all-reduce at the same size: perf/bench_gradsync.sh.
# FT_BENCH_SMOKE=1: 2 ranks, a tiny model, one repetition (make test's smoke run).
set -u
build=${1:?usage: perf/bench_spare.sh BUILD_DIR}
ftllm=$build/ftllm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
np=4 dp=4 reps=${REPS:-5} steps=14 at=6 # failures before step $at
model="model.layers=4 model.heads=4 model.channels=128 model.seq_len=64 train.batch=4"
if [ -n "${FT_BENCH_SMOKE:-}" ]; then
  np=2 dp=2 reps=1 steps=6 at=3
  model="model.layers=1 model.heads=2 model.channels=32 model.seq_len=16 train.batch=2"
fi
common="inputs/default.ini $model train.steps=$steps dmr.mode=off train.val_batches=0 train.sample_tokens=0 train.rate_skip=2 faults.schedule="

# train NAME NP ARGS...: one run; its output in $tmp/NAME.out (appended over repetitions)
train() {
  local name=$1 n=$2; shift 2
  # shellcheck disable=SC2086
  if ! timeout 600 mpiexec -n "$n" "$ftllm" train $common "$@" > "$tmp/run.out" 2>&1; then
    echo "bench_spare: $name failed:"; tail -n 5 "$tmp/run.out"; exit 1
  fi
  cat "$tmp/run.out" >> "$tmp/$name.out"
}
# ms of step lines from step FROM on (after train.rate_skip), one per line
step_ms() { awk -v from="$2" '/^step +[0-9]+\/[0-9]+ \| loss/ { split($2, a, "/"); if (a[1] + 0 >= from) for (i = 1; i <= NF; i++) if ($i == "ms") print $(i - 1) }' "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
# the step lines' last "live L depth D" from step FROM on
depth_of() { awk -v from="$2" '/^step +[0-9]+\/[0-9]+ \| loss/ { split($2, a, "/"); if (a[1] + 0 >= from) d = "live " $(NF - 2) " depth " $NF } END { print d }' "$1"; }
# ms of the first step line after each in-process restart
after_restart() { awk '/^spare: restarted/ { want = 1; next } want && /^step +[0-9]+\/[0-9]+ \| loss/ { for (i = 1; i <= NF; i++) if ($i == "ms") print $(i - 1); want = 0 }' "$1"; }
# a field of the spare: line ("regrid", "spare joins", "restarts"), summed over the runs, / reps
lost() { grep '^spare: r ' "$1" | sed "s/.*$2 \([0-9.]*\) s.*/\1/" | median; }

echo "bench_spare: $(date -u +%Y-%m-%d), $np ranks x 1 thread, dp $dp, $steps steps, medians of $reps runs"
printf 'fail step=%d replica=1\n' "$at" > "$tmp/k1.faults"
printf 'fail step=%d replica=1\nfail step=%d replica=2\n' "$at" "$at" > "$tmp/k2.faults"
rs="1 2 3"; [ "$dp" -lt 3 ] && rs="1 2"
for rep in $(seq "$reps"); do
  for r in $rs; do train "r$r" "$np" parallel.dp=$dp spare.r=$r; done
  rk=${rs##* }
  train "k1" "$np" parallel.dp=$dp spare.r=$rk faults.schedule="$tmp/k1.faults"
  [ "$dp" -ge 3 ] && train "k2" "$np" parallel.dp=$dp spare.r=$rk faults.schedule="$tmp/k2.faults"
  if [ -z "${FT_BENCH_SMOKE:-}" ]; then
    train "join" "$np" parallel.dp=3 spare.spares=1 spare.r=2 faults.schedule="$tmp/k1.faults"
    printf 'fail step=6 replica=1\nfail step=10 replica=2\n' > "$tmp/wipe.faults"
    rm -rf "$tmp/ck"
    train "restart" "$np" parallel.dp=4 spare.r=2 faults.schedule="$tmp/wipe.faults" checkpoint.interval=8 checkpoint.dir="$tmp/ck" run.name=b
  fi
done
base=$(step_ms "$tmp/r1.out" 3 | median)
echo "1. no failure, step time against r = 1:"
for r in $rs; do
  ms=$(step_ms "$tmp/r$r.out" 3 | median)
  printf '   r %d: %8.2f ms/step  ratio %s\n' "$r" "$ms" "$(ratio "$ms" "$base")"
done
echo "RESULT r ${rs##* } vs r 1: $(ratio "$(step_ms "$tmp/r${rs##* }.out" 3 | median)" "$base")x"
echo "2. after k failed replicas (r ${rs##* }, failures before step $at), against no failure:"
rbase=$(step_ms "$tmp/r${rs##* }.out" $((at + 1)) | median)
printf '   k 0: %8.2f ms/step  %-16s ratio 1.000\n' "$rbase" "$(depth_of "$tmp/r${rs##* }.out" $((at + 1)))"
for k in 1 2; do
  [ -f "$tmp/k$k.out" ] || continue
  ms=$(step_ms "$tmp/k$k.out" $((at + 1)) | median)
  printf '   k %d: %8.2f ms/step  %-16s ratio %s\n' "$k" "$ms" "$(depth_of "$tmp/k$k.out" $((at + 1)))" "$(ratio "$ms" "$rbase")"
done
echo "3. from an injected failure to the first step after it (handling + that step):"
first() { awk -v at="$2" '/^step +[0-9]+\/[0-9]+ \| loss/ { split($2, a, "/"); if (a[1] + 0 == at) for (i = 1; i <= NF; i++) if ($i == "ms") print $(i - 1) }' "$1" | median; }
printf '   masked (regrid onto the survivors): %.3f s + first step %s ms (no failure: %s ms)\n' \
  "$(lost "$tmp/k1.out" regrid)" "$(first "$tmp/k1.out" "$at")" "$(first "$tmp/r${rs##* }.out" "$at")"
if [ -f "$tmp/join.out" ]; then
  printf '   hot spare joins (dp 3 + 1):          %.3f s + first step %s ms\n' \
    "$(lost "$tmp/join.out" "spare joins")" "$(first "$tmp/join.out" "$at")"
  printf '   wipe-out -> restart from step 8:     %.3f s + first step %s ms (1 step recomputed)\n' \
    "$(lost "$tmp/restart.out" restarts)" "$(after_restart "$tmp/restart.out" | median)"
fi
