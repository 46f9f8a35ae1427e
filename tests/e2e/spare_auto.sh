#!/bin/bash
# e2e/spare_auto.sh: spare.r = auto, the redundancy `ftllm optimize` recommends for N =
# parallel.dp replicas with the deck's [cluster] keys (cluster.gpus = dp x gpus_per_replica,
# cluster.steps = train.steps): the r `train` logs and runs with is the r `optimize` recommends
# for that equivalent cluster deck, at a high failure rate (r = dp), with cluster.r_max = 2
# (r = 2) and at a negligible one (r = 1); the r = 2 run masks a `fail` line on 4 ranks and
# writes r = 2 into its resolved deck; a resume keeps the checkpoint's r (same dp) or says why
# it changed (another dp, or SPARe off there); when replication wins, training runs SPARe's best
# r; bad combinations are one-line errors.
set -u
source "$(dirname "$0")/lib.bash"
common="parallel.dp=4 spare.r=auto dmr.mode=off train.val_batches=0 train.sample_tokens=0 model.channels=32 model.layers=2 model.heads=2 model.seq_len=16 train.batch=2 faults.schedule= cluster.gpus_per_replica=8"
# the r train chose (its one `spare.r = auto:` line; the `spare:` line says what ran)
chosen() { sed -n 's/^spare\.r = auto: r = \([0-9]*\).*/\1/p' "$E2E_TMP/out"; }
ran() { sed -n 's/^spare: r \([0-9]*\), .*/\1/p' "$E2E_TMP/out"; }
# the r `ftllm optimize` recommends for DP replicas over STEPS steps, more cluster overrides after
recommends() {
  local dp=$1 steps=$2; shift 2
  "$FTLLM" optimize inputs/default.ini cluster.gpus_per_replica=8 cluster.gpus=$((dp * 8)) \
    cluster.steps="$steps" "$@" | sed -n 's/^recommended: .* r = \([0-9]*\),.*/\1/p'
}
same_r() { # NAME WANT: train chose WANT, ran with it, and optimize recommends it too
  local c r
  c=$(chosen) r=$(ran)
  if [ -n "$c" ] && [ "$c" = "$2" ] && [ "$r" = "$c" ]; then ok "$1: r = $c"
  else bad "$1" "train chose '$c', ran '$r', optimize recommends '$2'"; fi
}

# shellcheck disable=SC2086
run "high failure rate" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=2 cluster.gpu_mtbf_h=1
want=$(recommends 4 2 cluster.gpu_mtbf_h=1)
same_r "high failure rate: optimize's r" "$want"
[ "${want:-0}" -gt 1 ] && ok "high failure rate: r > 1" || bad "high failure rate: r > 1" "r = $want"
# shellcheck disable=SC2016 # the backquotes are in the log line
has "the why: time-to-train vs r = 1" '^spare\.r = auto: r = [0-9]+: `ftllm optimize` recommends SPARe for N = parallel\.dp = 4 replicas .*predicted time-to-train .* goodput [0-9.]+ vs .* with r = 1$'

# shellcheck disable=SC2086
run "negligible failure rate" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=2 cluster.gpu_mtbf_h=1e12
want=$(recommends 4 2 cluster.gpu_mtbf_h=1e12)
same_r "negligible failure rate: optimize's r" "$want"
[ "$want" = 1 ] && ok "negligible failure rate: r = 1" || bad "negligible failure rate: r = 1" "r = $want"

printf 'fail step=3 replica=1   ; replica 1 stops before step 3\n' > "$E2E_TMP/one.faults"
# shellcheck disable=SC2086
run "r_max 2, a fail line masked" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=4 cluster.gpu_mtbf_h=1 cluster.r_max=2 faults.schedule="$E2E_TMP/one.faults" checkpoint.interval=4 checkpoint.dir="$E2E_TMP/ck" run.name=auto
want=$(recommends 4 4 cluster.gpu_mtbf_h=1 cluster.r_max=2)
same_r "r_max 2: optimize's r" "$want"
has "masked" '^spare: r 2, 4 replicas, live 3, depth 2; failures masked 1, wipe-outs 0;'
grep -qE '^r = 2 +; command line override' "$E2E_TMP/ck/auto.deck.ini" && ok "resolved deck holds r = 2" \
  || bad "resolved deck holds r = 2" "$(grep -A2 '^\[spare\]' "$E2E_TMP/ck/auto.deck.ini")"

# resume, same dp: the checkpoint's r, though this deck's optimizer would now say r = 1
# shellcheck disable=SC2086
run "resume keeps the checkpoint's r" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=5 cluster.gpu_mtbf_h=1e12 checkpoint.dir="$E2E_TMP/ck" run.name=auto checkpoint.resume=auto
has "kept, and why" '^spare\.r = auto: r = 2, kept from .*auto\.step-00000004\.h5 \(same parallel\.dp = 4\); for this deck the optimizer would choose r = 1: '
has "ran with it" '^spare: r 2, 4 replicas, live 4, depth 1; failures masked 0, wipe-outs 0;'
# resume on dp 2: the optimizer's r for 2 replicas, and the line says why it changed
# shellcheck disable=SC2086
run "resume on another dp" 0 "" 2 "$FTLLM" train inputs/default.ini $common parallel.dp=2 train.steps=5 cluster.gpu_mtbf_h=1 checkpoint.dir="$E2E_TMP/ck" run.name=auto checkpoint.resume=auto
want=$(recommends 2 5 cluster.gpu_mtbf_h=1)
same_r "another dp: optimize's r" "$want"
has "changed, and why" '^spare\.r = auto: r = [0-9]+, not the r = 2 of .*auto\.step-00000004\.h5: parallel\.dp changed from 4 to 2; '

# replication wins (a GPU MTBF of 36 s over 10 steps): training runs SPARe's best r, not r = 1
opt10() { "$FTLLM" optimize inputs/default.ini cluster.gpus_per_replica=8 cluster.gpus=32 cluster.steps=10 cluster.gpu_mtbf_h=0.01; }
opt10 | grep -q '^recommended: replication r = ' && ok "replication wins: optimize recommends replication" \
  || bad "replication wins: optimize recommends replication" "$(opt10 | grep '^recommended')"
# shellcheck disable=SC2086
run "replication wins" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=10 cluster.gpu_mtbf_h=0.01
want=$(opt10 | awk '$1 == "SPARe" && /<- best/ {print $2}')
same_r "replication wins: SPARe's best r" "$want"
# shellcheck disable=SC2016 # the backquotes are in the log line
has "the why: replication" '^spare\.r = auto: r = [0-9]+: `ftllm optimize` recommends replication \(training runs SPARe.s best r\) '

# resume, same dp, from a run without SPARe (spare.r = 0 there): the optimizer's r, and why
# shellcheck disable=SC2086
run "a run without SPARe" 0 "" 4 "$FTLLM" train inputs/default.ini $common spare.r=0 train.steps=2 checkpoint.interval=2 checkpoint.dir="$E2E_TMP/ck0" run.name=off
# shellcheck disable=SC2086
run "resume from it with auto" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=3 cluster.gpu_mtbf_h=1 checkpoint.dir="$E2E_TMP/ck0" run.name=off checkpoint.resume=auto
want=$(recommends 4 3 cluster.gpu_mtbf_h=1)
same_r "SPARe off in the checkpoint: optimize's r" "$want"
has "not kept, and why" '^spare\.r = auto: r = [0-9]+, not the r = 0 of .*off\.step-00000002\.h5 \(SPARe was off there\): '

# with expert parallelism (a replica is its ep ranks): auto resolves and trains
run "auto with expert parallelism" 0 "" 2 "$FTLLM" train inputs/moe-ep2.ini spare.r=auto train.steps=3
has "auto with ep: one replica, r 1" '^spare\.r = auto: r = 1: parallel\.dp = 1: one replica holds the one shard'
has "auto with ep: trained" '^verdict: OK \(trained 3 steps'
# bad combinations: one line each, exit 2
run "spares need dp >= 2" 2 "spare.spares = 1 needs SPARe (spare.r >= 1 or auto, here auto) and parallel.dp >= 2 (here 1)" 2 "$FTLLM" train inputs/default.ini spare.r=auto spare.spares=1 parallel.tp=1
run "no feasible plan" 2 "inputs/default.ini: spare.r = auto: the optimizer has no feasible plan for N = parallel.dp = 2 replicas" 2 "$FTLLM" train inputs/default.ini spare.r=auto parallel.dp=2 cluster.gpu_mtbf_h=0.001 train.steps=2
run "auto is not a number" 2 "spare.r" 1 "$FTLLM" train inputs/default.ini spare.r=autox
e2e_finish
