#!/bin/bash
# e2e/gpu_run_emu.sh: perf/gpu/run.sh, the script a GPU session runs in its few minutes of device
# time, dry-run at toy sizes (GPU_RUN_SMOKE=1) on the CUDA emulator's binaries ($FTLLM_CUDA_EMU:
# build/cuda-emu/ftllm and its tests/gpu/, laid out as a gpu-bundle's folder), so a broken row,
# flag or check shows here rather than on the GPU: its verdict, and the rows of each kind
# (about 3 minutes).
source tests/e2e/lib.bash

e2e_need_emu
fb=$E2E_TMP/bundle
mkdir -p "$fb/bin" && : > "$fb/env.sh"
for b in ftllm tests/gpu/test_gpu_ops tests/gpu/test_gpu_train tests/gpu/test_gpu_dmr \
  tests/gpu/test_gpu_nccl perf/gpu/bench_ops; do
  ln -s "$(cd "$(dirname "$emu")" && pwd)/$b" "$fb/bin/$(basename "$b")"
done
GPU_RUN_SMOKE=1 DEADLINE=840 LOGS=$E2E_TMP/gpu-run timeout 860 perf/gpu/run.sh "$fb" > "$E2E_TMP/gpurun" 2>&1
rc=$?
grep -q '^verdict: OK' "$E2E_TMP/gpurun" && [ $rc = 0 ] &&
  ok "emulator: perf/gpu/run.sh dry run passes" ||
  bad "emulator: perf/gpu/run.sh dry run passes" "rc $rc: $(tail -c 1500 "$E2E_TMP/gpurun")"
# every test of test_gpu_ops passes: the count is read from its source, so adding a test
# there does not need an edit here
nops=$(sed -n '/^FT_TEST_MAIN(/,/)$/p' tests/gpu/test_gpu_ops.c | grep -o 'cmocka_unit_test(' | wc -l)
for want in "^test_gpu_ops \\(flash\\) +\\| $nops passed, 0 failed, 0 skipped" \
  '^train small +\| cuda, 4 steps, dmr naive \+ flips .*sdc injected 1, detected 1, rolled back 1, missed 0' \
  '^checkpoint \+ resume on cuda +\| step 6 loss [0-9.]+ = the straight run' \
  '^dmr planned vs bound, bf16 +\| [+-][0-9]+\.[0-9]%; bound [0-9.]+%, in time order [0-9.]+%.*base \(dmr off, ac full\) [0-9.]+ ms/step' \
  '^dmr planned vs bound, fp32 +\| [+-][0-9]+\.[0-9]%' '^train gpt2s +\| cpu, 1 step +\| +[0-9.]+ \| +[0-9.]+ ' \
  '^ops alone, bf16 +\| a step.s ops one after another [0-9.]+ ms \([0-9]+ tok/s\)' \
  '^test_gpu_ops \(rows\) +\| [0-9]+ passed, 0 failed, 0 skipped' \
  "^test_gpu_ops \\(tc\\) +\\| $nops passed, 0 failed, 0 skipped" \
  '^train 124M +\| cuda, [0-9]+ steps, bf16, dmr off, tc attention +\| +[0-9.]+ \| +[0-9.]+ ' \
  '^train 124M +\| cuda, [0-9]+ steps, bf16, ac full, tc attention +\| +[0-9.]+ ' \
  "^attention alone, bf16, tc +\\| the cases with 'attention' [0-9.]+ ms of a step" \
  "^matmuls alone, bf16, lt 1 +\\| the cases with 'matmul' [0-9.]+ ms of a step" \
  "^matmuls alone, bf16, lt 0 +\\| the cases with 'matmul' [0-9.]+ ms of a step" \
  '^dmr planned vs bound, bf16, tc +\| [+-][0-9]+\.[0-9]%; bound [0-9.]+%, in time order [0-9.]+%.*base \(dmr off, ac full\) [0-9.]+ ms/step' \
  '^train 124M +\| cuda, [0-9]+ steps, bf16, dmr naive, tc attention +\| +[0-9.]+ '; do
  grep -Eq "$want" "$E2E_TMP/gpurun" && ok "emulator: run.sh row /$want/" ||
    bad "emulator: run.sh row /$want/" "not in its table: $(grep -E '^(dmr|train|checkpoint|test_gpu)' "$E2E_TMP/gpurun" | head -20)"
done
# the planned row's overhead is signed: on a loaded machine (or a quick GPU) the planned run can
# come out faster than the off run, and once printed '+-1.2%' (a 2026-12-04 CI run, emulator)
grep -q '+-' "$E2E_TMP/gpurun" && bad "emulator: no '+-' in the table" "$(grep -- '+-' "$E2E_TMP/gpurun")" ||
  ok "emulator: no '+-' in the table"
e2e_finish
