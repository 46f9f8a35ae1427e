#!/bin/bash
# e2e/cuda.sh: run.backend as a user meets it. A build without CUDA asked for run.backend = cuda
# says so in one line (exit 2). The CUDA build ($FTLLM_CUDA: make CUDA=1; tests/run.sh passes
# it where nvcc exists) says in one line (exit 2) that there is no usable GPU where there is
# none, or trains on the GPU where there is one (and checkpoints it, and resumes from that); it
# trains on several ranks (MPI staged through host memory; on a GPU machine), with SPARe too, and
# trains on the CPU with run.backend = cpu.
# run.precision = bf16 without run.backend = cuda is one line (exit 2); on a GPU (and on the
# stand-in device, whose GEMMs round their operands to bf16) it trains.
# With FTLLM_TEST_DEVICE=standin the CPU build's run.backend = cuda trains on the stand-in device
# (below): 1 and 2 ranks, checkpoints, DMR, SPARe (make run's deck; dp 2 x ep 2 with a
# failure), bitwise the CPU's.
source tests/e2e/lib.bash

deck=inputs/default.ini
short="train.steps=2 train.val_batches=0 train.sample_tokens=0"
cuda=${FTLLM_CUDA:-}

# shellcheck disable=SC2086
run "cpu-only build: backend=cuda" 2 \
  "run.backend = cuda: this ftllm was built without the CUDA backend" \
  1 "$FTLLM" train $deck $short run.backend=cuda
run "unknown backend" 2 "run.backend" 1 "$FTLLM" train $deck $short run.backend=tpu
run "bf16 on the cpu backend" 2 "run.precision = bf16 needs run.backend = cuda" \
  1 "$FTLLM" train $deck $short run.precision=bf16
run "unknown precision" 2 "run.precision: expected one of fp32|bf16" \
  1 "$FTLLM" train $deck $short run.precision=fp16

# The CUDA run's paths of the command line without a GPU: FTLLM_TEST_DEVICE=standin gives
# run.backend = cuda the stand-in device (backend_standin: the CPU backend posing as a GPU), in
# this build. The model, checkpoints, messages, DMR's checks and the sample then go through the
# device paths (host staging), and every result must be the CPU run's, bitwise.
sd="env FTLLM_TEST_DEVICE=standin"
# (a constant learning rate after warm-up: 4 steps and a resume to 6 then meet 6 straight)
six="train.steps=6 train.val_every=3 train.sample_tokens=24 faults.schedule= dmr.mode=off"
six="$six train.schedule=constant train.warmup=2"
lines_of() { # the run's loss, validation, sample and summary lines without their timings
  { grep -E '^step +[0-9]+/|^summary: ' "$E2E_TMP/out"; sed -n '/^sample (/,+1p' "$E2E_TMP/out"; } |
    sed -E 's/ *\| +[0-9.]+ ms .*//; s/, [0-9.]+ ms\/step.*//' > "$1"
}
cpu_run() { # NAME NP ARGS...: the CPU run, its weights in $E2E_TMP/NAME.cpu.bin
  local name=$1 np=$2; shift 2
  # shellcheck disable=SC2086
  run "stand-in: $name on the cpu" 0 "" "$np" "$FTLLM" train $deck $six "$@" \
    ${nosave:-run.save_model="$E2E_TMP/$name.cpu.bin"}
  lines_of "$E2E_TMP/$name.cpu.txt"
}
dev_run() { # NAME NP ARGS...: the same on the stand-in device, compared with the CPU run
  local name=$1 np=$2; shift 2
  # shellcheck disable=SC2086
  run "stand-in: $name on the stand-in device" 0 "" "$np" $sd "$FTLLM" train $deck $six \
    run.backend=cuda "$@" ${nosave:-run.save_model="$E2E_TMP/$name.dev.bin"}
  lines_of "$E2E_TMP/$name.dev.txt"
  if [ ! -e "$E2E_TMP/$name.cpu.bin" ]; then # a sharded layout saves none (the unit tests
    :                                        # compare its state: tests/test_staged.c)
  elif cmp -s "$E2E_TMP/$name.cpu.bin" "$E2E_TMP/$name.dev.bin"; then
    ok "stand-in: $name: weights bitwise the cpu's"
  else bad "stand-in: $name: weights bitwise the cpu's" "the saved weights differ"; fi
  if [ -s "$E2E_TMP/$name.dev.txt" ] &&
    diff -q "$E2E_TMP/$name.cpu.txt" "$E2E_TMP/$name.dev.txt" > /dev/null; then
    ok "stand-in: $name: losses, validation and sample the cpu's"
  else
    bad "stand-in: $name: losses, validation and sample the cpu's" \
      "$(diff "$E2E_TMP/$name.cpu.txt" "$E2E_TMP/$name.dev.txt" | head -c 600)"
  fi
}
cpu_run one 1
dev_run one 1
grep -q '^warning: FTLLM_TEST_DEVICE=standin: run.backend = cuda runs on the stand-in' \
  "$E2E_TMP/err" && ok "stand-in: says so" ||
  bad "stand-in: says so" "no warning in: $(head -c 300 "$E2E_TMP/err")"
cpu_run dp2 2 parallel.dp=2
dev_run dp2 2 parallel.dp=2
cpu_run pp2 2 parallel.pp=2 parallel.microbatches=2
dev_run pp2 2 parallel.pp=2 parallel.microbatches=2
cpu_run tp2 2 parallel.tp=2
dev_run tp2 2 parallel.tp=2
# MoE, ep 2 (no run.save_model: a mixture of experts is saved by checkpoints)
moe="model.experts=4 model.top_k=2 parallel.ep=2 train.sample_tokens=0"
# shellcheck disable=SC2086
nosave=run.save_model= cpu_run ep2 2 $moe
# shellcheck disable=SC2086
nosave=run.save_model= dev_run ep2 2 $moe
# SPARe with ep 2 (dp 2 x ep 2): replica 1 fails; a shard's dense gradient summed over the ep
# ranks on the backend, then in shard order
printf 'fail step=3 replica=1\n' > "$E2E_TMP/ep2_spare.faults"
ep2sp="parallel.dp=2 spare.r=2 faults.schedule=$E2E_TMP/ep2_spare.faults"
# shellcheck disable=SC2086
nosave=run.save_model= cpu_run ep2_spare 4 $moe $ep2sp
# shellcheck disable=SC2086
nosave=run.save_model= dev_run ep2_spare 4 $moe $ep2sp
has "stand-in: SPARe ep 2: masked" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;'
# checkpoints staged from the device: 4 steps with checkpoints, resumed to 6, against 6 straight
ck=$E2E_TMP/standin_ckpt
# shellcheck disable=SC2086
run "stand-in: 4 steps with checkpoints" 0 "" 1 $sd "$FTLLM" train $deck $six run.backend=cuda \
  train.steps=4 train.sample_tokens=0 checkpoint.dir="$ck" checkpoint.interval=2
# shellcheck disable=SC2086
run "stand-in: resumed to 6" 0 "" 1 $sd "$FTLLM" train $deck $six run.backend=cuda \
  checkpoint.dir="$ck" checkpoint.resume=auto run.save_model="$E2E_TMP/resumed.bin"
grep -q 'resumed from .*: step 4' "$E2E_TMP/out" "$E2E_TMP/err" && ok "stand-in: resumed at step 4" ||
  bad "stand-in: resumed at step 4" "no 'resumed from ...: step 4'"
has "stand-in: resumed run's verdict" '^verdict: OK \(trained 6 steps'
cmp -s "$E2E_TMP/one.cpu.bin" "$E2E_TMP/resumed.bin" &&
  ok "stand-in: resumed run bitwise the straight one" ||
  bad "stand-in: resumed run bitwise the straight one" "weights differ"
# DMR on the device: the default deck's flip (naive), and a planned pp 2 campaign
# shellcheck disable=SC2086
run "stand-in: the default deck's flip" 0 "" 1 $sd "$FTLLM" train $deck train.steps=5 \
  train.val_batches=0 train.sample_tokens=0 run.backend=cuda
has "stand-in: flip caught and rolled back" \
  '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 '
echo "sdc-random count=10 seed=9 steps=3-6 target=both" > "$E2E_TMP/standin.faults"
# shellcheck disable=SC2086
run "stand-in: planned pp 2 campaign" 0 "" 2 $sd "$FTLLM" train $deck train.steps=6 \
  train.val_batches=0 train.sample_tokens=0 run.backend=cuda parallel.pp=2 \
  parallel.microbatches=4 train.ac=full dmr.mode=planned dmr.profile_steps=2 \
  faults.schedule="$E2E_TMP/standin.faults"
has "stand-in: planned campaign all caught" \
  '^faults: sdc injected 10, detected 10, rolled back 10, missed 0 '
# ftllm plan profiles on the device and writes the plan files; a planned run loads them
# shellcheck disable=SC2086
run "stand-in: ftllm plan" 0 "" 2 $sd "$FTLLM" plan $deck run.backend=cuda parallel.pp=2 \
  parallel.microbatches=4 train.ac=full dmr.plan="$E2E_TMP/standin.plan"
[ -s "$E2E_TMP/standin.plan.r0" ] && [ -s "$E2E_TMP/standin.plan.r1" ] &&
  ok "stand-in: plan files written" || bad "stand-in: plan files written" "$(ls "$E2E_TMP")"
# shellcheck disable=SC2086
run "stand-in: planned run from the plan files" 0 "" 2 $sd "$FTLLM" train $deck train.steps=6 \
  train.val_batches=0 train.sample_tokens=0 run.backend=cuda parallel.pp=2 \
  parallel.microbatches=4 train.ac=full dmr.mode=planned dmr.plan="$E2E_TMP/standin.plan" \
  faults.schedule="$E2E_TMP/standin.faults"
has "stand-in: the plan's run, all caught" \
  '^faults: sdc injected 10, detected 10, rolled back 10, missed 0 '
# run.precision = bf16 (the stand-in's GEMMs round their operands to bf16, as cuBLAS's): two
# runs the same bytes, not fp32's but near them, a checkpoint resume bitwise the straight run,
# and the default deck's flip caught
bf="run.backend=cuda run.precision=bf16"
for k in 1 2; do
  # shellcheck disable=SC2086
  run "stand-in: bf16 run $k" 0 "" 1 $sd "$FTLLM" train $deck $six $bf \
    run.save_model="$E2E_TMP/bf16.$k.bin"
done
lines_of "$E2E_TMP/bf16.txt"
cmp -s "$E2E_TMP/bf16.1.bin" "$E2E_TMP/bf16.2.bin" && ok "stand-in: bf16: two runs bitwise" ||
  bad "stand-in: bf16: two runs bitwise" "the saved weights differ"
! cmp -s "$E2E_TMP/bf16.1.bin" "$E2E_TMP/one.cpu.bin" && ok "stand-in: bf16: not fp32's weights" ||
  bad "stand-in: bf16: not fp32's weights" "bitwise fp32's: the GEMMs did not round"
last_loss() { sed -n 's/^summary: .*loss [0-9.]* -> \([0-9.]*\).*/\1/p' "$1"; }
a=$(last_loss "$E2E_TMP/one.cpu.txt") b=$(last_loss "$E2E_TMP/bf16.txt")
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-2 * a) }' &&
  ok "stand-in: bf16: last loss $b within 1% of fp32's $a" ||
  bad "stand-in: bf16: last loss within 1% of fp32's" "bf16 '$b', fp32 '$a'"
ck=$E2E_TMP/standin_bf16_ckpt
# shellcheck disable=SC2086
run "stand-in: bf16, 4 steps with checkpoints" 0 "" 1 $sd "$FTLLM" train $deck $six $bf \
  train.steps=4 train.sample_tokens=0 checkpoint.dir="$ck" checkpoint.interval=2
# shellcheck disable=SC2086
run "stand-in: bf16, resumed to 6" 0 "" 1 $sd "$FTLLM" train $deck $six $bf \
  checkpoint.dir="$ck" checkpoint.resume=auto run.save_model="$E2E_TMP/bf16.resumed.bin"
cmp -s "$E2E_TMP/bf16.1.bin" "$E2E_TMP/bf16.resumed.bin" &&
  ok "stand-in: bf16: resumed run bitwise the straight one" ||
  bad "stand-in: bf16: resumed run bitwise the straight one" "weights differ"
# shellcheck disable=SC2086
run "stand-in: bf16, the default deck's flip" 0 "" 1 $sd "$FTLLM" train $deck train.steps=5 \
  train.val_batches=0 train.sample_tokens=0 $bf
has "stand-in: bf16: flip caught and rolled back" \
  '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 '
# SPARe with a device model: make run's deck (inputs/system.ini, 4 ranks: a flip caught, a hot
# spare takes a failed replica's place with the state copied from a live one, a failure masked,
# a wipe-out answered by an in-process restart from the checkpoint of step 10) on the cpu and on
# the stand-in device: the same losses, the same events, the same weights
sys_run() { # NAME OVERRIDES...: inputs/system.ini ($launch before ftllm), its step and event
  local name=$1; shift #          lines in $E2E_TMP/sys.NAME.txt, its weights in sys.NAME.bin
  # shellcheck disable=SC2086
  run "stand-in: make run's deck on the $name" 0 "" 4 $launch "$FTLLM" train inputs/system.ini \
    train.sample_tokens=0 checkpoint.dir="$E2E_TMP/sys_$name" run.save_model="$E2E_TMP/sys.$name.bin" "$@"
  { grep -E '^step +[0-9]+/' "$E2E_TMP/out" | sed -E 's/ *\| +[0-9.]+ ms .*//'
    grep -E '^(spare|faults): ' "$E2E_TMP/out" | sed -E 's/time lost: .*//; s/restored [^:]*:/restored:/'
  } > "$E2E_TMP/sys.$name.txt"
}
launch= sys_run cpu
launch=$sd sys_run device run.backend=cuda
grep -q '^spare: restarted in-process from the checkpoint of step 10' "$E2E_TMP/sys.device.txt" &&
  grep -q '^spare: replica 1 failed before step 8: hot spare 0' "$E2E_TMP/sys.device.txt" &&
  grep -q '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 ' "$E2E_TMP/sys.device.txt" &&
  ok "stand-in: SPARe: spare joined, restart, flip caught" ||
  bad "stand-in: SPARe: spare joined, restart, flip caught" "$(head -c 600 "$E2E_TMP/sys.device.txt")"
diff -q "$E2E_TMP/sys.cpu.txt" "$E2E_TMP/sys.device.txt" > /dev/null &&
  ok "stand-in: SPARe: losses and events the cpu's" ||
  bad "stand-in: SPARe: losses and events the cpu's" \
    "$(diff "$E2E_TMP/sys.cpu.txt" "$E2E_TMP/sys.device.txt" | head -c 600)"
cmp -s "$E2E_TMP/sys.cpu.bin" "$E2E_TMP/sys.device.bin" && ok "stand-in: SPARe: weights bitwise the cpu's" ||
  bad "stand-in: SPARe: weights bitwise the cpu's" "the saved weights differ"

if [ -z "$cuda" ] || [ ! -x "$cuda" ]; then
  echo "SKIP: no CUDA build to check (FTLLM_CUDA is empty: no nvcc, or run outside make test)"
else
  if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    run "cuda build: trains on the GPU" 0 "" 1 "$cuda" train $deck $short run.backend=cuda
    has "cuda build: verdict" '^verdict: OK \(trained 2 steps'
    run "cuda build: trains in bf16 on the GPU" 0 "" 1 "$cuda" train $deck $short \
      run.backend=cuda run.precision=bf16
    has "cuda build, bf16: verdict" '^verdict: OK \(trained 2 steps'
    ck=$(mktemp -d "${TMPDIR:-/tmp}/ftllm_cuda_ckpt_XXXXXX")
    run "cuda build: checkpoints on the GPU" 0 "" 1 "$cuda" train $deck $short run.backend=cuda \
      checkpoint.dir="$ck" checkpoint.interval=1
    run "cuda build: resumes on the GPU" 0 "" 1 "$cuda" train $deck $short train.steps=3 \
      run.backend=cuda checkpoint.dir="$ck" checkpoint.resume=auto
    has "cuda build: resumed at step 2" '^resumed from .*: step 2, '
    has "cuda build: resumed run's verdict" '^verdict: OK \(trained 3 steps'
    rm -rf "$ck"
  else
    run "cuda build without a GPU: one line, exit 2" 2 "run.backend = cuda: no usable GPU:" \
      1 "$cuda" train $deck $short run.backend=cuda
  fi
  if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    run "cuda build: 2 ranks (dp 2) on the node's GPUs, MPI staged" 0 "" 2 "$cuda" train $deck \
      $short run.backend=cuda parallel.dp=2
    has "cuda build, dp 2: verdict" '^verdict: OK \(trained 2 steps'
    run "cuda build: 2 ranks (pp 2), MPI staged" 0 "" 2 "$cuda" train $deck $short \
      run.backend=cuda parallel.pp=2 parallel.microbatches=2
    has "cuda build, pp 2: verdict" '^verdict: OK \(trained 2 steps'
  else
    run "cuda build without a GPU, 2 ranks: one line" 2 "run.backend = cuda: no usable GPU:" \
      2 "$cuda" train $deck $short run.backend=cuda parallel.dp=2
  fi
  if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    printf 'fail step=2 replica=1\n' > "$E2E_TMP/gpu_spare.faults"
    run "cuda build: SPARe, replica 1 fails, 2 ranks" 0 "" 2 "$cuda" train $deck $short \
      run.backend=cuda parallel.dp=2 spare.r=2 faults.schedule="$E2E_TMP/gpu_spare.faults"
    has "cuda build, SPARe: masked" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;'
  else
    run "cuda build without a GPU, SPARe on: the same one line" 2 \
      "run.backend = cuda: no usable GPU:" 2 "$cuda" train $deck $short run.backend=cuda \
      parallel.dp=2 spare.r=2
  fi
  if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    run "cuda build without a GPU, checkpoints on: the same one line" 2 \
      "run.backend = cuda: no usable GPU:" 1 "$cuda" train $deck $short run.backend=cuda \
      checkpoint.interval=1
  fi
  run "cuda build: backend=cpu trains" 0 "" 1 "$cuda" train $deck $short
  has "cuda build, cpu: verdict" '^verdict: OK \(trained 2 steps'
fi
e2e_finish
