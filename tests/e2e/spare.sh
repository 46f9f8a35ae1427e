#!/bin/bash
# e2e/spare.sh: SPARe as a user meets it: `ftllm train` on 4 ranks, dp 4, spare.r 2, a fault
# file whose `fail` line stops replica 1 before step 3: the run finishes with the survivors, its
# losses are those of the run without the failure (the shard-keyed reduction adds the same shard
# gradients in the same order whichever replica computed them), the `spare:` line reports
# "failures masked 1, wipe-outs 0"; a second failure of a replica holding the last copy of a
# shard is a wipe-out: exit 5 and "wipe-outs 1". A `fail` line naming a rank fails its replica.
set -u
source "$(dirname "$0")/lib.bash"
common="parallel.dp=4 spare.r=2 train.steps=5 dmr.mode=off train.val_batches=0 train.sample_tokens=0 model.channels=32 model.layers=2 model.heads=2 model.seq_len=16 train.batch=2"
losses() { grep -E '^step +[0-9]+/' "$E2E_TMP/out" | sed 's/.*| loss \([0-9.]*\) |.*/\1/' | tr '\n' ' '; }

# shellcheck disable=SC2086
run "spare r2 without failures" 0 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule=
has "no failure: nothing masked" '^spare: r 2, 4 replicas, live 4, depth 1; failures masked 0, wipe-outs 0;'
clean=$(losses)

printf 'fail step=3 replica=1   ; replica 1 stops before step 3\n' > "$E2E_TMP/one.faults"
# shellcheck disable=SC2086
run "replica 1 fails before step 3" 0 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/one.faults"
has "masked" '^spare: r 2, 4 replicas, live 3, depth 2; failures masked 1, wipe-outs 0;'
has "survivors ran every step" '^step +5/5 .*\| live 3 depth 2$'
[ -n "$clean" ] && [ "$(losses)" = "$clean" ] && ok "losses equal to the run without the failure" \
  || bad "losses equal to the run without the failure" "clean: $clean; with the failure: $(losses)"

printf 'fail step=3 rank=2   ; rank 2 is replica 2 (one rank per replica here)\n' > "$E2E_TMP/rank.faults"
# shellcheck disable=SC2086
run "a rank's failure fails its replica" 0 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/rank.faults"
has "rank line masked" '^spare: .*live 3, depth 2; failures masked 1, wipe-outs 0;'
grep -q "replica 2 fails before step 3 (masked by SPARe)" "$E2E_TMP/out" && ok "rank 2 -> replica 2" \
  || bad "rank 2 -> replica 2" "$(grep 'fails before' "$E2E_TMP/out")"

printf 'fail step=3 replica=1\nfail step=4 replica=2   ; shard 2 was held by 1 and 2 only\n' > "$E2E_TMP/two.faults"
# shellcheck disable=SC2086
run "a wipe-out ends the run with exit 5" 5 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/two.faults"
has "wipe-out counted" '^spare: .*failures masked 1, wipe-outs 1;'
e2e_finish
