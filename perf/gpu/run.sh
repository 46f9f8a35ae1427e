#!/bin/bash
# perf/gpu/run.sh BUNDLE: what a person runs on a GPU machine to check and time the CUDA backend;
# it ends with one table. BUNDLE is a gpu-bundle (its folder or its .tar.xz) of a CUDA build,
# made on the build machine with
#   make CUDA=1 cuda-check
#   gpu-bundle build/gpu build/cuda/ftllm build/cuda/tests/gpu/test_gpu_ops \
#       build/cuda/tests/gpu/test_gpu_train build/cuda/tests/gpu/test_gpu_dmr \
#       build/cuda/tests/gpu/test_gpu_nccl build/cuda/perf/gpu/bench_ops
# (gpu-bundle packs binaries with the shared libraries they need, but not CUDA's). Run it from
# the repository root: it reads inputs/default.ini and, when data/ has no token shards, makes
# some from the repository's own text with `ftllm tokenize`.
#
# Steps: unpack; nvidia-smi; the GPU tests (every op against the CPU and on the checker stream,
# short training runs against the CPU, DMR's device checks and a flip campaign on the GPU, the
# NCCL comm backend on one rank);
# then training runs, each printing a summary line that the table quotes:
#   small   inputs/default.ini (L 4, C 128, T 64, B 4), 20 steps, on cpu and on cuda, and on
#           cuda with naive DMR and inputs/default.faults' flips (all caught: the dmr line);
#           then on 2 ranks sharing the GPU (dp 2, pp 2: MPI staged through host memory; dp 2
#           with SPARe r 2 and replica 1 failing halfway), and
#           4 steps on cuda with checkpoints, resumed to 6, against 6 straight (the last losses
#           must be equal)
#   gpt2s   GPT-2 small's shape with the byte vocabulary (L 12, NH 12, C 768, T 1024, B 8),
#           $GPU_STEPS steps on cuda (default 20), $CPU_STEPS on cpu (default 1, its rate from the first step: the baseline)
#   124M    GPT-2 124M as the issue's benchmark (V 50257 padded to 50304, B 16, T 1024),
#           $BENCH_STEPS steps (default 8) on cuda, bf16 (first: what the deadline must not cut)
#           and fp32 (after gpt2s on cuda; run.precision: bf16 GEMM
#           operands, everything else fp32), each with DMR off, full activation checkpointing,
#           naive DMR, planned DMR with full activation checkpointing (and its row against the
#           plan's lower bounds, over the step of DMR off with AC full, the "ac full" row); MFU against the H200's 989 TFLOP/s dense bf16 peak (the issue's anchors
#           use it; the fp32 rows' own peak is far lower); DMR off also with the fp32 tiled
#           attention kernels (FTLLM_CUDA_ATTENTION = flash; the default is gemm, cuBLAS batched
#           GEMMs), and in bf16 DMR off, AC full, naive DMR and planned DMR (against its bound
#           over the tc AC-full step) with the tensor-core ones (= tc); then 3 steps
#           in bf16 with run.log_level = debug, attention by GEMMs and by the tensor-core kernels,
#           whose op table (time per op kind, each op waited for) is printed after its run
#   ops     perf/gpu/bench_ops (when the bundle has it): every op kind alone at GPT-2 124M's
#           shapes in bf16, its time against its floor and its share of a step; then the
#           matmuls alone with the bias in cuBLASLt's epilogue and without (FTLLM_CUDA_LT=0), and
#           attention alone with the tensor-core kernels
# On the lent H200 (the device tool: one command of at most 10 minutes, at most 8 files back
# from $OUT), carry build/gpu.tar.xz and run
#   LOGS_TAR=$OUT/gpu-run-logs.tar.xz perf/gpu/run.sh build/gpu.tar.xz 2>&1 | tee $OUT/run.log
# with timeout_s 590: every step gets at most what is left of $DEADLINE seconds (default 540)
# since the start, so the table and the logs' tarball come back even when a step hangs.
# Every run has DMR off and no faults (the default deck turns both on) unless its row says so.
# Rates leave out the first step (train.rate_skip = 1). Logs go to $LOGS (default
# build/gpu-run/). Exit code 0 when every check passed; a skipped GPU test counts as failed
# here (on a GPU machine a skip means the GPU was not usable).
# perf/gpu/ncu.sh BUNDLE (a separate call) adds Nsight Compute's per-kernel figures for the
# heaviest op kinds (bench_ops' cases: attention, the GEMMs, LayerNorm, cross-entropy, encoder).
# GPU_RUN_SMOKE=1: the same steps at toy sizes (the 124M and gpt2s rows on a 2-layer model of
# width 64 with the same flags, 4 steps for the small rows, only the ops and NCCL tests), for a
# dry run of this script on the CUDA emulator (tests/e2e/cuda_emu.sh, every make test): no
# number it prints means anything, but every row's flags, log lines and checks are exercised.
set -u
DEADLINE=${DEADLINE:-540}
# cap SECONDS: a step's timeout, at most what is left before the deadline (0: none left)
cap() {
  local left=$((DEADLINE - SECONDS - 15))
  [ "$left" -lt 0 ] && left=0
  echo $(("$1" < left ? "$1" : left))
}
bundle=${1:?usage: perf/gpu/run.sh BUNDLE (a gpu-bundle folder or .tar.xz)}
SMOKE=${GPU_RUN_SMOKE:-0}
GPU_STEPS=${GPU_STEPS:-$([ "$SMOKE" = 1 ] && echo 2 || echo 20)}
BENCH_STEPS=${BENCH_STEPS:-$([ "$SMOKE" = 1 ] && echo 2 || echo 8)}
CPU_STEPS=${CPU_STEPS:-1} # the CPU baseline: 36 s a step on the H200 machine's 16 cores
SMALL_STEPS=$([ "$SMOKE" = 1 ] && echo 4 || echo 20)
work=$(mktemp -d "${TMPDIR:-/tmp}/ftllm_gpu_XXXXXX") # the unpacked bundle, the shards
trap 'rm -rf "$work"' EXIT
logs=${LOGS:-build/gpu-run} # every step's log, kept
mkdir -p "$logs"
if [ -f "$bundle" ]; then
  tar -xJf "$bundle" -C "$work" || exit 2
  bundle=$(find "$work" -maxdepth 2 -name env.sh -printf '%h\n' | head -1)
fi
if [ ! -f "$bundle/env.sh" ]; then
  echo "perf/gpu/run.sh: no env.sh in $bundle: not a gpu-bundle" >&2
  exit 2
fi
# shellcheck disable=SC1091
source "$bundle/env.sh"
bin=$bundle/bin
rows=() failed=0

row() { rows+=("$(printf '%-28s | %-40s | %9s | %10s | %8s | %6s | %s' "$@")"); }

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader ||
  echo "(no nvidia-smi)"

echo "== GPU tests"
# the ops and training tests again with the other attention kernels (FTLLM_CUDA_ATTENTION=tc:
# tensor-core tiles under bf16, cuda/ops_attention_tc.cu; =flash: fp32 tiles,
# cuda/ops_attention_flash.cu; =rows: one block per query row, cuda/ops_attention.cu;
# the default is gemm, cuBLAS batched GEMMs, cuda/ops_attention_gemm.cu)
tests="test_gpu_ops test_gpu_train test_gpu_dmr test_gpu_nccl tc:test_gpu_ops tc:test_gpu_train"
tests="$tests flash:test_gpu_ops flash:test_gpu_train rows:test_gpu_ops rows:test_gpu_train"
[ "$SMOKE" = 1 ] && tests="test_gpu_ops test_gpu_nccl tc:test_gpu_ops flash:test_gpu_ops rows:test_gpu_ops"
for t in $tests; do
  if [ "$t" != "${t#*:}" ]; then
    export FTLLM_CUDA_ATTENTION=${t%%:*}
    t=${t#*:}
  else
    unset FTLLM_CUDA_ATTENTION
  fi
  log=$logs/$t${FTLLM_CUDA_ATTENTION:+.$FTLLM_CUDA_ATTENTION}.log
  lim=$(cap 300)
  if [ "$lim" -le 0 ]; then # timeout 0 would mean no limit at all
    failed=$((failed + 1))
    row "$t" "NOT RUN: past the deadline ($DEADLINE s)" "" "" "" "" ""
    continue
  fi
  timeout "$lim" mpiexec -n 1 "$bin/$t" > "$log" 2>&1
  rc=$?
  cat "$log"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  [ "$rc" -ne 0 ] || [ "${f:-0}" -ne 0 ] || [ "${s:-0}" -ne 0 ] && failed=$((failed + 1))
  row "$t${FTLLM_CUDA_ATTENTION:+ ($FTLLM_CUDA_ATTENTION)}" "${p:-0} passed, ${f:-0} failed, ${s:-0} skipped (rc $rc)" "" "" "" "" ""
done
unset FTLLM_CUDA_ATTENTION

echo "== data"
if ! ls data/train_*.bin > /dev/null 2>&1; then
  mkdir -p "$work/data"
  find src include cuda tests perf inputs -type f \( -name '*.[ch]' -o -name '*.cu*' -o \
    -name '*.md' -o -name '*.ini' \) | sort | xargs cat > "$work/data/text.txt"
  "$bin/ftllm" tokenize "$work/data/text.txt" "$work/data/train_000.bin" \
    --val "$work/data/val_000.bin" --val-fraction 0.05 || exit 2
  data="data.train=$work/data/train_*.bin data.val=$work/data/val_*.bin"
else
  data=""
fi

# [np=N] [label=TEXT] train NAME BACKEND STEPS OVERRIDES...: one run on N ranks (default 1); its
# summary (and the faults:
# line of a run with flips, whose every flip must be detected) into the table
train() {
  local name=$1 be=$2 steps=$3; shift 3
  local tag=${label:-plain}
  local log=$logs/$name.$be.${tag//[^a-z0-9]/_}.log
  last_log=$log
  echo "== train $name on $be ($steps steps)"
  local lim
  lim=$(cap 300)
  if [ "$lim" -le 0 ]; then
    failed=$((failed + 1))
    row "train $name" "$be${label:+, $label}: NOT RUN: past the deadline" "" "" "" "" ""
    return
  fi
  # shellcheck disable=SC2086
  timeout "$lim" mpiexec -n "${np:-1}" "$bin/ftllm" train inputs/default.ini $data run.backend="$be" \
    train.steps="$steps" train.rate_skip=1 train.val_batches=0 train.sample_tokens=0 \
    dmr.mode=off faults.schedule= "$@" \
    > "$log" 2>&1
  local rc=$? sum
  tail -n 3 "$log"
  sum=$(grep '^summary:' "$log" | tail -1)
  if [ "$rc" -ne 0 ] || [ -z "$sum" ]; then
    failed=$((failed + 1))
    row "train $name" "$be${label:+, $label}: FAILED (rc $rc, $(basename "$log"))" "" "" "" "" ""
    return
  fi
  local ms tok gf loss mfu dmr
  ms=$(sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p' <<< "$sum")
  tok=$(sed -n 's/.* \([0-9.]*\) tok\/s.*/\1/p' <<< "$sum")
  gf=$(sed -n 's/.* \([0-9.]*\) GFLOP\/s.*/\1/p' <<< "$sum")
  loss=$(sed -n 's/.*loss \([0-9.]* -> [0-9.]*\).*/\1/p' <<< "$sum")
  mfu=$(awk -v g="${gf:-0}" 'BEGIN { printf "%.1f%%", g / 989000 * 100 }')
  # a run with DMR or faults: its counts after the loss (every flip must be caught)
  dmr=$(grep -o 'sdc injected [0-9]*, detected [0-9]*, rolled back [0-9]*, missed [0-9]*' \
    "$log" | tail -1)
  if [ -n "$dmr" ]; then
    loss="$loss; $dmr"
    local inj det
    inj=$(sed -n 's/sdc injected \([0-9]*\),.*/\1/p' <<< "$dmr")
    det=$(sed -n 's/.*detected \([0-9]*\),.*/\1/p' <<< "$dmr")
    if [ "$inj" != "$det" ] || { [[ $label == *flips* ]] && [ "$inj" -eq 0 ]; }; then
      failed=$((failed + 1))
      loss="$loss (FAILED)"
    fi
  fi
  row "train $name" "$be, $steps step$([ "$steps" = 1 ] || echo s)${label:+, $label}" "$ms" "$tok" "$gf" "$mfu" "$loss"
}

ss=$SMALL_STEPS
label="" train small cpu $ss
label="" train small cuda $ss
label="dmr naive + flips" train small cuda $ss dmr.mode=naive faults.schedule=inputs/default.faults
# two ranks on the one GPU, their messages staged through host memory (comm_staged.c)
np=2 label="2 ranks, dp 2, MPI staged" train small cuda $ss parallel.dp=2
np=2 label="2 ranks, pp 2, MPI staged" train small cuda $ss parallel.pp=2 parallel.microbatches=2
# SPARe with the model on the GPU: replica 1 fails halfway, the survivor goes on alone
printf 'fail step=%d replica=1\n' $((ss / 2)) > "$work/spare.faults"
np=2 label="2 ranks, dp 2, SPARe r 2, replica 1 fails" train small cuda $ss parallel.dp=2 \
  spare.r=2 faults.schedule="$work/spare.faults"
# checkpoints of the GPU model (staged through host memory) and a resume from one: the resumed
# run's last loss must be the straight run's
# (a constant learning rate after warm-up, so that 4 steps and 6 share their first 4: the deck's
# cosine schedule spans train.steps)
ck=$work/ckpt const="train.schedule=constant train.warmup=2"
label="ckpt every 2, 4 steps" train small cuda 4 checkpoint.dir="$ck" checkpoint.interval=2 $const
label="resumed to 6" train small cuda 6 checkpoint.dir="$ck" checkpoint.resume=auto $const
label="straight 6" train small cuda 6 $const
last_loss() { grep '^summary:' "$1" 2> /dev/null | tail -1 | sed -n 's/.*loss [0-9.]* -> \([0-9.]*\).*/\1/p'; }
a=$(last_loss "$logs/small.cuda.straight_6.log") b=$(last_loss "$logs/small.cuda.resumed_to_6.log")
if [ -n "$a" ] && [ "$a" = "$b" ]; then
  row "checkpoint + resume on cuda" "step 6 loss $b = the straight run's" "" "" "" "" ""
else
  failed=$((failed + 1))
  row "checkpoint + resume on cuda" "FAILED: step 6 loss '$b', straight '$a'" "" "" "" "" ""
fi
g124="model.layers=12 model.heads=12 model.channels=768 model.seq_len=1024 model.vocab=50257"
g124="$g124 model.vocab_pad=128 train.batch=16"
[ "$SMOKE" = 1 ] && g124="$g124 model.layers=2 model.heads=2 model.channels=64 model.seq_len=64 train.batch=2"
# rows124 PREC: the issue's rows for GPT-2 124M in one precision
rows124() {
  local prec=$1
  # shellcheck disable=SC2086
  label="$prec, dmr off" train 124M cuda "$BENCH_STEPS" $g124 run.precision=$prec
  # shellcheck disable=SC2086
  FTLLM_CUDA_ATTENTION=flash label="$prec, dmr off, flash attention" train 124M cuda \
    "$BENCH_STEPS" $g124 run.precision=$prec
  if [ "$prec" = bf16 ]; then # tc runs under bf16 only (fp32 falls back to gemm)
    # shellcheck disable=SC2086
    FTLLM_CUDA_ATTENTION=tc label="$prec, dmr off, tc attention" train 124M cuda \
      "$BENCH_STEPS" $g124 run.precision=$prec
    # shellcheck disable=SC2086
    FTLLM_CUDA_ATTENTION=tc label="$prec, ac full, tc attention" train 124M cuda \
      "$BENCH_STEPS" $g124 run.precision=$prec train.ac=full
  fi
  # shellcheck disable=SC2086
  label="$prec, ac full" train 124M cuda "$BENCH_STEPS" $g124 run.precision=$prec train.ac=full
  # shellcheck disable=SC2086
  label="$prec, dmr naive" train 124M cuda "$BENCH_STEPS" $g124 run.precision=$prec \
    dmr.mode=naive
  # planned: its first 2 steps are profiled (checked naively), left out of the rate
  # shellcheck disable=SC2086
  label="$prec, dmr planned, ac full" train 124M cuda "$((BENCH_STEPS + 2))" $g124 \
    run.precision=$prec train.ac=full dmr.mode=planned dmr.profile_steps=2 train.rate_skip=3
  local base="$prec, ac full" # DMR off with the planned run's activation checkpointing
  bound_row "$prec" "$last_log" "$logs/124M.cuda.${base//[^a-z0-9]/_}.log"
  [ "$prec" = bf16 ] || return 0
  # the same DMR rows with the tensor-core attention, against its own AC-full row
  # shellcheck disable=SC2086
  FTLLM_CUDA_ATTENTION=tc label="$prec, dmr naive, tc attention" train 124M cuda \
    "$BENCH_STEPS" $g124 run.precision=$prec dmr.mode=naive
  # shellcheck disable=SC2086
  FTLLM_CUDA_ATTENTION=tc label="$prec, dmr planned, ac full, tc attention" train 124M cuda \
    "$((BENCH_STEPS + 2))" $g124 run.precision=$prec train.ac=full dmr.mode=planned \
    dmr.profile_steps=2 train.rate_skip=3
  base="$prec, ac full, tc attention"
  bound_row "$prec, tc" "$last_log" "$logs/124M.cuda.${base//[^a-z0-9]/_}.log"
}
# bound_row PREC PLANNED_LOG BASE_LOG: the planned row's overhead against the step of DMR off
# with the same activation checkpointing (the "ac full" row: issue 10's rule, the same AC
# setting in every row; against DMR off without AC the row would count AC's own cost, +25% on
# the H200, as DMR's), beside the plan's lower bounds (the `dmr: planned: lower bound` line:
# issue 10's, and in time order) over the same base step: issue 12 asks planned DMR on one GPU
# to land within 5 points
ms_of() { grep '^summary:' "$1" 2> /dev/null | tail -1 | sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p'; }
bound_row() {
  local b o off pl
  b=$(sed -n 's/^dmr: planned: lower bound \([0-9.]*\) ms per step.*/\1/p' "$2" 2> /dev/null | tail -1)
  o=$(sed -n 's/^dmr: planned: lower bound .*, \([0-9.]*\) ms in time order.*/\1/p' "$2" 2> /dev/null | tail -1)
  off=$(ms_of "$3") pl=$(ms_of "$2")
  if [ -z "$b" ] || [ -z "$o" ] || [ -z "$off" ] || [ -z "$pl" ]; then
    row "dmr planned vs bound, $1" "not measured (a run missing)" "" "" "" "" ""
    return
  fi
  row "dmr planned vs bound, $1" "$(awk -v b="$b" -v o="$o" -v f="$off" -v p="$pl" 'BEGIN {
    printf "%+.1f%%; bound %.1f%%, in time order %.1f%%", 100 * (p - f) / f, 100 * b / f,
      100 * o / f }')" "$pl" "" "" "" "base (dmr off, ac full) $off ms/step"
}
# bf16 first: the issue's benchmark, and what the deadline must not cut
rows124 bf16
# where a step's time goes, per op kind: run.log_level = debug times each op to its kernels' end
# (a stream wait before and after each: these runs' rates are not the rows' above), and the
# table is printed here as well as kept in the log, so that one run on a GPU says which kernels
# to work on next
for att in gemm tc; do
  # shellcheck disable=SC2086
  FTLLM_CUDA_ATTENTION=$att label="bf16, $att attention, op times (synced)" train 124M cuda 3 \
    $g124 run.precision=bf16 run.log_level=debug
  [ -f "$last_log" ] || continue
  echo "-- op times, 124M bf16, $att attention (each op waited for; all 3 steps)"
  sed -n '/^op  *calls  *ms/,/^time per region/p' "$last_log" | grep -v '^time per region'
done
# each op kind alone at 124M's shapes (bf16): which kernels a step's time is in, against floors
if [ -x "$bin/bench_ops" ]; then
  echo "== ops alone (perf/gpu/bench_ops bf16)"
  shape=""
  [ "$SMOKE" = 1 ] && shape="2 64 64 2 100 2"
  lim=$(cap 120)
  # shellcheck disable=SC2086
  if [ "$lim" -gt 0 ] && timeout "$lim" mpiexec -n 1 "$bin/bench_ops" bf16 $shape > "$logs/bench_ops.log" 2>&1; then
    cat "$logs/bench_ops.log"
    row "ops alone, bf16" "$(sed -n 's/^RESULT bench_ops bf16: //p' "$logs/bench_ops.log")" "" "" "" "" ""
  else
    failed=$((failed + 1))
    cat "$logs/bench_ops.log" 2> /dev/null
    row "ops alone, bf16" "FAILED (bench_ops.log)" "" "" "" "" ""
  fi
  # the matmuls alone with the bias in cuBLASLt's epilogue (the default) and with a fill and a
  # beta-1 GEMM (FTLLM_CUDA_LT=0), one after the other in this run
  for lt in 1 0; do
    lim=$(cap 60)
    # shellcheck disable=SC2086
    if [ "$lim" -gt 0 ] && FTLLM_CUDA_LT=$lt FT_BENCH_ONLY=matmul timeout "$lim" \
      mpiexec -n 1 "$bin/bench_ops" bf16 $shape > "$logs/bench_ops.lt$lt.log" 2>&1; then
      row "matmuls alone, bf16, lt $lt" "$(sed -n 's/^RESULT bench_ops bf16: //p' "$logs/bench_ops.lt$lt.log")" "" "" "" "" ""
    else
      failed=$((failed + 1))
      cat "$logs/bench_ops.lt$lt.log" 2> /dev/null
      row "matmuls alone, bf16, lt $lt" "FAILED (bench_ops.lt$lt.log)" "" "" "" "" ""
    fi
  done
  # attention alone with the tensor-core kernels (cuda/ops_attention_tc.cu)
  lim=$(cap 60)
  # shellcheck disable=SC2086
  if [ "$lim" -gt 0 ] && FTLLM_CUDA_ATTENTION=tc FT_BENCH_ONLY=attention timeout "$lim" \
    mpiexec -n 1 "$bin/bench_ops" bf16 $shape > "$logs/bench_ops.tc.log" 2>&1; then
    cat "$logs/bench_ops.tc.log"
    row "attention alone, bf16, tc" "$(sed -n 's/^RESULT bench_ops bf16: //p' "$logs/bench_ops.tc.log")" "" "" "" "" ""
  else
    failed=$((failed + 1))
    cat "$logs/bench_ops.tc.log" 2> /dev/null
    row "attention alone, bf16, tc" "FAILED (bench_ops.tc.log)" "" "" "" "" ""
  fi
fi
gpt2s="model.layers=12 model.heads=12 model.channels=768 model.seq_len=1024 train.batch=8"
[ "$SMOKE" = 1 ] && gpt2s="$gpt2s model.layers=2 model.heads=2 model.channels=64 model.seq_len=64"
# shellcheck disable=SC2086
label="" train gpt2s cuda "$GPU_STEPS" $gpt2s
rows124 fp32
# shellcheck disable=SC2086
label="" train gpt2s cpu "$CPU_STEPS" $gpt2s train.rate_skip=0 train.warmup=0

echo
printf '%-28s | %-40s | %9s | %10s | %8s | %6s | %s\n' check result ms/step tok/s GFLOP/s \
  MFU "loss first -> last"
printf '%s\n' "${rows[@]}"
echo "verdict: $([ $failed -eq 0 ] && echo OK || echo "FAILED ($failed)") (${SECONDS} s)"
if [ -n "${LOGS_TAR:-}" ]; then
  tar -cJf "$LOGS_TAR" -C "$(dirname "$logs")" "$(basename "$logs")" && echo "logs: $LOGS_TAR"
fi
[ "$failed" -eq 0 ]
