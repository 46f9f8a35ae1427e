#!/bin/bash
# tests/run.sh BUILD_DIR SAN_BINARY: runs every test suite and ends with
# "N passed, N failed, N skipped".
#  - cmocka binaries BUILD_DIR/tests/test_*, each under mpiexec with the rank counts named in its
#    source ("ft-test: ranks 1 2 4"), one OpenMP thread per rank, under timeout (a hang fails);
#  - the CUDA build, where FTLLM_CUDA_BUILD names its folder (make test sets it where nvcc
#    exists): its compilation (make's exit code in build.rc, log in build.log) counts as one
#    check, and its GPU tests (tests/gpu/) run like the others (they skip without a GPU);
#  - tests/e2e/*.sh, end-to-end checks of bin/ftllm (and of the sanitizer build SAN_BINARY; of
#    the CUDA build's binary as FTLLM_CUDA when there is one); they get BUILD_DIR as FTLLM_BUILD
#    (bench_smoke.sh runs BUILD_DIR/perf/bench_* in smoke mode).
set -u
build=${1:?usage: tests/run.sh BUILD_DIR SAN_BINARY}
san=${2:-}
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
passed=0 failed=0 skipped=0
logdir=$build/test-logs
mkdir -p "$logdir"

count() { # count LOG RC NAME: add cmocka's (or the e2e script's) tallies from LOG
  local log=$1 rc=$2 name=$3 p f s
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  p=${p:-0} f=${f:-0} s=${s:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1; echo "FAIL $name: exit code $rc with no test failure reported (crash or timeout?)"
  fi
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  if [ "$f" -ne 0 ]; then
    echo "---- $name: $f failed; log $log ----"; tail -n 40 "$log"
  fi
  printf '%-40s %3d passed, %d failed, %d skipped  (%d s)\n' "$name" "$p" "$f" "$s" "$((SECONDS - t0))"
}

run_tests() { # run_tests DIR SRCDIR: every DIR/test_* under the rank counts its source names
  local bin name ranks n log
  for bin in "$1"/test_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    ranks=$(sed -n 's/.*ft-test: ranks \([0-9 ]*\).*/\1/p' "$2/$name.c" | head -1)
    for n in ${ranks:-1}; do
      log=$logdir/$name.np$n.log
      t0=$SECONDS
      timeout 300 mpiexec -n "$n" "$bin" > "$log" 2>&1
      count "$log" $? "$name (np $n)"
    done
  done
}

run_tests "$build/tests" tests

cuda=${FTLLM_CUDA_BUILD:-}
if [ -n "$cuda" ]; then
  t0=$SECONDS
  log=$cuda/build.log
  rc=$(cat "$cuda/build.rc" 2>/dev/null || echo 1)
  if [ "$rc" = 0 ]; then
    echo "[  PASSED  ] 1 test(s)." > "$logdir/cuda-build.log"
  else
    echo "---- make CUDA=1 cuda-check failed (exit $rc): ----" > "$logdir/cuda-build.log"
    tail -n 40 "$log" >> "$logdir/cuda-build.log" 2>/dev/null
    echo "[  FAILED  ] 1 test(s)." >> "$logdir/cuda-build.log"
  fi
  count "$logdir/cuda-build.log" 0 "cuda build (make CUDA=1; log $log)"
  run_tests "$cuda/tests/gpu" tests/gpu
fi

for script in tests/e2e/*.sh; do
  name=$(basename "$script" .sh)
  log=$logdir/e2e-$name.log
  t0=$SECONDS
  FTLLM=bin/ftllm FTLLM_SAN=$san FTLLM_BUILD=$build FTLLM_CUDA=${cuda:+$cuda/ftllm} \
    timeout 900 bash "$script" > "$log" 2>&1
  count "$log" $? "e2e/$name"
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
