#!/bin/bash
# perf/bench_parallel.sh [BUILD_DIR]: pipeline and tensor parallelism on two ranks against one
# rank, in one run of this script: the same model, global batch and steps trained by `ftllm
# train` as tp 1 x pp 1 on one rank, pp 2 on two ranks (1F1B and GPipe) and tp 2 on two ranks,
# one OpenMP thread per rank (so two ranks use both cores, one rank one). Prints each layout's
# mean step time (steps after train.rate_skip), its ratio to the single-rank step, and every
# rank's fraction of the step spent waiting on messages (the end-of-run timeline lines).
# A perfect 2-way split would give 0.5; the waiting fractions say where the rest goes (pipeline
# bubble, tp all-reduces on the critical path; dp: the gradient buckets' wait, with and without
# the executor testing them during the backward). Environment: STEPS (default 12), MICRO
# (micro-batches, default 4), MODEL (deck overrides of the model shape); FT_BENCH_SMOKE=1: a tiny
# model and 3 steps (checks that the script runs, tests/e2e/bench_smoke.sh).
set -u
if [ "${FT_BENCH_SMOKE:-0}" != 0 ]; then
  : "${STEPS:=3}" "${MODEL:=model.layers=2 model.channels=32 model.heads=2 model.seq_len=16 train.batch=2}"
fi
FTLLM=${FTLLM:-bin/ftllm}
STEPS=${STEPS:-12}
MICRO=${MICRO:-4}
MODEL=${MODEL:-"model.layers=8 model.channels=256 model.heads=8 model.seq_len=128 train.batch=4"}
export OMP_NUM_THREADS=1
common="train.steps=$STEPS dmr.mode=off faults.schedule= train.rate_skip=2 train.sample_tokens=0 train.val_batches=0 checkpoint.interval=0 run.threads=1 parallel.microbatches=$MICRO"
declare -A ms waits
run() { # run NAME NP OVERRIDES...
  local name=$1 np=$2; shift 2
  local out
  # shellcheck disable=SC2086
  out=$(mpiexec -n "$np" "$FTLLM" train inputs/default.ini $MODEL $common "$@" 2>&1) || { echo "$out" | tail -5; exit 1; }
  ms[$name]=$(sed -n 's/^summary: .*, \([0-9.]*\) ms\/step.*/\1/p' <<< "$out")
  waits[$name]=$(grep '^\[r[0-9]*\] ' <<< "$out" | sed 's/^/    /')
}
run single 1
run pp2-1f1b 2 parallel.pp=2 parallel.schedule=1f1b
run pp2-gpipe 2 parallel.pp=2 parallel.schedule=gpipe
run tp2 2 parallel.tp=2
# dp 2 twice: the executor testing the in-flight gradient buckets between ops (the default) and
# not (MPICH has no progress thread: then a bucket's all-reduce advances only when waited for)
run dp2 2 parallel.dp=2 parallel.microbatches=$((MICRO / 2 > 0 ? MICRO / 2 : 1)) parallel.bucket_mb=2
run dp2-noprog 2 parallel.dp=2 parallel.microbatches=$((MICRO / 2 > 0 ? MICRO / 2 : 1)) parallel.bucket_mb=2 parallel.progress=false
for l in single pp2-1f1b pp2-gpipe tp2 dp2 dp2-noprog; do
  [ -n "${ms[$l]}" ] || { echo "bench_parallel: no summary line (ms/step) from the $l run"; exit 1; }
done
echo "model: $MODEL; $MICRO micro-batches per step, $STEPS steps (first 2 not timed), 1 thread per rank"
printf '%-10s %6s %10s %12s\n' layout ranks "ms/step" "vs 1 rank"
for l in single pp2-1f1b pp2-gpipe tp2 dp2 dp2-noprog; do
  np=2; [ "$l" = single ] && np=1
  printf '%-10s %6s %10s %12.3f\n' "$l" "$np" "${ms[$l]}" "$(awk -v a="${ms[$l]}" -v b="${ms[single]}" 'BEGIN{print a/b}')"
  echo "${waits[$l]}"
done
