#!/bin/bash
# e2e/cuda.sh: run.backend as a user meets it. A build without CUDA asked for run.backend = cuda
# says so in one line (exit 2). The CUDA build ($FTLLM_CUDA: make CUDA=1; tests/run.sh passes
# it where nvcc exists) says in one line (exit 2) that there is no usable GPU where there is
# none, or trains on the GPU where there is one (and checkpoints it, and resumes from that); it
# trains on several ranks (MPI staged through host memory; on a GPU machine); it refuses what
# the CUDA backend cannot do yet (SPARe) in one line, and trains on the CPU with
# run.backend = cpu.
# run.precision = bf16 without run.backend = cuda is one line (exit 2); on a GPU it trains.
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
    has "cuda build: resumed at step 2" '^verdict: OK \(trained 1 step'
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
  run "cuda build: SPARe refused" 2 "run.backend = cuda: SPARe (spare.r, spare.spares)" \
    2 "$cuda" train $deck $short run.backend=cuda parallel.dp=2 spare.r=2
  if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    run "cuda build without a GPU, checkpoints on: the same one line" 2 \
      "run.backend = cuda: no usable GPU:" 1 "$cuda" train $deck $short run.backend=cuda \
      checkpoint.interval=1
  fi
  run "cuda build: backend=cpu trains" 0 "" 1 "$cuda" train $deck $short
  has "cuda build, cpu: verdict" '^verdict: OK \(trained 2 steps'
fi
e2e_finish
