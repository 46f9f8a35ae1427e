#!/bin/bash
# e2e/report.sh: what a run prints about itself. PAPI counters per region (perf.papi_events):
# where PAPI can count, one column per event in the region table with counts > 0 and a refused
# event warned once; where it cannot (a VM without a CPU PMU: libpfm4 finds no default PMU and
# PAPI disables its perf_event component), one warning and no columns; and, with a CPU PMU
# model forced on libpfm4 (LIBPFM_FORCE_PMU, which leaves out its perf:: software PMU), every
# perf:: event refused, each warned once on rank 0, and the run still exits 0. The model line
# (one pipeline slot) and the end-of-run line (steps, ranks). The progress
# output: plain per-step lines into a pipe, the live line (\r, ETA) on a terminal (script(1))
# and with run.progress = live.
set -u
source "$(dirname "$0")/lib.bash"
quick="train.steps=3 train.val_batches=1 train.sample_tokens=0 dmr.mode=off faults.schedule="
events=perf::TASK-CLOCK,perf::PAGE-FAULTS,perf::CONTEXT-SWITCHES,PAPI_TOT_INS

# ---- PAPI ----
# shellcheck disable=SC2086
run "papi run exits 0" 0 "" 2 "$FTLLM" train inputs/default.ini $quick parallel.dp=2 perf.papi_events=$events
if grep -q 'PAPI cannot count here' "$E2E_TMP/err"; then
  echo "NOTE: PAPI cannot count on this machine: $(head -1 "$E2E_TMP/err")"
  [ "$(grep -c 'perf.papi_events' "$E2E_TMP/err")" -eq 1 ] && ok "papi: one warning" \
    || bad "papi: one warning" "$(cat "$E2E_TMP/err")"
  if grep -q 'PAPI event counts' "$E2E_TMP/out"; then bad "papi: no columns" "$(cat "$E2E_TMP/out")"
  else ok "papi: no columns"; fi
  has "papi: region table still there" '^step +[0-9]+ +[0-9.]+ / '
else
  has "papi: columns" '^region .* perf::TASK-CLOCK +perf::PAGE-FAULTS +perf::CONTEXT-SWITCHES'
  # the step row's TASK-CLOCK minimum (nanoseconds of the main thread) is not zero
  clock=$(awk '/^region /{for (i = 1; i <= NF; i++) if ($i == "perf::TASK-CLOCK") c = i}
               /^step / && c {print $(13 + 5 * (c - 13)); exit}' "$E2E_TMP/out")
  case "$clock" in ''|0) bad "papi: TASK-CLOCK counted in step" "min '$clock': $(grep -A3 '^region' "$E2E_TMP/out")" ;;
                   *) ok "papi: TASK-CLOCK counted in step ($clock)" ;; esac
  n=$(grep -c "PAPI refused event 'PAPI_TOT_INS'" "$E2E_TMP/err")
  if grep -q '^region .*PAPI_TOT_INS' "$E2E_TMP/out"; then [ "$n" -eq 0 ] && ok "papi: PAPI_TOT_INS counted" || bad "papi: PAPI_TOT_INS" "both counted and refused"
  else [ "$n" -eq 1 ] && ok "papi: refused PAPI_TOT_INS warned once" || bad "papi: refused warned once" "$n warnings: $(cat "$E2E_TMP/err")"; fi
  # the footnote counts the columns: the three perf:: events, and PAPI_TOT_INS where counted
  nc=$((3 + (n == 0)))
  has "papi: footnote counts $nc columns" "^\(the last $nc columns: PAPI event counts of the region, min / avg / max over the ranks\)$"
fi
has "end of run: steps and ranks" '^---- end of run default: 3 steps on 2 ranks ----$'
has "model line: one pipeline slot" '^model: [0-9]+ parameters on this rank .*; tape [0-9]+ entries x 1 slot, activations [0-9.]+ MiB; '
has "papi: verdict" '^verdict: OK'
# the run validated (train.val_batches=1): the region table says what eval's share is of
has "region table: footnote on eval" '^\(eval and checkpoint run between steps: their % of step compares them with the steps. time and can pass 100\)$'

# a CPU PMU model forced on libpfm4: its perf:: software PMU is then not active, so PAPI
# refuses every perf:: event ("Event does not exist") on every rank
# shellcheck disable=SC2086
LIBPFM_FORCE_PMU=amd64_fam19h_zen4 run "forced PMU: run exits 0" 0 "" 2 "$FTLLM" train inputs/default.ini $quick parallel.dp=2 perf.papi_events=perf::TASK-CLOCK,perf::PAGE-FAULTS
if grep -q 'PAPI cannot count here' "$E2E_TMP/err"; then
  echo "SKIP forced PMU: PAPI cannot count here even with a forced PMU: $(head -1 "$E2E_TMP/err")"
else
  for ev in perf::TASK-CLOCK perf::PAGE-FAULTS; do
    n=$(grep -c "^warning: perf.papi_events: PAPI refused event '$ev' (Event does not exist) on 2 of 2 ranks: not counted$" "$E2E_TMP/err")
    [ "$n" -eq 1 ] && ok "forced PMU: $ev refused, warned once" || bad "forced PMU: $ev warned once" "$n times: $(cat "$E2E_TMP/err")"
  done
  [ "$(wc -l < "$E2E_TMP/err")" -eq 3 ] && ok "forced PMU: 3 warning lines" || bad "forced PMU: 3 warning lines" "$(cat "$E2E_TMP/err")"
  grep -q 'no event left to count' "$E2E_TMP/err" && ok "forced PMU: nothing left" || bad "forced PMU: nothing left" "$(cat "$E2E_TMP/err")"
fi
if grep -q 'PAPI event counts' "$E2E_TMP/out"; then bad "forced PMU: no columns" "$(cat "$E2E_TMP/out")"; else ok "forced PMU: no columns"; fi
has "forced PMU: verdict" '^verdict: OK'

# ---- progress ----
# what a terminal shows of FILE: of each line, what follows its last "\r ESC[K" (the live line
# is erased there and the next text written in its place)
screen() { sed $'s/.*\r\033\\[K//' "$1"; }
# into a pipe: the plain per-step lines, no carriage return
# shellcheck disable=SC2086
run "progress: pipe" 0 "" 1 "$FTLLM" train inputs/default.ini $quick
has "progress: plain step line" '^step +3/3 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm [0-9.]+ \| +[0-9.]+ ms \| +[0-9]+ tok/s$'
if grep -q $'\r\|ETA' "$E2E_TMP/out"; then bad "progress: no live line in a pipe" "$(grep -c $'\r' "$E2E_TMP/out") CRs"
else ok "progress: no live line in a pipe"; fi

# run.progress = live through mpiexec's pipe: the live line, rewritten with \r, no plain lines
# shellcheck disable=SC2086
run "progress: live" 0 "" 2 "$FTLLM" train inputs/default.ini $quick parallel.dp=2 run.progress=live
grep -q $'\r\033\\[Kstep 2/3 (67%) | loss [0-9.]* | [0-9]* tok/s | ETA 0:[0-9][0-9]\r\033\\[Kstep 3/3 (100%)' "$E2E_TMP/out" \
  && ok "progress: live line rewritten in place" || bad "progress: live line" "$(cat -A "$E2E_TMP/out" | grep -a ETA | head -3)"
screen "$E2E_TMP/out" > "$E2E_TMP/screen"
grep -q '^step 3/3 (100%) | loss [0-9.]* | [0-9]* tok/s | ETA 0:[0-9][0-9]$' "$E2E_TMP/screen" \
  && ok "progress: the last live line stays" || bad "progress: the last live line stays" "$(cat -A "$E2E_TMP/screen" | grep -a step)"
if grep -qE '^step +[0-9]+/3 \| loss' "$E2E_TMP/screen"; then bad "progress: live has no plain lines" "$(grep -E '^step' "$E2E_TMP/screen")"
else ok "progress: live has no plain lines"; fi
grep -qE '^step +3/3 \| val loss [0-9.]+' "$E2E_TMP/screen" && ok "progress: validation line still its own line" \
  || bad "progress: validation line still its own line" "$(grep -a step "$E2E_TMP/screen")"
has "progress: live verdict" '^verdict: OK'

# a terminal (script(1) gives the command a pseudo-terminal; one rank without mpiexec, whose
# forwarding would be a pipe): auto picks the live line
if command -v script > /dev/null; then
  for bin in "${e2e_bins[@]}"; do
    tag=$(e2e_tag "$bin")
    # shellcheck disable=SC2086
    timeout 300 script -qec "$bin train inputs/default.ini $quick" "$E2E_TMP/tty" > /dev/null 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && ok "$tag progress: terminal run exits 0" || bad "$tag progress: terminal run" "exit $rc: $(tail -5 "$E2E_TMP/tty")"
    grep -aq $'\r\033\\[Kstep 2/3 (67%) | loss [0-9.]* | [0-9]* tok/s | ETA ' "$E2E_TMP/tty" \
      && ok "$tag progress: terminal gets the live line" || bad "$tag progress: terminal live line" "$(grep -a 'step' "$E2E_TMP/tty" | cat -A | head -5)"
    if screen "$E2E_TMP/tty" | grep -aqE '^step +1/3 \| loss'; then bad "$tag progress: terminal has no plain lines" "$(grep -a '^step' "$E2E_TMP/tty")"
    else ok "$tag progress: terminal has no plain lines"; fi
    grep -aq 'Sanitizer\|runtime error' "$E2E_TMP/tty" && bad "$tag progress: terminal sanitizer" "$(grep -a -A5 'Sanitizer\|runtime error' "$E2E_TMP/tty")"
  done
else
  echo "SKIP progress on a terminal: no script(1) (util-linux)"
fi

e2e_finish
