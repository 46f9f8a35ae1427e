#!/bin/bash
# perf/gpu/ncu.sh BUNDLE [CASE...]: Nsight Compute's figures for each kernel of bench_ops' cases
# (default: attention, matmul fc, layernorm, crossentropy, encoder), so that a GPU session learns
# which kernel inside an op kind holds its time: per kernel its launches, mean time, DRAM bytes
# and rate, and how busy the SMs and the tensor cores were. BUNDLE as perf/gpu/run.sh's (with
# build/cuda/perf/gpu/bench_ops in it). Run from the repository root on the GPU machine:
#   perf/gpu/ncu.sh build/gpu.tar.xz 2>&1 | tee $OUT/ncu.log
# ncu runs with --clock-control none (the card's clocks as found: leave its settings alone) and
# profiles the first $NCU_LAUNCHES kernels of each case (default 80: its two warm-up calls),
# each replayed for its counters, so times are a profiler's, to compare kernels with each other,
# not with bench_ops' rates. Full CSVs in $LOGS (default build/gpu-ncu/). Each case gets at most
# $NCU_TIMEOUT seconds (default 120). Exit 0 when every case gave figures.
set -u
bundle=${1:?usage: perf/gpu/ncu.sh BUNDLE [CASE...]}
shift
[ $# -gt 0 ] || set -- attention "matmul fc" layernorm crossentropy encoder
work=$(mktemp -d "${TMPDIR:-/tmp}/ftllm_ncu_XXXXXX")
trap 'rm -rf "$work"' EXIT
logs=${LOGS:-build/gpu-ncu}
mkdir -p "$logs"
if [ -f "$bundle" ]; then
  tar -xJf "$bundle" -C "$work" || exit 2
  bundle=$(find "$work" -maxdepth 2 -name env.sh -printf '%h\n' | head -1)
fi
[ -f "$bundle/env.sh" ] || { echo "perf/gpu/ncu.sh: no env.sh in $bundle: not a gpu-bundle" >&2; exit 2; }
# shellcheck disable=SC1091
source "$bundle/env.sh"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
[ -n "$ncu" ] || { echo "perf/gpu/ncu.sh: no ncu on this machine" >&2; exit 2; }
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics=$metrics,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
bad=0
for c in "$@"; do
  base=$logs/ncu-${c// /_} # its report, base.csv, and the run's output, base.out
  csv=$base.csv
  echo "== $c"
  FT_BENCH_ONLY=$c timeout "${NCU_TIMEOUT:-120}" mpiexec -n 1 "$ncu" --clock-control none \
    --launch-count "${NCU_LAUNCHES:-80}" --metrics "$metrics" --csv --page raw \
    --log-file "$csv" "$bundle/bin/bench_ops" bf16 > "$base.out" 2>&1
  rc=$?
  # the report goes to --log-file; where an ncu version prints it to stdout instead, read that
  if ! python3 perf/gpu/ncu_table.py "$csv" 2> /dev/null &&
    ! python3 perf/gpu/ncu_table.py "$base.out"; then
    bad=$((bad + 1))
    echo "no figures (rc $rc); the end of its output:"
    tail -n 5 "$base.out"
  fi
done
[ "$bad" -eq 0 ]
