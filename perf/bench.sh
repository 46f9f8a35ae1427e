#!/bin/bash
# perf/bench.sh BUILD_DIR: runs every benchmark: BUILD_DIR/perf/bench_* binaries (those without
# a perf/bench_*.sh of their name) and perf/bench_*.sh scripts (each prints its own table).
# Benchmarks report ratios measured in the same run against a named baseline; record results
# with the date in perf/README.md.
set -u
build=${1:?usage: perf/bench.sh BUILD_DIR}
status=0
ran=0
for b in "$build"/perf/bench_*; do
  [ -x "$b" ] || continue
  # one with a script of its name runs there, on the ranks it needs (bench_dmr_plan: mpiexec -n 2)
  [ -f "perf/$(basename "$b").sh" ] && continue
  echo "== $(basename "$b")"; "$b" || status=1; ran=$((ran + 1))
done
for s in perf/bench_*.sh; do
  [ -f "$s" ] || continue
  echo "== $(basename "$s")"; bash "$s" "$build" || status=1; ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || echo "bench: no benchmarks yet"
exit $status
