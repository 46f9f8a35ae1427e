#!/bin/bash
# tests/run.sh BUILD_DIR SAN_BINARY: runs every test suite and ends with
# "N passed, N failed, N skipped".
#  - cmocka binaries BUILD_DIR/tests/test_*, each under mpiexec with the rank counts named in its
#    source ("ft-test: ranks 1 2 4"), one OpenMP thread per rank, under timeout (a hang fails);
#  - the CUDA build, where FTLLM_CUDA_BUILD names its folder (make test sets it where nvcc
#    exists): its compilation (make's exit code in build.rc, log in build.log) counts as one
#    check, and its GPU tests (tests/gpu/) run like the others (they skip without a GPU);
#  - the CUDA emulator's build, where FTLLM_CUDA_EMU_BUILD names its folder (make test always
#    does): its compilation counts as one check, and the GPU tests run on it (cuda/emu/);
#  - the same tests built with AddressSanitizer, where
#    FTLLM_SAN_UNITS names their folder (make test builds build/san-address/tests for it): each
#    at its rank counts up to 2 (its smallest where it names none), so a write one past an
#    array, a read of freed memory or a short allocation that the release build survives by
#    luck (malloc rounds sizes up) fails a test (tests/mutants/random_sample.md, seed 10 R03);
#  - tests/e2e/*.sh, end-to-end checks of bin/ftllm (and of the sanitizer build SAN_BINARY; of
#    the CUDA build's binary as FTLLM_CUDA when there is one, of the emulator's as
#    FTLLM_CUDA_EMU); they get BUILD_DIR as FTLLM_BUILD
#    (bench_smoke.sh runs BUILD_DIR/perf/bench_* in smoke mode).
# FTLLM_TEST_PARTS picks the parts (default "units san gpu e2e"; scripts/coverage runs "units" or
# "units e2e"), FTLLM_BIN the binary the e2e scripts run (default bin/ftllm).
set -u
parts=" ${FTLLM_TEST_PARTS:-units san gpu e2e} "
for p in $parts; do
  case $p in units|san|gpu|e2e) ;; *) echo "tests/run.sh: FTLLM_TEST_PARTS: unknown part '$p' (expected units, san, gpu, e2e)" >&2; exit 2 ;; esac
done
has() { [[ $parts == *" $1 "* ]]; }
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

run_tests() { # run_tests DIR SRCDIR [TAG]: every DIR/test_* under the rank counts its source
  # names (with a TAG, a sanitizer build: those up to 2, or the smallest; a longer timeout,
  # names and logs marked with TAG)
  local bin name ranks n log sel tag=${3:-} limit=${3:+600}
  for bin in "$1"/test_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    ranks=$(sed -n 's/.*ft-test: ranks \([0-9 ]*\).*/\1/p' "$2/$name.c" | head -1)
    sel=${ranks:-1}
    if [ -n "$tag" ]; then
      sel=$(for n in $sel; do [ "$n" -le 2 ] && echo "$n"; done)
      [ -n "$sel" ] || sel=$(echo ${ranks:-1} | tr ' ' '\n' | sort -n | head -1)
    fi
    for n in $sel; do
      log=$logdir/$name${tag:+.$tag}.np$n.log
      t0=$SECONDS
      timeout "${limit:-300}" mpiexec -n "$n" "$bin" > "$log" 2>&1
      count "$log" $? "$name (np $n${tag:+, $tag})"
    done
  done
}

has units && run_tests "$build/tests" tests
san_units=${FTLLM_SAN_UNITS:-}
has san && [ -n "$san_units" ] && run_tests "$san_units" tests asan

count_build() { # count_build DIR NAME LABEL: DIR/build.rc (a make's exit status) as one check
  local rc
  t0=$SECONDS
  rc=$(cat "$1/build.rc" 2>/dev/null || echo 1)
  if [ "$rc" = 0 ]; then
    echo "[  PASSED  ] 1 test(s)." > "$logdir/$2.log"
  else
    echo "---- $3 failed (exit $rc): ----" > "$logdir/$2.log"
    tail -n 40 "$1/build.log" >> "$logdir/$2.log" 2>/dev/null
    echo "[  FAILED  ] 1 test(s)." >> "$logdir/$2.log"
  fi
  count "$logdir/$2.log" 0 "$3 (log $1/build.log)"
}

cuda=${FTLLM_CUDA_BUILD:-}
has gpu || cuda=
if [ -n "$cuda" ]; then
  count_build "$cuda" cuda-build "cuda build, make CUDA=1 cuda-check"
  run_tests "$cuda/tests/gpu" tests/gpu
fi

# The CUDA emulator's build (make CUDA=emu: cuda/emu/, every machine): its compilation counts as
# one check, then the GPU tests run on it for real: the kernel comparisons under each attention
# kernel and both thread orders (FTEMU_ORDER: a missing barrier shows in one order or the
# other) with late streams (FTEMU_STREAMS=lazy: a consumer that waits for no event runs
# before its producer), and with only the primary's stream late (mixed: the checker's and the
# NCCL stream run early), the training, DMR and NCCL tests once each.
emu=${FTLLM_CUDA_EMU_BUILD:-}
has gpu || emu=
if [ -n "$emu" ]; then
  count_build "$emu" cuda-emu-build "cuda emulator build, make CUDA=emu cuda-check"
  emu_run() { # emu_run NAME ORDER ATTENTION [STREAMS]: one GPU test on the emulator, one rank
    local streams=${4:-lazy} log=$logdir/emu-$1-$2-$3-${4:-lazy}.log
    t0=$SECONDS
    if [ -x "$emu/tests/gpu/$1" ]; then
      FTEMU_ORDER=$2 FTLLM_CUDA_ATTENTION=$3 FTEMU_STREAMS=$streams timeout 900 \
        mpiexec -n 1 "$emu/tests/gpu/$1" > "$log" 2>&1
      count "$log" $? "$1 (emulator, $2, attention $3, streams $streams)"
    else
      echo "[  FAILED  ] 1 test(s)." > "$log"
      count "$log" 1 "$1 (emulator: not built)"
    fi
  }
  for att in rows flash gemm tc; do
    for order in forward reverse; do emu_run test_gpu_ops $order $att; done
  done
  emu_run test_gpu_ops forward rows mixed # the checker's stream runs early: a missing event shows
  emu_run test_gpu_nccl forward rows mixed
  emu_run test_gpu_train forward gemm # the default kernel (cuda/ops_attention.cu)
  emu_run test_gpu_train forward tc # its bf16 run on the tensor-core kernels
  emu_run test_gpu_dmr reverse rows
  emu_run test_gpu_nccl forward rows
fi

for script in tests/e2e/*.sh; do
  has e2e || break
  name=$(basename "$script" .sh)
  log=$logdir/e2e-$name.log
  t0=$SECONDS
  FTLLM=${FTLLM_BIN:-bin/ftllm} FTLLM_SAN=$san FTLLM_BUILD=$build FTLLM_CUDA=${cuda:+$cuda/ftllm} \
    FTLLM_CUDA_EMU=${emu:+$emu/ftllm} \
    timeout 900 bash "$script" > "$log" 2>&1
  count "$log" $? "e2e/$name"
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
