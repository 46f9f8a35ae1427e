#!/bin/bash
# perf/bench_train_ckpt.sh [BUILD_DIR]: the training stall of asynchronous checkpoints in a real
# `ftllm train` run, against synchronous ones in the same run of this script: the same model and
# steps, a checkpoint every 2 steps, then the seconds the training loop spent in checkpoint code
# ("checkpoints: N written, the training loop spent X s in them") and the mean step time of each.
# Prints async stall / sync stall (lower is better) and the step-time ratio (the background write
# competes for the cores). Environment: NP (ranks, default 1), STEPS (default 10), MODEL (deck
# overrides of the model shape); FT_BENCH_SMOKE=1: a tiny model and 4 steps (checks that the
# script runs, tests/e2e/bench_smoke.sh).
set -u
if [ "${FT_BENCH_SMOKE:-0}" != 0 ]; then
  : "${STEPS:=4}" "${MODEL:=model.layers=2 model.channels=32 model.heads=2 model.seq_len=16 train.batch=2}"
fi
FTLLM=${FTLLM:-bin/ftllm}
NP=${NP:-1}
STEPS=${STEPS:-10}
MODEL=${MODEL:-"model.layers=4 model.channels=512 model.heads=8"}
d=$(mktemp -d "${TMPDIR:-/tmp}/ft_bench_train_ckpt_XXXXXX")
trap 'rm -rf "$d"' EXIT
common="train.steps=$STEPS dmr.mode=off faults.schedule= train.sample_tokens=0 train.val_batches=0 checkpoint.interval=2 checkpoint.keep=1 checkpoint.dir=$d run.name=bench"
declare -A stall step nck mb
for mode in sync async; do
  async=false; [ "$mode" = async ] && async=true
  # shellcheck disable=SC2086
  out=$(mpiexec -n "$NP" "$FTLLM" train inputs/default.ini $MODEL $common checkpoint.async=$async 2>&1) || { echo "$out" | tail -5; exit 1; }
  stall[$mode]=$(sed -n 's/^checkpoints: \([0-9]*\) written, the training loop spent \([0-9.]*\) s.*/\2/p' <<< "$out")
  nck[$mode]=$(sed -n 's/^checkpoints: \([0-9]*\) written.*/\1/p' <<< "$out")
  step[$mode]=$(sed -n 's/^summary: .*, \([0-9.]*\) ms\/step.*/\1/p' <<< "$out")
  mb[$mode]=$(du -m "$d"/bench.step-*.h5 | awk '{print $1}' | head -1)
  rm -f "$d"/bench.step-*
  [ -n "${stall[$mode]}" ] && [ -n "${nck[$mode]}" ] && [ -n "${step[$mode]}" ] ||
    { echo "bench_train_ckpt: no checkpoint or summary line from the $mode run"; exit 1; }
done
echo "model: $MODEL; $STEPS steps, a checkpoint every 2 (+ the end), $NP rank(s); checkpoint ${mb[sync]} MB"
printf '%-6s %11s %13s %14s %12s\n' mode checkpoints "stall total s" "stall/ckpt ms" "ms/step"
for mode in sync async; do
  printf '%-6s %11s %13s %14.1f %12s\n' "$mode" "${nck[$mode]}" "${stall[$mode]}" \
    "$(awk -v s="${stall[$mode]}" -v n="${nck[$mode]}" 'BEGIN{print 1000*s/n}')" "${step[$mode]}"
done
awk -v a="${stall[async]}" -v s="${stall[sync]}" -v ta="${step[async]}" -v ts="${step[sync]}" \
  'BEGIN{printf "async stall / sync stall = %.3f; step time async / sync = %.3f\n", a/s, ta/ts}'
