#!/bin/bash
# e2e/cluster.sh: `ftllm optimize` and `ftllm simulate` as a user meets them. Good cluster decks
# run and print their tables; the simulation's numbers do not depend on the rank count; every bad
# cluster deck in tests/e2e/bad_cluster_decks/ gives exactly one "FILE:LINE: message" line on
# stderr (its "; expect:" text) and exit code 2, with the normal binary and the sanitizer build.
set -u
source "$(dirname "$0")/lib.bash"
tmp=$E2E_TMP

# a small version of the 600k study (200 replicas, 1 day) so that it runs in seconds
small=(cluster.gpus=8000 cluster.gpus_per_replica=40 cluster.steps=8640 cluster.r_max=6
       cluster.trials=8 cluster.policy=spare)
for bin in "${e2e_bins[@]}"; do
  tag=$(e2e_tag "$bin")
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
  run "$tag optimize sparing weibull" 0 "" 1 "$bin" optimize inputs/cluster-meta-sparing.ini cluster.r_max=4 \
    cluster.failure_law=weibull cluster.spare_trays=1
  has "$tag sparing weibull law" '^  up times Weibull k = 0.8, every part new'
  has "$tag sparing weibull table" '^recommended spares: 1 intra-block spare tray per block, [0-9]+ spare block'
done

e2e_finish
