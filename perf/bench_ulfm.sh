#!/bin/bash
# perf/bench_ulfm.sh BUILD_DIR: the time from a replica failure to the first step after it, on 4
# ranks (dp 4, spare.r 2, one thread each), two ways:
#  - ULFM-real (build/openmpi/ftllm, mpirun --with-ft ulfm): rank 2 raises SIGKILL on entering
#    step S's backward (FTLLM_TEST_KILL). Parts, from rank 0's log lines (wall clocks of one
#    node): detection = kill -> rank 0's first failed operation; agreement = that -> the end of
#    MPIX_Comm_agree; recovery = shrink + controller + regrid; then step S is computed again
#    (about one depth-2 step: step S+1's time). total = kill -> recovery end + step S+1.
#  - MPICH-injected (BUILD_DIR/ftllm, the fault file's `fail step=S replica=2`): nothing to
#    detect or agree (every rank reads the same line); regrid (the spare: line's) + step S.
# Each way TRIALS times (default 3); medians. Skips the ULFM half without the Open MPI build.
set -u
build=${1:?usage: perf/bench_ulfm.sh BUILD_DIR}
trials=${TRIALS:-3} S=5 steps=8 size="model.channels=64 model.layers=2 model.heads=2 model.seq_len=32 train.batch=4"
if [ -n "${FT_BENCH_SMOKE:-}" ]; then trials=1 S=3 steps=4 size="model.channels=32 model.layers=1 model.heads=2 model.seq_len=16 train.batch=2"; fi
common="parallel.dp=4 spare.r=2 train.steps=$steps dmr.mode=off train.val_batches=0 train.sample_tokens=0 train.rate_skip=1 $size"
ompi=${FTLLM_OPENMPI_DIR:-$PWD/.deps/openmpi} fbin=${FTLLM_OPENMPI:-build/openmpi/ftllm}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft_bench_ulfm_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
step_ms() { grep -a -E "^step +$2/" "$1" | tail -1 | sed 's/.*| *\([0-9.]*\) ms |.*/\1/'; }
normal_ms() { for k in $(seq 2 $((S - 1))); do step_ms "$1" "$k"; done | median; }

: > "$tmp/inj"
printf 'fail step=%d replica=2\n' "$S" > "$tmp/f"
for t in $(seq "$trials"); do
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=1 timeout 300 mpiexec -n 4 "$build/ftllm" train inputs/default.ini $common \
    faults.schedule="$tmp/f" > "$tmp/o" 2>&1 || { echo "bench_ulfm: the injected run failed:"; tail -5 "$tmp/o"; exit 1; }
  regrid=$(sed -n 's/^spare: .*regrid \([0-9.]*\) s$/\1/p' "$tmp/o")
  echo "$regrid $(step_ms "$tmp/o" "$S") $(normal_ms "$tmp/o")" >> "$tmp/inj"
done
ireg=$(cut -d' ' -f1 "$tmp/inj" | median) istep=$(cut -d' ' -f2 "$tmp/inj" | median)
inorm=$(cut -d' ' -f3 "$tmp/inj" | median)
printf 'failure -> first step after it, 4 ranks dp 4 r 2 (%s), median of %d\n' "$size" "$trials"
printf '%-16s %10s %10s %10s %12s %12s %10s %12s\n' way detect_ms agree_ms regrid_ms redo_step_ms total_ms normal_ms total/normal
awk -v r="$ireg" -v s="$istep" -v n="$inorm" 'BEGIN {printf "%-16s %10s %10s %10.1f %12.1f %12.1f %10.1f %12.1f\n", "MPICH-injected", "-", "-", 1e3 * r, s, 1e3 * r + s, n, (1e3 * r + s) / n}'

if [ ! -x "$ompi/bin/mpirun" ] || [ ! -x "$fbin" ]; then
  echo "bench_ulfm: ULFM-real skipped: no Open MPI build ($fbin; make MPI=openmpi deps && make MPI=openmpi)"
  exit 0
fi
: > "$tmp/real"
for t in $(seq "$trials"); do
  # shellcheck disable=SC2086
  OPAL_PREFIX=$ompi OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
    "$ompi/bin/mpirun" --oversubscribe --with-ft ulfm -x OMP_NUM_THREADS=1 \
    -x FTLLM_TEST_KILL="2:backward:$S" -n 4 "$fbin" train inputs/default.ini $common \
    faults.schedule= > "$tmp/o" 2>&1 || { echo "bench_ulfm: the ULFM run failed:"; tail -5 "$tmp/o"; exit 1; }
  kill_at=$(grep -a 'test kill: raising SIGKILL' "$tmp/o" | sed 's/.*(wall \([0-9.]*\)).*/\1/')
  line=$(grep -a "^ulfm: step $S: recovered" "$tmp/o")
  rec=$(sed 's/.* in \([0-9.]*\) s (shrink.*/\1/' <<< "$line")
  seen=$(sed 's/.*failure at wall \([0-9.]*\),.*/\1/' <<< "$line")
  agree=$(sed 's/.*, \([0-9.]*\) s before the agreement.*/\1/' <<< "$line")
  from=$(sed 's/.*again from wall \([0-9.]*\).*/\1/' <<< "$line")
  next=$(step_ms "$tmp/o" $((S + 1)))
  awk -v k="$kill_at" -v s="$seen" -v a="$agree" -v r="$rec" -v f="$from" -v nx="$next" -v n="$(normal_ms "$tmp/o")" \
    'BEGIN {printf "%.3f %.3f %.3f %.3f %.3f %.3f\n", 1e3 * (s - k), 1e3 * a, 1e3 * r, nx, 1e3 * (f - k) + nx, n}' >> "$tmp/real"
done
col() { cut -d' ' -f"$1" "$tmp/real" | median; }
awk -v d="$(col 1)" -v a="$(col 2)" -v r="$(col 3)" -v x="$(col 4)" -v t="$(col 5)" -v n="$(col 6)" \
  'BEGIN {printf "%-16s %10.1f %10.1f %10.1f %12.1f %12.1f %10.1f %12.1f\n", "ULFM-real", d, a, r, x, t, n, t / n}'
