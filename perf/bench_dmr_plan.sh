#!/bin/bash
# perf/bench_dmr_plan.sh [BUILD_DIR]: SpareTrain's ablation (perf/bench_dmr_plan.c) on two ranks,
# pp 2 (plain 1F1B, then with parallel.warmup_extra = 1 in every row) then tp 2, one OpenMP
# thread per rank: step time for DMR off, naive, planned phase 1,
# 1+2, 1+2+3, and 1+2+3 under the paper's rules (dmr.phases = paper) (AC full in every row) as overheads against off, with each rank's lower bound and
# what its windows (pipeline waits and bubbles, the other waits) give. Environment: ROUNDS
# (default 8); FT_BENCH_SMOKE=1: a tiny model, 1 round (tests/e2e/bench_smoke.sh).
set -u
build=${1:-build/release}
export OMP_NUM_THREADS=1
rounds=${ROUNDS:-8}
[ "${FT_BENCH_SMOKE:-0}" != 0 ] && rounds=1
for run in "pp 0" "pp 1" "tp 0"; do
  # shellcheck disable=SC2086
  set -- $run
  mpiexec -n 2 "$build/perf/bench_dmr_plan" "$1" "$rounds" "$2" || exit 1
done
