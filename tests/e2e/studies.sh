#!/bin/bash
# e2e/studies.sh: every study of perf/studies/ in quick mode (STUDIES_QUICK=1: tiny sizes, a few
# seconds each), as `make studies STUDIES_QUICK=1` runs them (perf/studies/run.sh), into a
# scratch STUDIES_OUT. Checks per study: its RESULT line; its CSV's header is exactly the columns
# below, it has rows, every row has as many fields; its PNG is a PNG (signature, IHDR) of at least
# 600 x 400 pixels and 10 kB (an empty figure is smaller). And the error paths: an unknown study
# and a build folder without the benchmarks each fail with one line naming what is missing.
# The numbers mean nothing at these sizes.
set -u
source tests/e2e/lib.bash
build=${FTLLM_BUILD:-build/release}
export OMP_NUM_THREADS=1 FTLLM STUDIES_QUICK=1 STUDIES_OUT=$E2E_TMP/studies

# columns STUDY: its CSV header
columns() {
  case $1 in
    dmr_overhead)
      echo 'variant,ac,mode,median_ms,best_ms,ratio_vs_off,overhead_pct,dmr_estimate_pct' ;;
    spare_steps) echo 'r,failures,step,ms,live,depth' ;;
    scaling) echo 'layout,ranks,dp,tp,pp,tokens_per_s,ms_per_step,speedup,efficiency' ;;
    ckpt_bandwidth) echo 'ranks,mb,round,plain_write_s,ckpt_write_s,async_stall_s,async_write_s' ;;
    ttt_vs_r) echo 'law,policy,r,interval_steps,predicted_days,simulated_days,ci95_days' ;;
    *) echo '?' ;;
  esac
}

# png_ok NAME FILE: a PNG of at least 600 x 400 pixels and 10 kB
png_ok() {
  local f=$2 sig w h size
  [ -f "$f" ] || { bad "$1" "$f was not written"; return; }
  sig=$(head -c 16 "$f" | od -An -tx1 | tr -d ' \n')
  w=$((16#$(od -An -tx1 -j 16 -N 4 "$f" | tr -d ' \n')))
  h=$((16#$(od -An -tx1 -j 20 -N 4 "$f" | tr -d ' \n')))
  size=$(stat -c %s "$f")
  if [ "$sig" != 89504e470d0a1a0a0000000d49484452 ]; then bad "$1" "$f is not a PNG (starts $sig)"
  elif [ "$w" -lt 600 ] || [ "$h" -lt 400 ]; then bad "$1" "$f is $w x $h pixels"
  elif [ "$size" -lt 10000 ]; then bad "$1" "$f has only $size bytes"
  else ok "$1 ($w x $h, $size bytes)"; fi
}

# csv_ok NAME FILE HEADER: the header, at least one row, the same number of fields in each
csv_ok() {
  local f=$2 want=$3 nf rows
  [ -f "$f" ] || { bad "$1" "$f was not written"; return; }
  [ "$(head -1 "$f")" = "$want" ] || { bad "$1" "header '$(head -1 "$f")', want '$want'"; return; }
  rows=$(($(wc -l < "$f") - 1))
  nf=$(/usr/bin/python3 -c 'import csv, sys
print(sorted({len(r) for r in csv.reader(open(sys.argv[1]))}))' "$f")
  if [ "$rows" -lt 1 ]; then bad "$1" "$f has no rows"
  elif [ "$nf" != "[$(($(tr -cd , <<< "$want" | wc -c) + 1))]" ]; then
    bad "$1" "$f rows have $nf fields"
  else ok "$1 ($rows rows)"; fi
}

studies=$(for f in perf/studies/*.py; do
  b=$(basename "$f" .py); [ "$b" = studylib ] || echo "$b"
done)
t0=$SECONDS
timeout "${STUDIES_TIMEOUT:-600}" perf/studies/run.sh "$build" > "$E2E_TMP/all.out" \
  2> "$E2E_TMP/all.err"
rc=$?
[ "$rc" -eq 0 ] && ok "perf/studies/run.sh $build (quick, $((SECONDS - t0)) s)" \
  || bad "perf/studies/run.sh" "exit code $rc: $(tail -c 800 "$E2E_TMP/all.err")"
for s in $studies; do
  if [ "$(columns "$s")" = '?' ]; then
    bad "$s" "a new study: add its CSV columns to tests/e2e/studies.sh"; continue
  fi
  grep -q "^RESULT $s: " "$E2E_TMP/all.out" && ok "$s: RESULT line" \
    || bad "$s: RESULT line" "none in: $(tail -c 400 "$E2E_TMP/all.out")"
  csv_ok "$s: CSV" "$STUDIES_OUT/$s.csv" "$(columns "$s")"
  png_ok "$s: PNG" "$STUDIES_OUT/$s.png"
done
# the DMR study picks up every row bench_dmr prints: each variant there is a row of the CSV
n_bench=$(grep -cE '^"?ac (none|full), ' "$STUDIES_OUT/dmr_overhead.csv")
[ "$n_bench" -ge 5 ] && ok "dmr_overhead: $n_bench variants" \
  || bad "dmr_overhead variants" "$n_bench rows"

# STUDIES_REPLOT=1: ttt_vs_r plots its CSV again without running anything
rm -f "$STUDIES_OUT/ttt_vs_r.png"
STUDIES_REPLOT=1 FTLLM=/nonexistent perf/studies/run.sh "$build" ttt_vs_r > /dev/null \
  2> "$E2E_TMP/err" && png_ok "ttt_vs_r: replotted from its CSV" "$STUDIES_OUT/ttt_vs_r.png" \
  || bad "ttt_vs_r replot" "$(cat "$E2E_TMP/err")"

# errors: one line, non-zero exit
perf/studies/run.sh "$build" no_such_study > /dev/null 2> "$E2E_TMP/err"
[ $? -ne 0 ] && grep -q 'no study perf/studies/no_such_study.py' "$E2E_TMP/err" \
  && ok "an unknown study is an error" || bad "unknown study" "$(cat "$E2E_TMP/err")"
STUDIES_OUT=$E2E_TMP/none perf/studies/run.sh "$E2E_TMP/nobuild" dmr_overhead > /dev/null \
  2> "$E2E_TMP/err"
rc=$?
[ "$rc" -ne 0 ] && [ "$(grep -c 'is not built' "$E2E_TMP/err")" = 1 ] \
  && ok "a missing benchmark is named (exit $rc)" \
  || bad "missing benchmark" "exit $rc: $(cat "$E2E_TMP/err")"
e2e_finish
