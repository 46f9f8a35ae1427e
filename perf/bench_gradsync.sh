#!/bin/bash
# perf/bench_gradsync.sh BUILD_DIR: SPARe's shard-keyed gradient reduction against the bucketed
# all-reduce at the same size (bench_gradsync.c), on 2 and 4 ranks, one thread each.
set -u
build=${1:?usage: perf/bench_gradsync.sh BUILD_DIR}
# FT_BENCH_SMOKE=1: 2 ranks and a tiny model only (make test's smoke run)
if [ -n "${FT_BENCH_SMOKE:-}" ]; then
  OMP_NUM_THREADS=1 mpiexec -n 2 "$build/perf/bench_gradsync" 32 || exit 1
  exit 0
fi
for np in 2 4; do
  OMP_NUM_THREADS=1 mpiexec -n "$np" "$build/perf/bench_gradsync" || exit 1
done
