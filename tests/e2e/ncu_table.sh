#!/bin/bash
# e2e/ncu_table.sh: perf/gpu/ncu_table.py, which perf/gpu/ncu.sh runs on a GPU machine, on a
# report in Nsight Compute's `--csv --page raw` layout (a header row, a units row, a row per
# launch; numbers with thousands separators) made here: per kernel its launches, mean time,
# bytes and rate, heaviest first, the names without arguments or template parameters; a file
# that is no such report exits 1 with one line.
source tests/e2e/lib.bash

csv=$E2E_TMP/r.csv
cat > "$csv" << 'CSV'
"ID","Process ID","Kernel Name","Context","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed"
"","","","","Mbyte","Kbyte","usecond","%","%"
"0","7","ag_softmax_kernel(float *, __nv_bfloat16 *, float *, long long, long long)","1","1,000.00","500,000.00","250.00","0.00","40.00"
"1","7","void cutlass::Kernel2<cutlass_80_tensorop_bf16<256, 128>>(Params)","1","100.00","100,000.00","50.00","60.00","80.00"
"2","7","ag_softmax_kernel(float *, __nv_bfloat16 *, float *, long long, long long)","1","1,000.00","500,000.00","350.00","0.00","60.00"
CSV
out=$(python3 perf/gpu/ncu_table.py "$csv" 2>&1)
rc=$?
[ $rc = 0 ] && ok "ncu_table: a report reads" || bad "ncu_table: a report reads" "rc $rc: $out"
# softmax: 2 launches, (250 + 350) / 2 = 300 us, 1000 MB + 500 MB = 1500 MB a launch, 5000 GB/s,
# SM 50%, TC 0; it comes first (600 of 650 us: 92.3%)
line=$(sed -n 2p <<< "$out")
grep -Eq '^ag_softmax_kernel +\| +2 \| +300\.0 \| +92\.3 \| +1500\.0 \| +5000 \| +50\.0 \| +0\.0$' <<< "$line" &&
  ok "ncu_table: the heaviest kernel first, its figures" || bad "ncu_table: the heaviest kernel first, its figures" "$out"
line=$(sed -n 3p <<< "$out")
grep -Eq '^void cutlass::Kernel2 +\| +1 \| +50\.0 \| +7\.7 \| +200\.0 \| +4000 \| +80\.0 \| +60\.0$' <<< "$line" &&
  ok "ncu_table: a template's name shortened, its figures" || bad "ncu_table: a template's name shortened, its figures" "$out"
printf 'ncu: error: no kernels were profiled\n' > "$E2E_TMP/bad.csv"
err=$(python3 perf/gpu/ncu_table.py "$E2E_TMP/bad.csv" 2>&1 > /dev/null)
rc=$?
[ $rc = 1 ] && [ "$(wc -l <<< "$err")" = 1 ] && grep -q "bad.csv: no 'Kernel Name' column" <<< "$err" &&
  ok "ncu_table: not a report: exit 1, one line" || bad "ncu_table: not a report: exit 1, one line" "rc $rc: $err"
e2e_finish
