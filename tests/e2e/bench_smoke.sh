#!/bin/bash
# e2e/bench_smoke.sh: every benchmark once in smoke mode (FT_BENCH_SMOKE=1: tiny sizes, about a
# second each), so a benchmark that no longer builds, aborts or loses its result line fails
# `make test` instead of waiting for someone's `make bench`. Covers every perf/bench_*.c binary
# (from $FTLLM_BUILD/perf, default build/release; a missing one fails) and every perf/bench_*.sh
# script; each must exit 0 within $BENCH_TIMEOUT s (default 120) and print its result line
# (the pattern below, or any output for a benchmark not listed). The numbers mean nothing here.
set -u
source tests/e2e/lib.bash
build=${FTLLM_BUILD:-build/release}
export FT_BENCH_SMOKE=1 OMP_NUM_THREADS=1 FTLLM FT_BENCH_DIR=$E2E_TMP/bench-ckpt

# result_line NAME: the line a run of benchmark NAME must print (grep -E)
result_line() {
  case $1 in
    bench_train) echo '^RESULT ac none: [0-9.]+ ms/step.* of the sgemm rate' ;;
    bench_ckpt) echo 'write ratio checkpoint/plain bandwidth: best [0-9.]+' ;;
    bench_data) echo '^ratio = loader time / memcpy time' ;;
    bench_sim) echo '^exponential, one clock per replica +2 trials' ;;
    bench_parallel) echo '^tp2 +2 +[0-9.]+ +[0-9.]+$' ;;
    bench_moe) echo '^ep2 +2 +[0-9.]+ +[0-9.]+$' ;;
    bench_train_ckpt) echo '^async stall / sync stall = [0-9.]+' ;;
    bench_dmr) echo '^RESULT naive vs off: [0-9.]+x' ;;
    bench_dmr_plan) echo '^RESULT tp2: naive [-+][0-9.]+%, phase 1 [-+][0-9.]+%, .*lower bound [0-9.]+%' ;;
    bench_law) echo '\| pred +[0-9.]+ h sim +[0-9.]+ \+- +[0-9.]+ .* err +[-+][0-9.]+%' ;;
    bench_gradsync) echo '^P 2, C +[0-9]+, .* ratio [0-9.]+; results bitwise equal' ;;
    bench_ulfm) echo '^MPICH-injected +- +- +[0-9.]+ +[0-9.]+ +[0-9.]+' ;;
    bench_spare) echo '^RESULT r [0-9] vs r 1: [0-9.]+x' ;;
    bench_fingerprint) echo '^RESULT 1 MiB: fingerprint / memcpy [0-9.]+, checksum / memcpy [0-9.]+' ;;
    *) echo . ;;
  esac
}

# bench NAME CMD...: one benchmark, its exit code and its result line
bench() {
  local name=$1 t0=$SECONDS rc; shift
  timeout "${BENCH_TIMEOUT:-120}" "$@" > "$E2E_TMP/out" 2> "$E2E_TMP/err"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    bad "$name" "exit code $rc; last lines: $(tail -n 5 "$E2E_TMP/out" "$E2E_TMP/err" | head -c 800)"
  elif ! grep -qE -- "$(result_line "$name")" "$E2E_TMP/out"; then
    bad "$name" "no line /$(result_line "$name")/ in: $(tail -c 600 "$E2E_TMP/out")"
  else
    ok "$name ($((SECONDS - t0)) s)"
  fi
}

n=0
for src in perf/bench_*.c; do
  name=$(basename "$src" .c) n=$((n + 1))
  if [ -f "perf/$name.sh" ]; then continue; fi # its script runs it (under mpiexec), below
  if [ -x "$build/perf/$name" ]; then bench "$name" mpiexec -n 1 "$build/perf/$name"
  else bad "$name" "$build/perf/$name is not built (make $build/perf/$name)"; fi
done
for s in perf/bench_*.sh; do
  n=$((n + 1))
  bench "$(basename "$s" .sh)" bash "$s" "$build"
done
[ "$n" -gt 0 ] && ok "found $n benchmarks" || bad "benchmarks" "none found in perf/"
e2e_finish
