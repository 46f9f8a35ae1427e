#!/bin/bash
# e2e/dmr.sh: DMR and the fault schedule as a user meets them. Every bad fault file in
# tests/e2e/bad_faults/ gives exactly one "FILE:LINE: message" line on stderr (its "; expect:"
# text; "; np:" and "; args:" as for bad decks) and exit code 2; a missing or unreadable file
# is one line too. The one-rank default deck (make run NP=1 DECK=inputs/default.ini) catches its one injected flip and rolls it back,
# ending bitwise where a run without faults and without DMR ends; piggyback DMR on a pp2 pipeline
# with AC catches a seeded campaign; a fail-stop line without SPARe is a one-line error; a flip
# after a shorter run's end is left out with a warning; with dmr.mode = off a flip is missed.
# The schedule as read is said once at the start (counts, plurals). A flip without elem= hits an element drawn from run.seed; dmr.suspect_after = 1 names the rank
# in the dmr: line; an ep-sharded run prints no sample (it warns).
# The MoE dynamic planner (dmr.moe_dynamic) on ep2 catches a campaign on the expert ops.
# `ftllm plan` writes a plan that `ftllm train` loads (dmr.mode = planned); bad plan files (a good
# one with one edit) and a plan file missing on one rank are one "FILE:LINE: message" line, exit 2
# (bad files on two ranks: the first bad rank's line);
# a plan it cannot write is one line naming the file, exit 1, and not reported as written.
# Runs the sanitizer build ($FTLLM_SAN) too: the bad fault files, the pipeline's refinement, and
# a schedule of exactly 16 events.
set -u
source "$(dirname "$0")/lib.bash"
short="train.steps=4 train.sample_tokens=0 train.val_batches=0"
for bin in "${e2e_bins[@]}"; do
  tag=$(e2e_tag "$bin")
  for f in tests/e2e/bad_faults/*.faults; do
    want=$(sed -n 's/^; expect: //p' "$f" | head -1)
    args=$(sed -n 's/^; args: //p' "$f" | head -1)
    np=$(sed -n 's/^; np: //p' "$f" | head -1)
    # shellcheck disable=SC2086
    run "$tag bad fault file $(basename "$f")" 2 "$f:$want" "${np:-1}" "$bin" train inputs/default.ini $short faults.schedule="$f" $args
  done
  # shellcheck disable=SC2086
  run "$tag missing fault file" 2 "nope.faults: cannot open the fault schedule: No such file or directory (faults.schedule)" 1 "$bin" train inputs/default.ini $short faults.schedule=nope.faults
  # shellcheck disable=SC2086
  run "$tag fault file is a directory" 2 "inputs: cannot read the fault schedule (is it a directory?)" 2 "$bin" train inputs/default.ini $short parallel.dp=2 faults.schedule=inputs
done

# mode planned: `ftllm plan` profiles, writes the plan and prints its table; `ftllm train` loads
# it; bad plan files (each made from a good one by one edit) are one "FILE:LINE: message" line
plan="$E2E_TMP/p.plan"
# shellcheck disable=SC2086
run "ftllm plan" 0 "" 1 "$FTLLM" plan inputs/default.ini train.ac=full dmr.plan="$plan" dmr.profile_steps=2
has "plan table" '^ +[0-9]+ +[0-9]+ +matmul\.fwd +forward +0 +piggyback '
has "plan totals" '^\[r0\] plan: windows [0-9]+ .*predicted overhead [0-9.]+ ms per step'
has "plan written" "^plan: written to $plan"
# memory in time: what the plan's checks keep at once over the step, within the budget (default
# 1024 MiB); 0.0 is a valid answer (the plan follows measured times: a sanitizer build's defer
# only a few small checks)
kept=$(sed -n 's/^\[r0\] plan: phases 1,2,3, budget 1024.0 MiB (its checks keep at most \([0-9.]*\) MiB at once.*/\1/p' "$E2E_TMP/out" | head -1)
awk -v k="${kept:-x}" 'BEGIN { exit !(k ~ /^[0-9.]+$/ && k <= 1024) }' && ok "plan: kept at once within the budget ($kept MiB)" || bad "plan: kept at once within the budget" "$(grep -a 'plan: phases' "$E2E_TMP/out" | head -1)"
grep -q '^ftllm-dmr-plan 2$' "$plan" && ok "plan file header" || bad "plan file header" "$(head -c 300 "$plan")"
! grep -q 'ends before a plan exists' "$E2E_TMP/err" && ok "ftllm plan: no short-run warning" || bad "ftllm plan: no short-run warning" "$(grep -a 'plan exists' "$E2E_TMP/err")"
# a plan that cannot be written: one line naming the file, a failed exit, no "written" claim
run "plan not writable" 1 "$E2E_TMP/none/p.plan: cannot write the DMR plan" 1 "$FTLLM" plan inputs/default.ini train.ac=full dmr.plan="$E2E_TMP/none/p.plan" dmr.profile_steps=2
has "plan not writable: totals" '^\[r0\] plan: windows'
! grep -q '^plan: written' "$E2E_TMP/out" && ok "plan not writable: not claimed" || bad "plan not writable: not claimed" "$(grep '^plan:' "$E2E_TMP/out")"
# shellcheck disable=SC2086
run "train loads the plan" 0 "" 1 "$FTLLM" train inputs/default.ini $short train.ac=full dmr.mode=planned dmr.plan="$plan"
has "plan loaded" "^dmr: mode planned: the plan $plan "
# the schedule as read, said once at the start (counts and plurals: scripts and people read it)
has "the schedule said: 1 flip" '^faults: inputs/default.faults: 1 bit flip \(1 sdc, 0 sdc-random lines\), 0 fail-stop events$'
has "planned flip caught" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 '
has "planned dmr line" '^dmr: mode planned, checks naive [0-9]+ piggyback [1-9][0-9]* deferred [0-9]+ agc [0-9]+, mismatches [1-9]'
has "the plan's bound" '^dmr: planned: lower bound [0-9.]+ ms per step \(issue 10.s: .*\), [0-9.]+ ms in time order, of a profiled step of [1-9][0-9.]* ms without checks'
has "planned time by kind" '^dmr: check time by kind, summed over ranks \(host wall time\): at once \(re-execution and compare\) [0-9.]+ s, piggyback fingerprints ([1-9][0-9]*\.[0-9]+|0\.[0-9]*[1-9][0-9]*) s, keeping deferred checks. inputs [0-9.]+ s, deferred replays [0-9.]+ s \([0-9.]+ s in windows\), the rest \(agreement, injections\) [0-9.]+ s$'
n_entry=$(grep -m1 '^op .* piggyback ' "$plan" | awk '{print $2}')
n_line=$(grep -n -m1 '^op .* piggyback ' "$plan" | cut -d: -f1)
n_kind=$(grep -m1 '^op .* piggyback ' "$plan" | awk '{print $4}')
n_mb=$(grep -m1 '^op .* piggyback ' "$plan" | awk '{print $3}')
badplan() { # NAME LINE MESSAGE SED-SCRIPT [overrides]
  sed "$4" "$plan" > "$E2E_TMP/bad.plan"
  # shellcheck disable=SC2086
  local want="$E2E_TMP/bad.plan:$2: $3"
  [ -n "$2" ] || want=$3
  run "bad plan: $1" 2 "$want" 1 "$FTLLM" train inputs/default.ini $short train.ac=full dmr.mode=planned dmr.plan="$E2E_TMP/bad.plan" ${5:-}
}
badplan "not a plan" 4 "expected 'ftllm-dmr-plan 2'" 's/^ftllm-dmr-plan 2$/ftllm-dmr-plan 3/'
badplan "other rank" 5 "'rank 1 of 1 layout tp=1 pp=1 dp=1 ep=1': this plan is for another rank or layout" 's/^rank 0 of 1 /rank 1 of 1 /'
badplan "other tape" 6 "the plan was made for other tapes" 's/^tape .*/tape 0123456789abcdef entries 149 optimizer 32 micro_batches 1/'
badplan "other ac" "" "model, layout or train.ac differ" 's/^x//' train.ac=every
badplan "bad strategy" "$n_line" "strategy 'twice': expected piggyback, naive, deferred or agc" "${n_line}s/ piggyback / twice /"
badplan "short op line" "$n_line" "an op line has 12 fields" "${n_line}s/ - - / - /"
badplan "wrong op" "$n_line" "entry $n_entry is $n_kind forward" "${n_line}s/ $n_kind / crossent.fwd /"
badplan "missing op" "" ": the file ends before the op line of entry $n_entry mb $n_mb " "${n_line}d"
badplan "unknown line" 8 "'hello': expected a window or op line" '8s/^/hello /'
badplan "twin split" "" "piggyback is for both or neither" "${n_line}s/ piggyback / naive /"
badplan "truncated" "" "the file ends before the op line of entry" '$d'
# a plan has a strategy per micro-batch: a run with another parallel.microbatches refuses it
# shellcheck disable=SC2086
run "ftllm plan, 2 micro-batches" 0 "" 1 "$FTLLM" plan inputs/default.ini train.ac=full dmr.plan="$E2E_TMP/m2.plan" dmr.profile_steps=2 parallel.microbatches=2
grep -q ' micro_batches 2$' "$E2E_TMP/m2.plan" && grep -q '^op [0-9]* 1 ' "$E2E_TMP/m2.plan" && ok "plan per micro-batch" || bad "plan per micro-batch" "$(grep -m3 '^tape\|^op' "$E2E_TMP/m2.plan")"
# shellcheck disable=SC2086
run "plan of other micro-batches" 2 "$E2E_TMP/m2.plan:6: the plan was made for 2 micro-batches per step; this run has 4 (parallel.microbatches" 1 "$FTLLM" train inputs/default.ini $short train.ac=full dmr.mode=planned dmr.plan="$E2E_TMP/m2.plan" parallel.microbatches=4
cp "$plan" "$E2E_TMP/half.r0"
# shellcheck disable=SC2086
run "plan file missing on one rank" 2 "$E2E_TMP/half.r1: missing, while other ranks have their plan files" 2 "$FTLLM" train inputs/default.ini $short parallel.dp=2 dmr.mode=planned dmr.plan="$E2E_TMP/half"
# bad plan files on two ranks: the first bad rank's message (rank 0's bad header, not rank 1's
# plan of another layout)
sed 's/^ftllm-dmr-plan 2$/ftllm-dmr-plan 3/' "$plan" > "$E2E_TMP/both.r0"
cp "$plan" "$E2E_TMP/both.r1"
# shellcheck disable=SC2086
run "bad plan files on two ranks" 2 "$E2E_TMP/both.r0:4: expected 'ftllm-dmr-plan 2'" 2 "$FTLLM" train inputs/default.ini $short parallel.dp=2 dmr.mode=planned dmr.plan="$E2E_TMP/both"

# the default deck: one flip at step 3, caught, rolled back, and the weights end where a clean run ends
# shellcheck disable=SC2086
run "default deck with its flip" 0 "" 1 "$FTLLM" train inputs/default.ini $short run.save_model="$E2E_TMP/dmr.bin"
has "flip injected" '^\[r0\] faults: step 3: flipped bit 30 of .* written by matmul.fwd'
has "mismatch logged" '^\[r0\] dmr: step 3: 1 check mismatched, the first: matmul.fwd .* naive check'
has "step redone" '^dmr: step 3: mismatch on 1 of 1 rank \(r0\): rolled back'
has "faults line" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 '
has "dmr line" '^dmr: mode naive, checks naive [0-9]+ piggyback 0, mismatches 1, steps redone 1 of 5 attempts, unchecked 0, suspects none, overhead [0-9.]+%'
has "naive time by kind: at once only" '^dmr: check time by kind, summed over ranks \(host wall time\): at once \(re-execution and compare\) ([1-9][0-9]*\.[0-9]+|0\.[0-9]*[1-9][0-9]*) s, piggyback fingerprints 0\.000 s, keeping deferred checks. inputs 0\.000 s, deferred replays 0\.000 s \(0\.000 s in windows\), the rest'
# dmr.suspect_after = 1: the rank whose check mismatched (rank 0) is named a suspect
# shellcheck disable=SC2086
run "default deck, suspect after 1" 0 "" 1 "$FTLLM" train inputs/default.ini $short dmr.suspect_after=1
has "suspect named" '^dmr: mode naive, .* suspects r0, overhead'
grep -q '^warning: dmr: rank 0 stays in the run: nothing retires a suspect rank without SPARe' \
  "$E2E_TMP/err" && ok "suspect without SPARe: stays, and says so" ||
  bad "suspect without SPARe: stays, and says so" "$(head -c 600 "$E2E_TMP/err")"
# shellcheck disable=SC2086
run "default deck without DMR and faults" 0 "" 1 "$FTLLM" train inputs/default.ini $short dmr.mode=off faults.schedule= run.save_model="$E2E_TMP/plain.bin"
if grep -q '^faults:\|^dmr:' "$E2E_TMP/out"; then bad "no report lines when off" "$(grep '^faults:\|^dmr:' "$E2E_TMP/out")"; else ok "no report lines when off"; fi
cmp -s "$E2E_TMP/dmr.bin" "$E2E_TMP/plain.bin" && ok "rolled-back run bitwise equal to the clean run" || bad "rolled-back run bitwise equal to the clean run" "weights differ"

# piggyback on a pipeline with AC: a seeded campaign, every flip caught
cat > "$E2E_TMP/campaign.faults" <<EOF
sdc-random count=12 seed=5 steps=1-4 target=both
EOF
# shellcheck disable=SC2086
run "piggyback pp2 campaign" 0 "" 2 "$FTLLM" train inputs/default.ini $short parallel.pp=2 parallel.microbatches=2 train.ac=full dmr.mode=piggyback faults.schedule="$E2E_TMP/campaign.faults"
has "pp2 1F1B: two pipeline slots" '^model: [0-9]+ parameters on this rank .*; tape [0-9]+ entries x 2 slots, activations [0-9.]+ MiB; '
has "campaign all caught" '^faults: sdc injected 12, detected 12, rolled back 12, missed 0 .*fail-stop events 0\)'
has "the schedule said: 12 flips" "^faults: $E2E_TMP/campaign.faults: 12 bit flips \\(0 sdc, 1 sdc-random line\\), 0 fail-stop events$"
has "piggyback checks" '^dmr: mode piggyback, checks naive [0-9]+ piggyback [1-9][0-9]*, '
has "campaign verdict" '^verdict: OK'

# planned on a pipeline: the stages refine their plans together (dmr.refine = pipeline, the
# default), `ftllm plan` says so and what the simulation predicts; refine off: not a word of it;
# a campaign on the refined plans (steps 3-6: after the 2 profiled steps), every flip caught
# shellcheck disable=SC2086
run "plan pp2 refined" 0 "" 2 "$FTLLM" plan inputs/default.ini parallel.pp=2 parallel.microbatches=2 train.ac=full dmr.profile_steps=2
has "plan pp2: refinement line" "^plan: the pipeline's stages refined their plans together \(dmr.refine = pipeline\): simulated step [0-9.]+ ms without checks, [0-9.]+ ms with every check at once, [0-9.]+ ms under the stages' own plans, [0-9.]+ ms refined \([0-9]+ op executions moved between naive and deferred\); the pipeline's lower bound [0-9.]+ ms"
# shellcheck disable=SC2086
run "plan pp2, refine off" 0 "" 2 "$FTLLM" plan inputs/default.ini parallel.pp=2 parallel.microbatches=2 train.ac=full dmr.profile_steps=2 dmr.refine=off
! grep -q 'refined their plans' "$E2E_TMP/out" && ok "refine off: no refinement" || bad "refine off: no refinement" "$(grep 'refined' "$E2E_TMP/out")"
cat > "$E2E_TMP/late.faults" <<EOF
sdc-random count=12 seed=9 steps=3-6 target=both
EOF
run "planned pp2 campaign, refined plans" 0 "" 2 "$FTLLM" train inputs/default.ini train.steps=6 train.sample_tokens=0 train.val_batches=0 parallel.pp=2 parallel.microbatches=2 train.ac=full dmr.mode=planned dmr.profile_steps=2 faults.schedule="$E2E_TMP/late.faults"
has "refined campaign all caught" '^faults: sdc injected 12, detected 12, rolled back 12, missed 0 '
has "refined campaign verdict" '^verdict: OK'
has "profiled steps said" '^dmr: mode planned: the first 2 steps are profiled \(checked naively\), then planned \(phases 1,2,3, deferred checks keep at most 1024 MiB\)$'
# each stage says what it planned from its profile: counts, "segment" for one, else "segments"
for r in 0 1; do
  n=$(grep -cE "^\[r$r\] dmr: planned from 2 profiled steps: piggyback [0-9]+, agc [0-9]+ \(([0-9]+) segments?\), deferred [0-9]+, naive [0-9]+ op executions a step; predicted overhead [0-9.]+ ms of a [0-9.]+ ms step$" "$E2E_TMP/out")
  plural=$(sed -nE "s/^\[r$r\] dmr: planned from .*\(([0-9]+) segment(s?)\).*/\1 \2/p" "$E2E_TMP/out" | awk '{print ($1 == 1) == ($2 == "")}')
  [ "$n" = 1 ] && [ "$plural" = 1 ] && ok "stage $r: its plan said" || bad "stage $r: its plan said" "$(grep "planned from" "$E2E_TMP/out")"
done
# tp 2 x pp 2 (the paper's layout, small): tp rank 0's pipeline refines and every peer runs
# its stage's naive/deferred choices; `ftllm plan` says so, and a campaign on those plans catches every flip
# shellcheck disable=SC2086
run "plan tp2 pp2 refined" 0 "" 4 "$FTLLM" plan inputs/default.ini parallel.tp=2 parallel.pp=2 parallel.microbatches=2 train.ac=full dmr.profile_steps=2 dmr.plan="$E2E_TMP/tpp"
has "plan tp2 pp2: refinement line" "^plan: the pipeline's stages refined their plans together \(dmr.refine = pipeline\): simulated step [0-9.]+ ms without checks, .* refined \([0-9]+ op executions moved between naive and deferred\)"
# the refined plans, the peers' too, written and loaded again: the flip caught
# shellcheck disable=SC2086
run "train tp2 pp2 on the refined plan files" 0 "" 4 "$FTLLM" train inputs/default.ini $short parallel.tp=2 parallel.pp=2 parallel.microbatches=2 train.ac=full dmr.mode=planned dmr.plan="$E2E_TMP/tpp"
has "tp2 pp2 plan files: the flip caught" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 '
run "planned tp2 pp2 campaign, refined plans" 0 "" 4 "$FTLLM" train inputs/default.ini train.steps=6 train.sample_tokens=0 train.val_batches=0 parallel.tp=2 parallel.pp=2 parallel.microbatches=2 train.ac=full dmr.mode=planned dmr.profile_steps=2 faults.schedule="$E2E_TMP/late.faults"
has "tp2 pp2 refined campaign all caught" '^faults: sdc injected 12, detected 12, rolled back 12, missed 0 '
has "tp2 pp2 refined campaign verdict" '^verdict: OK'
# ep 2 x pp 2 with experts: the same, the first peer (tp and ep rank 0) refining
run "planned ep2 pp2 campaign, refined plans" 0 "" 4 "$FTLLM" train inputs/default.ini train.steps=6 train.sample_tokens=0 train.val_batches=0 parallel.ep=2 parallel.pp=2 model.experts=4 parallel.microbatches=2 train.ac=full dmr.mode=planned dmr.profile_steps=2 faults.schedule="$E2E_TMP/late.faults" run.log_level=debug
has "ep2 pp2 refined" "^\[r0\] dmr: pipeline refinement: simulated step"
has "ep2 pp2 refined campaign all caught" '^faults: sdc injected 12, detected 12, rolled back 12, missed 0 '
has "ep2 pp2 refined campaign verdict" '^verdict: OK'
# the sanitizer build through the pipeline's refinement (the stages' parts gathered, simulated,
# the answer broadcast) and a refined campaign with experts: no memory error, every flip caught
if [ -n "${FTLLM_SAN:-}" ] && [ -x "$FTLLM_SAN" ]; then
  run "address sanitizer: plan pp2 refined" 0 "" 2 "$FTLLM_SAN" plan inputs/default.ini parallel.pp=2 parallel.microbatches=2 train.ac=full dmr.profile_steps=2 dmr.plan="$E2E_TMP/san.plan"
  has "address sanitizer: plan pp2 refinement line" "^plan: the pipeline's stages refined their plans together"
  run "address sanitizer: ep2 pp2 refined campaign" 0 "" 4 "$FTLLM_SAN" train inputs/default.ini train.steps=6 train.sample_tokens=0 train.val_batches=0 parallel.ep=2 parallel.pp=2 model.experts=4 parallel.microbatches=2 train.ac=full dmr.mode=planned dmr.profile_steps=2 faults.schedule="$E2E_TMP/late.faults"
  has "address sanitizer: ep2 pp2 refined campaign all caught" '^faults: sdc injected 12, detected 12, rolled back 12, missed 0 '
  # a schedule of exactly 16 events fills the parser's first allocation: a loop that reads one
  # event past the schedule (each step's fail-stop lines, train_dmr.c) reads past the heap block
  rm -f "$E2E_TMP/f16.faults"
  for s in 1 2 3 4; do for k in 0 1 2 3; do echo "sdc step=$s rank=0 op=matmul:$k bit=$((20 + k))" >> "$E2E_TMP/f16.faults"; done; done
  run "address sanitizer: 16 flips, a schedule of 16 events" 0 "" 1 "$FTLLM_SAN" train inputs/default.ini train.steps=4 train.sample_tokens=0 train.val_batches=0 dmr.mode=naive faults.schedule="$E2E_TMP/f16.faults"
  has "address sanitizer: 16 flips all caught" '^faults: sdc injected 16, detected 16, rolled back 16, missed 0 '
fi

# the element a flip without elem= hits is drawn from run.seed (and the line): two seeds, two
# elements of the same matmul output
for seed in 1 2; do
  # shellcheck disable=SC2086
  run "flip element, run.seed $seed" 0 "" 1 "$FTLLM" train inputs/default.ini $short dmr.mode=off run.seed=$seed
  elem[$seed]=$(grep -o 'flipped bit 30 of [^ ]*' "$E2E_TMP/out")
done
[ -n "${elem[1]}" ] && [ "${elem[1]}" != "${elem[2]}" ] && ok "flip element follows run.seed (${elem[1]}; ${elem[2]})" \
  || bad "flip element follows run.seed" "seed 1: '${elem[1]}', seed 2: '${elem[2]}'"

# the MoE dynamic planner (dmr.moe_dynamic) on ep2: expert flips after the profile all caught,
# expert checks deferred at run time and reported on their own line
cat > "$E2E_TMP/moe.faults" <<EOF
sdc-random count=6 seed=11 steps=3-6 target=both ops=moe_expert
EOF
run "moe dynamic ep2 campaign" 0 "" 2 "$FTLLM" train inputs/moe-ep2.ini train.steps=6 train.sample_tokens=8 train.val_batches=0 dmr.mode=planned dmr.profile_steps=2 dmr.deferred_mb=64 dmr.moe_dynamic=true faults.schedule="$E2E_TMP/moe.faults"
has "moe dynamic all caught" '^faults: sdc injected 6, detected 6, rolled back 6, missed 0 '
has "moe dynamic line" '^dmr: dynamic \(MoE expert ops, dmr.moe_dynamic\): deferred [1-9][0-9]* \([0-9]+ replayed in windows'
# (train.sample_tokens > 0: an ep-sharded model holds half the experts per rank, so no sample)
grep -q '^warning: run.save_model and the end-of-run sample need the whole model on one rank' "$E2E_TMP/err" \
  && ! grep -q '^sample (' "$E2E_TMP/out" && ok "ep2: no sample from a shard" \
  || bad "ep2: no sample from a shard" "$(grep '^sample' "$E2E_TMP/out"; head -c 600 "$E2E_TMP/err")"

# a fail-stop line needs SPARe: without it, a one-line error naming the line
printf 'sdc step=1 rank=0 op=gelu bit=3\nfail step=3 replica=0\n' > "$E2E_TMP/fail.faults"
run "fail-stop without SPARe" 2 "$E2E_TMP/fail.faults:2: a fail-stop line needs SPARe (spare.r >= 1)" 2 "$FTLLM" train inputs/default.ini $short parallel.dp=2 faults.schedule="$E2E_TMP/fail.faults"

# a shorter run than the schedule: the late flip is left out with a warning, not an error
run "schedule longer than the run" 0 "" 1 "$FTLLM" train inputs/default.ini train.steps=2 train.sample_tokens=0 train.val_batches=0
grep -q "^warning: inputs/default.faults:[0-9]*: step=3 is after the run's last step (train.steps = 2): left out$" "$E2E_TMP/err" \
  && ok "late flip warning" || bad "late flip warning" "$(head -c 600 "$E2E_TMP/err")"
has "late flip not counted" '^faults: sdc injected 0, detected 0, rolled back 0, missed 0 '

# a profile as long as the run: the run ends before its plan exists, said at the start; one
# step more and it plans (no warning)
run "profile as long as the run" 0 "" 1 "$FTLLM" train inputs/default.ini train.steps=2 train.sample_tokens=0 train.val_batches=0 dmr.mode=planned dmr.profile_steps=2 faults.schedule=
grep -q "^warning: dmr.profile_steps = 2: this run computes 2 steps (train.steps = 2), so it ends before a plan exists: every check is naive" "$E2E_TMP/err" \
  && ok "short-run warning" || bad "short-run warning" "$(head -c 600 "$E2E_TMP/err")"
run "profile shorter than the run" 0 "" 1 "$FTLLM" train inputs/default.ini train.steps=3 train.sample_tokens=0 train.val_batches=0 dmr.mode=planned dmr.profile_steps=2 faults.schedule=
! grep -q 'ends before a plan exists' "$E2E_TMP/err" && ok "no short-run warning" || bad "no short-run warning" "$(grep -a 'plan exists' "$E2E_TMP/err")"

# dmr.mode = off: the flip happens and nothing sees it
# shellcheck disable=SC2086
run "flip without DMR" 0 "" 1 "$FTLLM" train inputs/default.ini $short dmr.mode=off
has "flip missed" '^faults: sdc injected 1, detected 0, rolled back 0, missed 1 '
has "off line" '^dmr: mode off \(no checks\)'

e2e_finish
