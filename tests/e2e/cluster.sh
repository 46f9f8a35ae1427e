#!/bin/bash
# e2e/cluster.sh: `ftllm optimize` and `ftllm simulate` as a user meets them. Good cluster decks
# run and print their tables; the simulation's numbers do not depend on the rank count; every bad
# cluster deck in tests/e2e/bad_cluster_decks/ gives exactly one "FILE:LINE: message" line on
# stderr (its "; expect:" text) and exit code 2, with the normal binary and the sanitizer build.
set -u
FTLLM=${FTLLM:-bin/ftllm}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME WANT_RC WANT_STDERR NP CMD...: one check; stdout kept in $tmp/out
run() {
  local name=$1 want_rc=$2 want=$3 np=$4; shift 4
  timeout 300 mpiexec -n "$np" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$? lines; lines=$(wc -l < "$tmp/err")
  if [ "$rc" -ne "$want_rc" ]; then bad "$name" "exit code $rc, want $want_rc; stderr: $(head -c 400 "$tmp/err")"
  elif [ -n "$want" ] && ! grep -qF -- "$want" "$tmp/err"; then bad "$name" "stderr lacks '$want': $(head -c 400 "$tmp/err")"
  elif [ -n "$want" ] && [ "$lines" -ne 1 ]; then bad "$name" "stderr has $lines lines, want 1"
  elif grep -q 'Sanitizer\|runtime error' "$tmp/err"; then bad "$name" "sanitizer report: $(head -c 600 "$tmp/err")"
  else ok "$name"; fi
}
has() { # has NAME PATTERN: stdout of the last run matches
  if grep -qE -- "$2" "$tmp/out"; then ok "$1"; else bad "$1" "no '$2' in: $(head -c 600 "$tmp/out")"; fi
}

# a small version of the 600k study (200 replicas, 1 day) so that it runs in seconds
small=(cluster.gpus=8000 cluster.gpus_per_replica=40 cluster.steps=8640 cluster.r_max=6
       cluster.trials=8 cluster.policy=spare)
bins=("$FTLLM")
[ -n "${FTLLM_SAN:-}" ] && [ -x "$FTLLM_SAN" ] && bins+=("$FTLLM_SAN")
for bin in "${bins[@]}"; do
  tag=$(basename "$(dirname "$bin")")
  for deck in tests/e2e/bad_cluster_decks/*.ini; do
    want=$(sed -n 's/^; expect: //p' "$deck" | head -1)
    run "$tag optimize bad deck $(basename "$deck")" 2 "$deck:$want" 1 "$bin" optimize "$deck"
    run "$tag simulate bad deck $(basename "$deck")" 2 "$deck:$want" 2 "$bin" simulate "$deck"
  done
  run "$tag optimize without deck" 2 "usage: ftllm optimize DECK" 1 "$bin" optimize
  run "$tag simulate missing deck" 2 "nope.ini: cannot open the deck" 1 "$bin" simulate nope.ini
  run "$tag optimize bad override" 2 "command line override 1 'cluster.gpus=-1'" 1 "$bin" optimize inputs/cluster-spare600k.ini cluster.gpus=-1
  run "$tag optimize small" 0 "" 1 "$bin" optimize inputs/cluster-spare600k.ini "${small[@]}"
  has "$tag optimize table" '^  SPARe +6 '
  has "$tag optimize recommends" '^recommended: .* r = [0-9]+, checkpoint every [0-9]+ steps'
  run "$tag simulate small np1" 0 "" 1 "$bin" simulate inputs/cluster-spare600k.ini "${small[@]}" cluster.event_log="$tmp/ev"
  has "$tag simulate row" '^spare +[0-9]+ '
  grep -v 'trials over' "$tmp/out" > "$tmp/np1"
  [ "$(head -1 "$tmp/ev-spare.csv")" = "time_s,event,group,depth,work_s" ] && grep -q ',done,' "$tmp/ev-spare.csv" \
    && ok "$tag event log" || bad "$tag event log" "$(head -3 "$tmp/ev-spare.csv" 2>&1)"
  run "$tag simulate small np2" 0 "" 2 "$bin" simulate inputs/cluster-spare600k.ini "${small[@]}"
  grep -v 'trials over' "$tmp/out" > "$tmp/np2"
  cmp -s "$tmp/np1" "$tmp/np2" && ok "$tag simulate independent of ranks" || bad "$tag simulate independent of ranks" "$(diff "$tmp/np1" "$tmp/np2" | head -5)"
  run "$tag optimize sparing" 0 "" 1 "$bin" optimize inputs/cluster-meta-sparing.ini cluster.r_max=4
  has "$tag sparing table" '^recommended spares: [0-9]+ intra-block spare'
done

echo "[  PASSED  ] $pass test(s)."
[ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s), listed above."
[ "$fail" -eq 0 ]
