#!/bin/bash
# e2e/spare.sh: SPARe as a user meets it: `ftllm train` on 4 ranks, dp 4, spare.r 2, a fault
# file whose `fail` line stops replica 1 before step 3: the run finishes with the survivors, its
# losses are those of the run without the failure (the shard-keyed reduction adds the same shard
# gradients in the same order whichever replica computed them), the `spare:` line reports
# "failures masked 1, wipe-outs 0"; a second failure of a replica holding the last copy of a
# shard is a wipe-out: exit 5 and "wipe-outs 1" without checkpoints; with one, the run restarts
# in-process from it and finishes with the same losses. A `fail` line naming a rank fails its
# replica; a line naming a replica that has failed already is a warning. When replica 0 (world
# rank 0) fails, a surviving rank writes run.save_model. A hot spare (spare.spares) takes a
# failed replica's place. A rank DMR names suspect is retired the
# same way, also after a hot spare joined (one run on 6 ranks). A mixture of experts over ep 2
# ranks per replica (dp 2 x ep 2): the same losses as plain dp x ep data parallelism, a failed
# replica masked (a fail line naming a replica or a rank, a suspect rank), a wipe-out restarted
# from its checkpoint, a hot spare taking a replica's place, all with the fault-free run's
# losses.
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

# a second line naming the replica that has already failed: a warning, nothing else changes
# (seed 19 R02 of tests/mutants/random_sample.md: a look-up of its place that ran past the
# replicas crashed the run here)
printf 'fail step=3 replica=1\nfail step=4 replica=1   ; failed already\n' > "$E2E_TMP/again.faults"
# shellcheck disable=SC2086
run "a replica named again after it failed" 0 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/again.faults"
grep -qF "before step 4: the replicas named have failed already: nothing more to stop" <<< "$LAST_ERR" \
  && ok "the second line is only a warning" || bad "the second line is only a warning" "$LAST_ERR"
has "still one failure masked" '^spare: r 2, 4 replicas, live 3, depth 2; failures masked 1, wipe-outs 0;'
[ -n "$clean" ] && [ "$(losses)" = "$clean" ] && ok "a line naming a failed replica: losses unchanged" \
  || bad "a line naming a failed replica: losses unchanged" "clean: $clean; now: $(losses)"

# replica 0 (world rank 0) fails: the first rank still training writes run.save_model
printf 'fail step=3 replica=0\n' > "$E2E_TMP/zero.faults"
# shellcheck disable=SC2086
run "replica 0 fails, weights saved" 0 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/zero.faults" run.save_model="$E2E_TMP/zero.bin"
[ -s "$E2E_TMP/zero.bin" ] && ok "weights written by a surviving replica" \
  || bad "weights written by a surviving replica" "no $E2E_TMP/zero.bin; $(grep -i 'saved\|verdict' "$E2E_TMP/out")"

printf 'fail step=3 rank=2   ; rank 2 is replica 2 (one rank per replica here)\n' > "$E2E_TMP/rank.faults"
# shellcheck disable=SC2086
run "a rank's failure fails its replica" 0 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/rank.faults"
has "rank line masked" '^spare: .*live 3, depth 2; failures masked 1, wipe-outs 0;'
has "faults line counts the fail-stop line" '^faults: sdc injected 0, .*; fail-stop events 1, acted on by SPARe\)$'
grep -q "replica 2 fails before step 3" "$E2E_TMP/out" && grep -q "before step 3: 1 failure masked by SPARe" "$E2E_TMP/out" && ok "rank 2 -> replica 2" \
  || bad "rank 2 -> replica 2" "$(grep 'fails before' "$E2E_TMP/out")"

printf 'fail step=3 replica=1\nfail step=4 replica=2   ; shard 2 was held by 1 and 2 only\n' > "$E2E_TMP/two.faults"
# shellcheck disable=SC2086
run "a wipe-out ends the run with exit 5" 5 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/two.faults"
has "wipe-out counted" '^spare: .*failures masked 1, wipe-outs 1;'
has "faults line counts both fail-stop lines" '; fail-stop events 2, acted on by SPARe\)$'
# a wipe-out restarts in-process from the newest verified checkpoint (written by the survivors
# after the first failure), every replica back; only the steps after it are computed again
printf 'fail step=3 replica=1\nfail step=5 replica=2   ; shard 2 lost both holders\n' > "$E2E_TMP/wipe.faults"
# shellcheck disable=SC2086
run "a wipe-out restarts from the checkpoint" 0 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/wipe.faults" checkpoint.interval=3 checkpoint.dir="$E2E_TMP/ck" run.name=wipe
has "restart counted" '^spare: r 2, 4 replicas, live 4, depth 1; failures masked 1, wipe-outs 1;.* restarts 1 \(1 steps recomputed\);'
has "restored the survivors' checkpoint" '^spare: restored .*wipe.step-00000003.h5: step 3'
[ "$(grep -cE '^step +4/5 ' "$E2E_TMP/out")" = 2 ] && ok "step 4 computed twice, step 5 once" \
  || bad "step 4 computed twice" "$(grep -E '^step ' "$E2E_TMP/out")"
[ "$(losses | tr ' ' '\n' | awk 'NF' | uniq | tr '\n' ' ')" = "$clean" ] && ok "losses equal to the run without failures" \
  || bad "losses equal to the run without failures" "clean: $clean; with the restart: $(losses)"
# again into the same folder, which now holds the first run's step-5 checkpoint: a restart goes
# back to this run's own newest checkpoint, not to another run's later one
# shellcheck disable=SC2086
run "a restart again, an earlier run's files present" 0 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/wipe.faults" checkpoint.interval=3 checkpoint.dir="$E2E_TMP/ck" run.name=wipe
has "restored this run's checkpoint" '^spare: restored .*wipe.step-00000003.h5: step 3'
has "time lost to each" 'time lost: deeper levels [0-9.]+ s, regrid [0-9.]+ s, spare joins [0-9.]+ s, restarts [0-9.]+ s$'
# shellcheck disable=SC2086
run "spare.wipeout = requeue: exit 5" 5 "" 4 "$FTLLM" train inputs/default.ini $common faults.schedule="$E2E_TMP/wipe.faults" checkpoint.interval=3 checkpoint.dir="$E2E_TMP/ck2" run.name=wipe spare.wipeout=requeue
grep -q 'no in-process restart (spare.wipeout = requeue)' "$E2E_TMP/err" && ok "no restart" \
  || bad "no restart" "$(cat "$E2E_TMP/err")"

# a hot spare: dp 3 + 1 spare on 4 ranks; it takes replica 1's place before step 3, and
# replica 2's failure before step 5 is still masked (without the spare: a wipe-out, above)
spare3="parallel.dp=3 spare.spares=1 train.steps=6"
# shellcheck disable=SC2086
run "dp 3 + 1 spare without failures" 0 "" 4 "$FTLLM" train inputs/default.ini $common $spare3 faults.schedule=
has "the spare idled" '^spare: r 2, 3 replicas, live 3, depth 1; failures masked 0, wipe-outs 0;.* spares used 0 of 1;'
clean3=$(losses)
printf 'fail step=3 replica=1\nfail step=5 replica=2\n' > "$E2E_TMP/spare.faults"
# shellcheck disable=SC2086
run "a hot spare takes replica 1's place" 0 "" 4 "$FTLLM" train inputs/default.ini $common $spare3 faults.schedule="$E2E_TMP/spare.faults"
has "spare used, both masked" '^spare: r 2, 3 replicas, live 2, depth 2; failures masked 2, wipe-outs 0;.* spares used 1 of 1;'
has "the spare joined" '^spare: replica 1 failed before step 3: hot spare 0 \(1 of 1\) took its place'
has "redundancy restored until step 5" '^step +4/6 .*\| live 3 depth 1$'
[ -n "$clean3" ] && [ "$(losses)" = "$clean3" ] && ok "losses equal to the run without failures (spare)" \
  || bad "losses equal to the run without failures (spare)" "clean: $clean3; with the spare: $(losses)"
# a rank DMR names suspect (its checks mismatched in dmr.suspect_after steps) is retired: SPARe
# takes its replica out of the run before the next step, masked (dp 4, no spare) or by the hot
# spare (dp 3 + 1); the losses stay the run's without faults (every flip rolled back)
printf 'sdc step=2 rank=1 op=matmul:3 bit=21\nsdc step=3 rank=1 op=matmul:5 bit=22\n' > "$E2E_TMP/sus.faults"
sus="dmr.mode=naive dmr.suspect_after=2 faults.schedule=$E2E_TMP/sus.faults"
# shellcheck disable=SC2086
run "a suspect rank's replica retired" 0 "" 4 "$FTLLM" train inputs/default.ini $common $sus
grep -q '^warning: dmr: rank 1 is suspect: its checks mismatched in 2 steps (dmr.suspect_after = 2)' \
  "$E2E_TMP/err" && ok "suspect: named" || bad "suspect: named" "$(head -c 600 "$E2E_TMP/err")"
has "suspect: retired before step 4" '^dmr: rank 1 is suspect: SPARe retires its replica 1 before step 4$'
has "suspect: masked" '^spare: r 2, 4 replicas, live 3, depth 2; failures masked 1, wipe-outs 0;'
has "suspect: both flips caught" '^faults: sdc injected 2, detected 2, rolled back 2, missed 0 '
has "suspect: counted on the dmr line" '^dmr: mode naive, .*suspects none \(1 retired by SPARe\), overhead'
[ -n "$clean" ] && [ "$(losses)" = "$clean" ] && ok "suspect: losses equal to the run without faults" \
  || bad "suspect: losses equal to the run without faults" "clean: $clean; with the retirement: $(losses)"
# after replica 0 failed, world rank 1 is replica 2's: a suspect rank 1 retires replica 2
printf 'fail step=2 replica=0\nsdc step=3 rank=2 op=matmul:3 bit=21\nsdc step=4 rank=2 op=matmul:5 bit=22\n' > "$E2E_TMP/sus2.faults"
# shellcheck disable=SC2086
run "a suspect after a failure" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=6 \
  dmr.mode=naive dmr.suspect_after=2 faults.schedule="$E2E_TMP/sus2.faults"
has "suspect after a failure: its replica, not its place" '^dmr: rank 1 is suspect: SPARe retires its replica 2 before step 5$'
has "suspect after a failure: both masked" '^spare: r 2, 4 replicas, live 2, depth 2; failures masked 2, wipe-outs 0;'
has "suspect after a failure: flips counted" '^faults: sdc injected 2, detected 2, rolled back 2, missed 0 '
# dp 2 x tp 2: world rank 3 is replica 1's second rank; the suspect's whole replica goes
printf 'sdc step=2 rank=3 op=matmul:3 bit=21\nsdc step=3 rank=3 op=matmul:5 bit=22\n' > "$E2E_TMP/sus3.faults"
# shellcheck disable=SC2086
run "a suspect in a tp 2 replica" 0 "" 4 "$FTLLM" train inputs/default.ini $common parallel.dp=2 \
  parallel.tp=2 dmr.mode=naive dmr.suspect_after=2 faults.schedule="$E2E_TMP/sus3.faults"
has "suspect in tp 2: its replica" '^dmr: rank 3 is suspect: SPARe retires its replica 1 before step 4$'
has "suspect in tp 2: masked" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;'
# a replica that fails keeps its count: the flip its rank caught before (and the one it never
# applied) stay on the faults line, its checks on the dmr line
printf 'sdc step=2 rank=1 op=matmul:3 bit=21\nfail step=3 replica=1\nsdc step=5 rank=1 op=matmul:0 bit=3\n' > "$E2E_TMP/gone.faults"
# shellcheck disable=SC2086
run "a failed replica's flips still counted" 0 "" 4 "$FTLLM" train inputs/default.ini $common dmr.mode=naive faults.schedule="$E2E_TMP/gone.faults"
has "gone: its flip counted, the later one not applied" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 \(schedule .*; 1 flip not applied; fail-stop events 1, acted on by SPARe\)$'
has "gone: its mismatch counted" '^dmr: mode naive, .*mismatches 1, steps redone 1 of 6 attempts'
# shellcheck disable=SC2086
run "a suspect rank's replica replaced by the hot spare" 0 "" 4 "$FTLLM" train inputs/default.ini $common $spare3 $sus
has "suspect: the spare joined" '^spare: replica 1 failed before step 4: hot spare 0 \(1 of 1\) took its place'
has "suspect: redundancy back" '^spare: r 2, 3 replicas, live 3, depth 1; failures masked 1, wipe-outs 0;.* spares used 1 of 1;'
has "suspect: the spare's place is not suspect" '^dmr: mode naive, .*suspects none \(1 retired by SPARe\), overhead'
[ -n "$clean3" ] && [ "$(losses)" = "$clean3" ] && ok "suspect: losses equal (spare)" \
  || bad "suspect: losses equal (spare)" "clean: $clean3; with the retirement: $(losses)"
# a suspect whose replica the schedule fails before SPARe retires it: the hot spare takes the
# place, and the place is not suspect any more (the report named r1, the spare's place, before)
printf 'sdc step=2 rank=1 op=matmul:3 bit=21\nsdc step=3 rank=1 op=matmul:5 bit=22\nfail step=4 replica=1\n' > "$E2E_TMP/susfail.faults"
# shellcheck disable=SC2086
run "a suspect's replica fails by the schedule" 0 "" 4 "$FTLLM" train inputs/default.ini $common $spare3 \
  dmr.mode=naive dmr.suspect_after=2 faults.schedule="$E2E_TMP/susfail.faults"
has "suspect failed: the spare joined" '^spare: replica 1 failed before step 4: hot spare 0 \(1 of 1\) took its place'
has "suspect failed: its place not suspect" '^dmr: mode naive, .*mismatches 2, steps redone 2 of 8 attempts, unchecked 0, suspects none, overhead'
# dp 2 x tp 2 + 1 spare (6 ranks): rank 1 suspect, replica 0 retired, the hot spare takes its
# place; rank 2 (replica 1), which mismatched once before the spare joined and once after, is
# suspect on every rank, the spare's too (it never saw the first): replica 1 retired, masked.
# Before, the spare's ranks counted one step and the others two: the others retired replica 1
# alone, and the job hung. The report's attempts are the job's, not the joined spare's.
printf 'sdc step=2 rank=1 op=matmul:3 bit=21\nsdc step=2 rank=2 op=matmul:5 bit=22\nsdc step=3 rank=1 op=matmul:5 bit=22\nsdc step=5 rank=2 op=matmul:3 bit=21\n' > "$E2E_TMP/sus4.faults"
# shellcheck disable=SC2086
E2E_TIMEOUT=120 run "suspects before and after a spare joined" 0 "" 6 "$FTLLM" train inputs/default.ini \
  $common parallel.dp=2 parallel.tp=2 spare.spares=1 train.steps=6 dmr.mode=naive \
  dmr.suspect_after=2 faults.schedule="$E2E_TMP/sus4.faults"
has "spare joined: the first suspect's replica" '^dmr: rank 1 is suspect: SPARe retires its replica 0 before step 4$'
has "spare joined: a count from before it" '^dmr: rank 2 is suspect: SPARe retires its replica 1 before step 6$'
has "spare joined: the job's attempts" '^dmr: mode naive, .*mismatches 4, steps redone 3 of 8 attempts, .*suspects none \(2 retired by SPARe\)'
# shellcheck disable=SC2086
run "spares need the ranks" 2 "the layout (dp + spare.spares)" 4 "$FTLLM" train inputs/default.ini $common spare.spares=1
# expert parallelism: a replica is its 2 ep ranks (world ranks 2 and 3 are replica 1), each
# computing its own part of a shard; r 1 without failures reads plain data parallelism's data
moe="model.experts=4 model.top_k=2 parallel.ep=2 parallel.dp=2"
# shellcheck disable=SC2086
run "moe ep 2 without failures" 0 "" 4 "$FTLLM" train inputs/default.ini $common $moe faults.schedule=
has "moe: nothing masked" '^spare: r 2, 2 replicas, live 2, depth 1; failures masked 0, wipe-outs 0;'
clean_moe=$(losses)
# shellcheck disable=SC2086
run "moe ep 2, plain data parallelism" 0 "" 4 "$FTLLM" train inputs/default.ini $common $moe spare.r=0 faults.schedule=
[ -n "$clean_moe" ] && [ "$(losses)" = "$clean_moe" ] && ok "moe: SPARe's losses are plain dp x ep's" \
  || bad "moe: SPARe's losses are plain dp x ep's" "spare: $clean_moe; plain: $(losses)"
printf 'fail step=3 replica=1   ; world ranks 2 and 3\n' > "$E2E_TMP/moe.faults"
# shellcheck disable=SC2086
run "moe ep 2: replica 1 fails before step 3" 0 "" 4 "$FTLLM" train inputs/default.ini $common $moe faults.schedule="$E2E_TMP/moe.faults"
has "moe: masked" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;'
has "moe: survivors ran every step" '^step +5/5 .*\| live 1 depth 2$'
[ -n "$clean_moe" ] && [ "$(losses)" = "$clean_moe" ] && ok "moe: losses equal to the run without the failure" \
  || bad "moe: losses equal to the run without the failure" "clean: $clean_moe; with the failure: $(losses)"
# validation counts one ep rank's loss, as plain data parallelism does
vals() { grep -E '^step +[0-9]+/[0-9]+ \| val loss' "$E2E_TMP/out"; }
# shellcheck disable=SC2086
run "moe ep 2: validation" 0 "" 4 "$FTLLM" train inputs/default.ini $common $moe train.steps=2 train.val_batches=2 faults.schedule=
val_spare=$(vals)
# shellcheck disable=SC2086
run "moe ep 2: validation, plain" 0 "" 4 "$FTLLM" train inputs/default.ini $common $moe spare.r=0 train.steps=2 train.val_batches=2 faults.schedule=
[ -n "$val_spare" ] && [ "$(vals)" = "$val_spare" ] && ok "moe: SPARe's validation loss is plain dp x ep's" \
  || bad "moe: SPARe's validation loss is plain dp x ep's" "spare: $val_spare; plain: $(vals)"
printf 'fail step=3 rank=3   ; replica 1 (ranks 2 and 3)\n' > "$E2E_TMP/moerank.faults"
# shellcheck disable=SC2086
run "moe ep 2: a rank's failure fails its replica" 0 "" 4 "$FTLLM" train inputs/default.ini $common $moe faults.schedule="$E2E_TMP/moerank.faults"
grep -q "replica 1 fails before step 3" "$E2E_TMP/out" && ok "moe: rank 3 -> replica 1" \
  || bad "moe: rank 3 -> replica 1" "$(grep -i 'fail' "$E2E_TMP/out" "$E2E_TMP/err" | head -5)"
has "moe: rank line masked" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;'
# a suspect ep rank (DMR) retires its whole replica; every flip rolled back, the losses kept
printf 'sdc step=2 rank=3 op=matmul:3 bit=21\nsdc step=3 rank=3 op=matmul:5 bit=22\n' > "$E2E_TMP/moesus.faults"
# shellcheck disable=SC2086
run "moe ep 2: a suspect rank's replica retired" 0 "" 4 "$FTLLM" train inputs/default.ini $common $moe dmr.mode=naive dmr.suspect_after=2 faults.schedule="$E2E_TMP/moesus.faults"
has "moe: suspect retired" '^dmr: rank 3 is suspect: SPARe retires its replica 1 before step 4$'
has "moe: suspect masked" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;'
has "moe: both flips caught" '^faults: sdc injected 2, detected 2, rolled back 2, missed 0 '
[ -n "$clean_moe" ] && [ "$(losses)" = "$clean_moe" ] && ok "moe: suspect: losses equal to the run without faults" \
  || bad "moe: suspect: losses equal to the run without faults" "clean: $clean_moe; with the retirement: $(losses)"
printf 'fail step=4 replica=1   ; r 1: shard 1 has no other holder\n' > "$E2E_TMP/moewipe.faults"
# shellcheck disable=SC2086
run "moe ep 2: a wipe-out restarts from the checkpoint" 0 "" 4 "$FTLLM" train inputs/default.ini $common $moe spare.r=1 faults.schedule="$E2E_TMP/moewipe.faults" checkpoint.interval=2 checkpoint.dir="$E2E_TMP/ckmoe" run.name=moewipe
has "moe: restart counted" '^spare: r 1, 2 replicas, live 2, depth 1; failures masked 0, wipe-outs 1;.* restarts 1 \(1 steps recomputed\);'
[ "$(losses | tr ' ' '\n' | awk 'NF' | uniq | tr '\n' ' ')" = "$clean_moe" ] && ok "moe: losses equal after the restart" \
  || bad "moe: losses equal after the restart" "clean: $clean_moe; with the restart: $(losses)"
# a hot spare (2 more ranks): each of its ep ranks takes its experts from the same ep rank
# of the live replica
# shellcheck disable=SC2086
run "moe ep 2: a hot spare takes replica 1's place" 0 "" 6 "$FTLLM" train inputs/default.ini $common $moe spare.spares=1 faults.schedule="$E2E_TMP/moewipe.faults"
has "moe: the spare joined" '^spare: replica 1 failed before step 4: hot spare 0 \(1 of 1\) took its place'
has "moe: spare used" '^spare: r 2, 2 replicas, live 2, depth 1; failures masked 1, wipe-outs 0;.* spares used 1 of 1;'
[ -n "$clean_moe" ] && [ "$(losses)" = "$clean_moe" ] && ok "moe: losses equal (spare)" \
  || bad "moe: losses equal (spare)" "clean: $clean_moe; with the spare: $(losses)"
# make run's deck (inputs/system.ini, 4 ranks): a flip caught, a spare used, a failure masked,
# a wipe-out answered by a restart from the checkpoint of step 10, the summary
run "make run's deck" 0 "" 4 "$FTLLM" train inputs/system.ini checkpoint.dir="$E2E_TMP/cksys" train.sample_tokens=0
has "system: flip caught" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 '
has "system: spare" '^spare: replica 1 failed before step 8: hot spare 0 \(1 of 1\) took its place'
has "system: masked" '^spare: replica 2 failed after step 13: masked deeper'
has "system: restart" '^spare: restarted in-process from the checkpoint of step 10 after the wipe-out before step 17: every replica back \(3 live, depth 1\), 6 steps to compute again'
has "system: spare line" '^spare: r 2, 3 replicas, live 3, depth 1; failures masked 2, wipe-outs 1; shards computed 78 vs needed 78 .* spares used 1 of 1; restarts 1 \(6 steps recomputed\);'
has "system: verdict" '^verdict: OK \(trained 20 steps'
e2e_finish
