#!/bin/bash
# e2e/coverage.sh: `make coverage`'s pieces, small: the coverage build (make COV=1) of the library
# and one unit test (test_threads) in a scratch folder, scripts/coverage on it. Its report names
# src/threads.c as run and a module that test does not touch (src/sim/sim_ring.c) as never run;
# the HTML and branch tables are written; a coverage build with a sanitizer and scripts/coverage
# on a folder without gcov notes are refused in one line. Skips without gcovr (a Debian package
# that scripts/install-deps installs).
set -u
source tests/e2e/lib.bash
if ! command -v gcovr > /dev/null; then
  echo "SKIP coverage: no gcovr (scripts/install-deps installs it)"
  echo "[  SKIPPED ] 1 test(s)."
  exit 0
fi
if [ -n "${FTLLM_IN_COVERAGE:-}" ]; then # scripts/coverage with COVERAGE_E2E=1 runs this script
  echo "SKIP coverage: already inside a coverage run (scripts/coverage)"
  echo "[  SKIPPED ] 1 test(s)."
  exit 0
fi
unset COVERAGE_E2E # the scripts/coverage below runs the unit test only
cov=$E2E_TMP/cov
timeout 600 make --no-print-directory COV=1 BUILD="$cov" "$cov/ftllm" "$cov/tests/test_threads" \
  > "$E2E_TMP/build.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  bad "make COV=1 (library and test_threads)" "exit code $rc: $(tail -n 15 "$E2E_TMP/build.log" | head -c 1500)"
  e2e_finish
  exit
fi
ok "make COV=1 builds the library, ftllm and a test with gcov notes"
grep -q -- '--coverage' "$E2E_TMP/build.log" && ok "the coverage build compiles with --coverage" \
  || bad "coverage flags" "no --coverage in the build's commands"

timeout 600 scripts/coverage "$cov" > "$E2E_TMP/report" 2>&1
rc=$?
[ "$rc" -eq 0 ] && ok "scripts/coverage runs the tests and reports" \
  || bad "scripts/coverage" "exit code $rc: $(tail -n 20 "$E2E_TMP/report" | head -c 1500)"
grep -qE '^test_threads \(np [0-9]+\) +[0-9]+ passed, 0 failed' "$E2E_TMP/report" \
  && ok "the unit test ran under the coverage build" \
  || bad "the unit test's tally" "$(head -c 600 "$E2E_TMP/report")"
# a file's percentage from gcovr's table: "src/x.c  lines exec NN%  missing"
pct() { awk -v f="$1" '$1 == f { sub(/%/, "", $4); print $4 }' "$cov/coverage.txt"; }
t=$(pct src/threads.c) s=$(pct src/sim/sim_ring.c)
if [ -n "$t" ] && [ "$t" -gt 50 ]; then ok "src/threads.c is counted as run ($t% of its lines)"
else bad "src/threads.c's coverage" "'$t', want over 50%: $(head -c 800 "$cov/coverage.txt")"; fi
if [ "$s" = 0 ]; then ok "src/sim/sim_ring.c, which test_threads does not call, is at 0%"
else bad "src/sim/sim_ring.c's coverage" "'$s', want 0"; fi
grep -qE '^lines: [0-9.]+% \([0-9]+ out of [0-9]+\)' "$E2E_TMP/report" \
  && ok "the summary's lines total" || bad "the summary" "$(tail -n 5 "$E2E_TMP/report")"
[ -s "$cov/coverage/index.html" ] && [ -s "$cov/coverage-branches.txt" ] \
  && ok "the HTML report and the branch table are written" \
  || bad "the HTML report or the branch table" "missing: $(ls "$cov" "$cov/coverage" 2>&1 | head -c 400)"
# a second run starts from zeroed counters: the binary run in between (src/verbs/main.c) does not
# count in it
m0=$(pct src/verbs/main.c)
timeout 60 mpiexec -n 1 "$cov/ftllm" --version > /dev/null 2>&1
timeout 600 scripts/coverage "$cov" > /dev/null 2>&1
m1=$(pct src/verbs/main.c) t1=$(pct src/threads.c)
if [ "$m0" = 0 ] && [ "$m1" = 0 ] && [ "$t1" = "$t" ]; then
  ok "a second run starts from zeroed counters (main.c 0%, threads.c $t1%)"
else bad "a second run" "src/verbs/main.c '$m0' then '$m1' (want 0, 0), src/threads.c '$t' then '$t1'"; fi

# refusals: one line, an exit code
make --no-print-directory COV=1 SAN=address BUILD="$cov-san" "$cov-san/ftllm" > "$E2E_TMP/out" 2> "$E2E_TMP/err"
rc=$?
if [ "$rc" -ne 0 ] && grep -q 'COV=1: a coverage build has no sanitizer and no CUDA' "$E2E_TMP/err" \
   && [ "$(wc -l < "$E2E_TMP/err")" -eq 1 ]; then ok "COV=1 with a sanitizer is refused in one line"
else bad "COV=1 SAN=address" "exit $rc: $(head -c 600 "$E2E_TMP/err")"; fi
mkdir -p "$E2E_TMP/plain/src"
scripts/coverage "$E2E_TMP/plain" > "$E2E_TMP/out" 2> "$E2E_TMP/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q 'has no gcov notes' "$E2E_TMP/err" && [ "$(wc -l < "$E2E_TMP/err")" -eq 1 ]
then ok "scripts/coverage on a build without gcov notes: one line, exit 2"
else bad "scripts/coverage on a plain folder" "exit $rc: $(head -c 600 "$E2E_TMP/err")"; fi
e2e_finish
