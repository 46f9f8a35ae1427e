#!/bin/bash
# perf/bench_moe.sh [BUILD_DIR]: expert parallelism on two ranks against one rank, in one run of
# this script: the same mixture-of-experts model (8 experts, top-2), global batch and steps
# trained by `ftllm train` as ep 1 on one rank and ep 2 on two ranks (each holds 4 experts and
# reads half the batch; token rows cross by all-to-all(v)), one OpenMP thread per rank. Prints
# each layout's mean step time (steps after train.rate_skip), its ratio to the single-rank step
# (a perfect split: 0.5) and every rank's fraction of the step spent waiting on messages (ep:
# the all-to-alls; dp: the dense gradients summed over the ep group). Environment: STEPS
# (default 12), MICRO (micro-batches of the single rank, default 4), MODEL (deck overrides);
# FT_BENCH_SMOKE=1: a tiny model and 3 steps (checks that the script runs,
# tests/e2e/bench_smoke.sh).
set -u
if [ "${FT_BENCH_SMOKE:-0}" != 0 ]; then
  : "${STEPS:=3}" "${MODEL:=model.layers=2 model.channels=32 model.heads=2 model.seq_len=16 train.batch=2 model.experts=4 model.top_k=2 model.capacity_factor=1.25}"
fi
FTLLM=${FTLLM:-bin/ftllm}
STEPS=${STEPS:-12}
MICRO=${MICRO:-4}
MODEL=${MODEL:-"model.layers=4 model.channels=256 model.heads=8 model.seq_len=128 train.batch=4 model.experts=8 model.top_k=2 model.capacity_factor=1.25"}
export OMP_NUM_THREADS=1
common="train.steps=$STEPS dmr.mode=off faults.schedule= train.rate_skip=2 train.sample_tokens=0 train.val_batches=0 checkpoint.interval=0 run.threads=1"
declare -A ms waits
run() { # run NAME NP OVERRIDES...
  local name=$1 np=$2; shift 2
  local out
  # shellcheck disable=SC2086
  out=$(mpiexec -n "$np" "$FTLLM" train inputs/default.ini $MODEL $common "$@" 2>&1) || { echo "$out" | tail -5; exit 1; }
  ms[$name]=$(sed -n 's/^summary: .*, \([0-9.]*\) ms\/step.*/\1/p' <<< "$out")
  waits[$name]=$(grep '^\[r[0-9]*\] ' <<< "$out" | sed 's/^/    /')
}
run single 1 parallel.microbatches=$MICRO
run ep2 2 parallel.ep=2 parallel.microbatches=$((MICRO / 2))
for l in single ep2; do
  [ -n "${ms[$l]}" ] || { echo "bench_moe: no summary line (ms/step) from the $l run"; exit 1; }
done
echo "moe model: $MODEL; global batch $MICRO micro-batches, $STEPS steps (first 2 not timed), 1 thread per rank"
printf '%-10s %6s %10s %12s\n' layout ranks "ms/step" "vs 1 rank"
for l in single ep2; do
  np=2; [ "$l" = single ] && np=1
  printf '%-10s %6s %10s %12.3f\n' "$l" "$np" "${ms[$l]}" "$(awk -v a="${ms[$l]}" -v b="${ms[single]}" 'BEGIN{print a/b}')"
  echo "${waits[$l]}"
done
