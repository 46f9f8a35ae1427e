#!/bin/bash
# e2e/cuda_emu.sh: `ftllm train` with run.backend = cuda as on a GPU node, on the CUDA emulator
# ($FTLLM_CUDA_EMU: make CUDA=emu's binary, build/cuda-emu/ftllm; cuda/emu/README.md), so the
# CUDA backend's kernels, cuBLAS calls and device paths run through the command line on every
# machine: perf/gpu/run.sh's small rows, slowly (about 2 s a step of inputs/default.ini).
#  - the default deck on the emulated GPU tracks the CPU run's losses and gradient norms (within
#    1.5e-4 of the 4 decimals printed; the kernels sum in other orders than the CPU);
#  - it names the device; bf16 trains; 4 steps checkpointed and resumed to 6 give the 6
#    straight steps' losses (bitwise: the same kernels on both sides);
#  - 2 ranks sharing the one emulated GPU (dp 2; pp 2): MPI staged through host memory; tp 2
#    and a MoE model on ep 2 give the CPU's step lines;
#  - SPARe on a device model: replica 1 fails and is masked;
#  - the default deck's injected flip is caught and rolled back (naive DMR on the checker
#    stream), and a planned DMR run with full activation checkpointing catches random flips.
# (perf/gpu/run.sh's dry run on the emulator: tests/e2e/gpu_run_emu.sh.)
source tests/e2e/lib.bash

e2e_need_emu
deck=inputs/default.ini
quiet="train.val_batches=0 train.sample_tokens=0 faults.schedule= dmr.mode=off"
step_lines() { # the step lines without their timings
  grep -E '^step +[0-9]+/' "$E2E_TMP/out" | sed -E 's/ *\| +[0-9.]+ ms .*//' > "$1"
}
# close A B: the same number of step lines, each step's loss and norm within 1.5e-4 of the
# other's (printed to 4 decimals: the kernels sum in other orders than the CPU, about 1e-7
# relative apart, which can round to neighbouring last digits: equal strings would be flaky)
close() {
  [ -s "$1" ] && [ "$(wc -l < "$1")" = "$(wc -l < "$2")" ] &&
    paste -d '|' "$1" "$2" | awk -F'|' '{
      split($2, a, " "); split($6, b, " "); split($4, c, " "); split($8, d, " ")
      if (NF != 8 || $1 != $5 || $3 != $7 || (a[2] - b[2]) ^ 2 > 2.25e-8 ||
          (c[2] - d[2]) ^ 2 > 2.25e-8) bad = 1
    } END { exit bad }'
}

# shellcheck disable=SC2086
run "emulator: default deck on the cpu" 0 "" 1 "$emu" train $deck train.steps=3 $quiet
step_lines "$E2E_TMP/cpu.txt"
# shellcheck disable=SC2086
run "emulator: default deck on the emulated GPU" 0 "" 1 "$emu" train $deck train.steps=3 $quiet \
  run.backend=cuda
step_lines "$E2E_TMP/gpu.txt"
grep -q '^backend: cuda: GPU 0 of 1: ftllm CUDA emulator' "$E2E_TMP/err" "$E2E_TMP/out" &&
  ok "emulator: names the device" || bad "emulator: names the device" "$(head -c 300 "$E2E_TMP/err")"
has "emulator: verdict" '^verdict: OK \(trained 3 steps'
[ "$(wc -l < "$E2E_TMP/gpu.txt")" = 3 ] && close "$E2E_TMP/cpu.txt" "$E2E_TMP/gpu.txt" &&
  ok "emulator: losses and norms the cpu's (within 1.5e-4)" ||
  bad "emulator: losses and norms the cpu's (within 1.5e-4)" \
    "$(diff "$E2E_TMP/cpu.txt" "$E2E_TMP/gpu.txt" | head -c 400)"

# shellcheck disable=SC2086
run "emulator: bf16" 0 "" 1 "$emu" train $deck train.steps=2 $quiet run.backend=cuda \
  run.precision=bf16
has "emulator: bf16 verdict" '^verdict: OK \(trained 2 steps'
# the tensor-core attention (cuda/ops_attention_tc.cu: bf16, head size 32 here) through the
# command line, named in the backend line; an unknown kernel name is a one-line error
# shellcheck disable=SC2086
FTLLM_CUDA_ATTENTION=tc run "emulator: bf16, tc attention" 0 "" 1 "$emu" train $deck \
  train.steps=2 $quiet run.backend=cuda run.precision=bf16
has "emulator: tc attention verdict" '^verdict: OK \(trained 2 steps'
grep -q 'attention: tc, tensor-core' "$E2E_TMP/err" "$E2E_TMP/out" &&
  ok "emulator: the backend line names tc" ||
  bad "emulator: the backend line names tc" "$(grep -h '^backend' "$E2E_TMP/err" "$E2E_TMP/out")"
# shellcheck disable=SC2086
FTLLM_CUDA_LT=yes run "emulator: a bad FTLLM_CUDA_LT: one line, exit 2" 2 \
  "FTLLM_CUDA_LT=yes: expected 1 (the default) or 0" 1 "$emu" train $deck train.steps=2 $quiet \
  run.backend=cuda
# the fill and GemmEx instead of cuBLASLt's epilogue (bf16): the same losses within rounding
# shellcheck disable=SC2086
FTLLM_CUDA_LT=0 run "emulator: bf16 without cuBLASLt" 0 "" 1 "$emu" train $deck train.steps=2 \
  $quiet run.backend=cuda run.precision=bf16
grep -q 'matmul bias: a fill (FTLLM_CUDA_LT=0)' "$E2E_TMP/err" "$E2E_TMP/out" &&
  ok "emulator: the backend line says FTLLM_CUDA_LT=0" ||
  bad "emulator: the backend line says FTLLM_CUDA_LT=0" "$(grep -h '^backend' "$E2E_TMP/err" "$E2E_TMP/out")"
# shellcheck disable=SC2086
FTLLM_CUDA_ATTENTION=flashy run "emulator: an unknown FTLLM_CUDA_ATTENTION: one line, exit 2" 2 \
  "FTLLM_CUDA_ATTENTION=flashy: expected gemm (the default), tc, flash or rows" 1 "$emu" train \
  $deck train.steps=2 $quiet run.backend=cuda

# checkpoints on the device model: 4 steps and a resume to 6 meet 6 straight (a constant
# learning rate after warm-up, so the schedule does not depend on train.steps)
six="train.schedule=constant train.warmup=2 run.backend=cuda"
ck=$E2E_TMP/ckpt
# shellcheck disable=SC2086
run "emulator: 6 steps straight" 0 "" 1 "$emu" train $deck train.steps=6 $quiet $six
step_lines "$E2E_TMP/straight.txt"
# shellcheck disable=SC2086
run "emulator: 4 steps, checkpointed" 0 "" 1 "$emu" train $deck train.steps=4 $quiet $six \
  checkpoint.dir="$ck" checkpoint.interval=4
# shellcheck disable=SC2086
run "emulator: resumed to 6" 0 "" 1 "$emu" train $deck train.steps=6 $quiet $six \
  checkpoint.dir="$ck" checkpoint.resume=auto
has "emulator: resumed at step 4" '^resumed from .*: step 4, '
has "emulator: resumed run's verdict" '^verdict: OK \(trained 6 steps'
step_lines "$E2E_TMP/resumed.txt"
[ -s "$E2E_TMP/resumed.txt" ] &&
  diff -q <(tail -2 "$E2E_TMP/straight.txt") "$E2E_TMP/resumed.txt" > /dev/null &&
  ok "emulator: resumed steps 5-6 bitwise the straight run's" ||
  bad "emulator: resumed steps 5-6 bitwise the straight run's" \
    "$(diff <(tail -2 "$E2E_TMP/straight.txt") "$E2E_TMP/resumed.txt" | head -c 400)"

# shellcheck disable=SC2086
run "emulator: 2 ranks (dp 2) on one emulated GPU, MPI staged" 0 "" 2 "$emu" train $deck \
  train.steps=2 $quiet run.backend=cuda parallel.dp=2
has "emulator, dp 2: verdict" '^verdict: OK \(trained 2 steps'
# shellcheck disable=SC2086
run "emulator: 2 ranks (pp 2), MPI staged" 0 "" 2 "$emu" train $deck train.steps=2 $quiet \
  run.backend=cuda parallel.pp=2 parallel.microbatches=2
has "emulator, pp 2: verdict" '^verdict: OK \(trained 2 steps'
# tensor and expert parallelism with the model on the emulated GPU: the CPU's step lines
against_cpu() { # NAME NP DECK ARGS...: the same 2 steps on the cpu and on cuda, step lines equal
  local name=$1 np=$2 dk=$3; shift 3
  # shellcheck disable=SC2086
  run "emulator: $name on the cpu" 0 "" "$np" "$emu" train "$dk" train.steps=2 $quiet "$@"
  step_lines "$E2E_TMP/$name.cpu.txt"
  # shellcheck disable=SC2086
  run "emulator: $name on the emulated GPU" 0 "" "$np" "$emu" train "$dk" train.steps=2 $quiet \
    run.backend=cuda "$@"
  step_lines "$E2E_TMP/$name.gpu.txt"
  [ "$(wc -l < "$E2E_TMP/$name.gpu.txt")" = 2 ] &&
    close "$E2E_TMP/$name.cpu.txt" "$E2E_TMP/$name.gpu.txt" &&
    ok "emulator: $name: the cpu's losses and norms" ||
    bad "emulator: $name: the cpu's losses and norms" \
      "$(diff "$E2E_TMP/$name.cpu.txt" "$E2E_TMP/$name.gpu.txt" | head -c 400)"
}
against_cpu "tp 2" 2 $deck parallel.tp=2
against_cpu "MoE, ep 2" 2 inputs/moe-ep2.ini parallel.dp=1 spare.r=1

printf 'fail step=2 replica=1\n' > "$E2E_TMP/spare.faults"
# shellcheck disable=SC2086
run "emulator: SPARe, replica 1 fails, 2 ranks" 0 "" 2 "$emu" train $deck train.steps=3 \
  train.val_batches=0 train.sample_tokens=0 dmr.mode=off run.backend=cuda parallel.dp=2 \
  spare.r=2 faults.schedule="$E2E_TMP/spare.faults"
has "emulator, SPARe: masked" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;'

# DMR on the device: the default deck's flip (naive), then random flips under planned DMR
run "emulator: the default deck's flip" 0 "" 1 "$emu" train $deck train.steps=4 \
  train.val_batches=0 train.sample_tokens=0 run.backend=cuda
has "emulator: flip caught and rolled back" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 '
echo "sdc-random count=6 seed=5 steps=2-4 target=both" > "$E2E_TMP/rand.faults"
run "emulator: planned DMR, random flips" 0 "" 1 "$emu" train $deck train.steps=4 \
  train.val_batches=0 train.sample_tokens=0 run.backend=cuda dmr.mode=planned train.ac=full \
  parallel.microbatches=2 faults.schedule="$E2E_TMP/rand.faults"
has "emulator: planned DMR caught every flip" '^faults: sdc injected 6, detected 6, rolled back [0-9]+, missed 0 '

e2e_finish
