#!/bin/bash
# e2e/ulfm.sh: real process death survived, in the Open MPI build (make MPI=openmpi; ULFM,
# launched with mpirun --with-ft ulfm). dp 4, spare.r 2, 4 ranks:
#  - rank 2 raises SIGKILL on entering step 3's backward (FTLLM_TEST_KILL): the survivors see
#    the failure in the step's gradient sync, agree on it, shrink, fail replica 2 as an injected
#    fail-stop would, compute step 3 again on 3 replicas, and finish; the weights they save are
#    bitwise those of the run without the failure, and the `spare:` line says "failures masked
#    1, wipe-outs 0"; the `ulfm:` lines' times (when the failure was seen, how long to the
#    agreement and to recover) are real: today's wall clock, seconds in [0, 60);
#  - the same with the model on the stand-in device (run.backend = cuda, staged): bitwise the
#    cpu's fault-free run;
#  - rank 0 (the speaker and the writer) killed in step 2's gradient sync: the same, bitwise;
#  - rank 2 killed in step 3's optimizer (no survivor's operation fails; the step's agreement
#    sees it): step 3 is computed again, bitwise;
#  - DMR on: a flip and a death in one step (no DMR verdict from an agreement a death broke;
#    the flip rolled back by the recovery), bitwise; a suspect across a death keeps its count
#    and is retired at its next mismatch, bitwise; piggyback and planned (AC full) with flips
#    and a death, bitwise; planned with a death in its profile's measured step: that attempt
#    is not profiled, the plan comes from the step computed again, bitwise;
#  - a suspect whose process dies just after the agreement that named it (kill point
#    `agreed`), a hot spare in its place: the spare is not retired, bitwise;
#  - dp 2 x tp 2, dp 2 x pp 2 and dp 2 x ep 2 (a mixture of experts), rank 3 killed: its
#    partner sees the death in a 2-rank collective (MPI_ERR_OTHER there); recovered, the step-5
#    checkpoints bitwise equal;
#  - ranks 1 and 2 killed (steps 2 and 4): shard 2 has no holder left: a wipe-out, exit 5;
#  - dp 3 + a hot spare: the spare takes the first dead replica's place, the controller masks
#    the second, bitwise; a wipe-out after a real death exits 5 even with a checkpoint;
#    a spare that dies while it waits (kill point `idle`) is not used: alone, before a
#    replica's death, before an injected fail-stop that wants it, and as a spare of 2 ranks
#    on dp 2 x tp 2, bitwise; a replica that left, dead while it waits, stops the in-process
#    restart of a later wipe-out (exit 5);
#  - dp 3 + 2 hot spares, a second death while the job handles the first: a waiting spare
#    dying in the job's event or in the grid's rebuild (kill point `regrid`), the spare chosen
#    for a place dying before or as it joins (after a real death or an injected fail-stop):
#    the next spare or the controller takes the place, bitwise; a spare dying in a wipe-out's
#    in-process restart: the restart goes on, bitwise; a training rank dying as the grid is
#    rebuilt: its replica fails too (a spare, or the controller), bitwise;
#  - parallel HDF5 in that build (Debian's libhdf5-openmpi on Open MPI 5): a checkpoint written
#    at step 3 and resumed to step 6 gives the straight run's weights bitwise;
#  - a death during a checkpoint (its layout agreement; inside the HDF5 write, kill point
#    `write`, rank 1 or rank 0 of dp 2 x tp 2, rank 1 of dp 2 x pp 2 and of dp 2 x ep 2; the
#    background write of asynchronous mode; the last step's, after its agreement, with the
#    controller or a hot spare taking the replica):
#    the write is abandoned, no FATAL, the survivors recover and write a checkpoint that
#    verifies, and weights and checkpoints are bitwise the fault-free run's; a second death as
#    the survivors write the last one again: exit 5, said why, and the requeued run resumes
#    from the one before, bitwise; a death in the last step's validation: recovered at the end.
# Skips (one line saying why) when the Open MPI build is not there.
set -u
source "$(dirname "$0")/lib.bash"
e2e_need_openmpi ulfm
# lib.bash's `run` launches `mpiexec`: here, Open MPI's, fault tolerant (the environment
# e2e_need_openmpi exported: as root too, and a sanitizer build,
# FTLLM_OPENMPI=build/openmpi-debug/ftllm, ignores Open MPI's own leaks)
mkdir -p "$E2E_TMP/bin"
cat > "$E2E_TMP/bin/mpiexec" <<EOS
#!/bin/bash
exec $OMPI/bin/mpirun --oversubscribe --with-ft ulfm -x OMP_NUM_THREADS=\${OMP_NUM_THREADS:-1} -x FTLLM_TEST_KILL -x FTLLM_TEST_DEVICE -x LSAN_OPTIONS "\$@"
EOS
chmod +x "$E2E_TMP/bin/mpiexec"
PATH=$E2E_TMP/bin:$PATH
export FTLLM_TEST_KILL= FTLLM_TEST_DEVICE=
# run.progress=lines: Open MPI's launcher gives the ranks a pty, where auto picks the live line
common="run.progress=lines parallel.dp=4 spare.r=2 train.steps=5 dmr.mode=off faults.schedule= train.val_batches=0 train.sample_tokens=0 model.channels=32 model.layers=2 model.heads=2 model.seq_len=16 train.batch=2"
same() { # same NAME FILE [REF]: FILE is bitwise the fault-free run's weights (REF: clean.bin)
  local ref=${3:-$E2E_TMP/clean.bin}
  if cmp -s "$ref" "$2"; then ok "$1"; else bad "$1" "$2 differs from the fault-free run's weights ($ref)"; fi
}

# times_sane NAME: the last run's recovery line (rank 0's) and end line carry real times: the
# wall clock when rank 0 first saw the failure (0 if no operation of its own failed) and when
# the step starts again within a day of now, in that order, and the seconds from the failure
# to the agreement, of the recovery and of the slowest rank's both in [0, 60) (a clock without
# its fractions, or a sum for a difference, puts them days or decades off)
times_sane() {
  local now
  now=$(date +%s)
  if awk -v now="$now" '
      function word(re, k, w) { # the k-th word of what re matches in the line, as a number
        match($0, re); split(substr($0, RSTART, RLENGTH), w, " "); return w[k] + 0 }
      /^ulfm: step [0-9]+: recovered on/ {
        rec = word("recovered on [0-9]+ ranks in [0-9.]+ s", 5)
        seen = word("saw the failure at wall [0-9.]+, [0-9.]+ s before", 6)
        d = word("saw the failure at wall [0-9.]+, [0-9.]+ s before", 7)
        again = word("computed again from wall [0-9.]+", 5)
        if (rec < 0 || rec >= 60 || d < 0 || d >= 60 || again < now - 86400 || again > now + 86400)
          bad = 1
        if (seen == 0 && d != 0) bad = 1 # rank 0 saw no operation fail: no time of its own
        if (seen != 0 && (seen < now - 86400 || again < seen - 1)) bad = 1
        n++ }
      /^ulfm: process failures survived; slowest rank:/ {
        detect = word("slowest rank: [0-9.]+ s from", 3); recover = word(", [0-9.]+ s recovering", 2)
        if (detect < 0 || detect >= 60 || recover <= 0 || recover >= 60) bad = 1
        m++ }
      END { exit !(n >= 1 && m == 1 && !bad) }' "$E2E_TMP/out"; then ok "$1"
  else bad "$1" "$(grep '^ulfm: ' "$E2E_TMP/out" | head -c 600)"; fi
}

# shellcheck disable=SC2086
run "fault-free run" 0 "" 4 "$FTLLM" train inputs/default.ini $common run.save_model="$E2E_TMP/clean.bin"
has "no failure" '^spare: r 2, 4 replicas, live 4, depth 1; failures masked 0, wipe-outs 0;'

export FTLLM_TEST_KILL=2:backward:3
# shellcheck disable=SC2086
run "rank 2 killed in step 3's backward" 0 "" 4 "$FTLLM" train inputs/default.ini $common run.save_model="$E2E_TMP/kill2.bin"
has "the failure is masked" '^spare: r 2, 4 replicas, live 3, depth 2; failures masked 1, wipe-outs 0;'
has "step 3 recovered and computed again" '^ulfm: step 3: recovered on 3 ranks'
has "the survivors ran every step" '^step +5/5 .*\| live 3 depth 2$'
same "weights bitwise equal to the fault-free run" "$E2E_TMP/kill2.bin"
times_sane "the recovery's times are today's and short"

export FTLLM_TEST_KILL=0:gradsync:2
# shellcheck disable=SC2086
run "rank 0 killed in step 2's gradient sync" 0 "" 4 "$FTLLM" train inputs/default.ini $common run.save_model="$E2E_TMP/kill0.bin"
has "rank 0's failure is masked" '^spare: r 2, 4 replicas, live 3, depth 2; failures masked 1, wipe-outs 0;'
same "weights bitwise equal without rank 0" "$E2E_TMP/kill0.bin"

# rank 2 dies in step 3's optimizer, after the step's last collective: no survivor's operation
# fails, only the step's agreement sees the death; step 3 (not 4) is the one computed again,
# and the end of the run counts the dead process
# the same death with the model on a device (the stand-in device: run.backend = cuda's paths,
# the trainer's communicators MPI with host staging): recovered, bitwise the cpu's fault-free run
export FTLLM_TEST_KILL=2:backward:3 FTLLM_TEST_DEVICE=standin
# shellcheck disable=SC2086
run "stand-in device: rank 2 killed in step 3's backward" 0 "" 4 "$FTLLM" train inputs/default.ini $common run.backend=cuda run.save_model="$E2E_TMP/kill2dev.bin"
has "stand-in device: the failure is masked" '^spare: r 2, 4 replicas, live 3, depth 2; failures masked 1, wipe-outs 0;'
same "stand-in device: weights bitwise equal to the fault-free run" "$E2E_TMP/kill2dev.bin"
export FTLLM_TEST_DEVICE=

export FTLLM_TEST_KILL=2:optimizer:3
# shellcheck disable=SC2086
run "rank 2 killed in step 3's optimizer" 0 "" 4 "$FTLLM" train inputs/default.ini $common run.save_model="$E2E_TMP/killopt.bin"
has "a death seen only by the agreement is that step's" '^spare: replica 2 failed in step 3 \(process failure, ULFM\): masked by the controller'
has "step 3 recovered, not step 4" '^ulfm: step 3: recovered on 3 ranks'
has "the dead process counted at the end" '^ulfm: 1 process died during the run; the survivors end it'
same "weights bitwise equal after an optimizer-time death" "$E2E_TMP/killopt.bin"
times_sane "an optimizer-time death: the recovery's times are today's and short"

# DMR on (naive) with a real death: a flip on rank 1 in step 3, rank 2 killed in step 3's
# optimizer. The step's DMR agreement cannot complete (a process died): no verdict there, the
# recovery computes step 3 again, the flip counts as detected and rolled back, and the weights
# are the fault-free run's
printf 'sdc step=3 rank=1 op=matmul:3 bit=21\n' > "$E2E_TMP/flip.faults"
export FTLLM_TEST_KILL=2:optimizer:3
# shellcheck disable=SC2086
run "dmr naive: a flip and a death in one step" 0 "" 4 "$FTLLM" train inputs/default.ini $common dmr.mode=naive faults.schedule="$E2E_TMP/flip.faults" run.save_model="$E2E_TMP/dmrkill.bin"
has "dmr: the flip caught, the step computed again" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 '
has "dmr: the recomputation is ULFM's, not a DMR redo" '^dmr: mode naive, .*mismatches 1, steps redone 0 of 6 attempts'
same "dmr: weights bitwise equal to the fault-free run" "$E2E_TMP/dmrkill.bin"

# the modes that check through AC recomputation and deferral, with a real death (train.ac =
# full): piggyback, and planned (profiled in step 1, its deferred checks drained at a
# death-broken agreement); a flip on rank 1 in step 3, the step rank 2 dies in (rolled back by
# the recovery), and one on world rank 3 in step 4, rank 2 of the 3 survivors then (a DMR redo);
# bitwise the fault-free AC-full run
printf 'sdc step=3 rank=1 op=matmul:7 bit=21\nsdc step=4 rank=3 op=layernorm:2 bit=9\n' > "$E2E_TMP/ac.faults"
export FTLLM_TEST_KILL=
# shellcheck disable=SC2086
run "fault-free run, AC full" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.ac=full run.save_model="$E2E_TMP/cleanac.bin"
export FTLLM_TEST_KILL=2:backward:3
for mode in piggyback planned; do
  # shellcheck disable=SC2086
  run "dmr $mode: flips and a death" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.ac=full dmr.mode=$mode dmr.profile_steps=1 faults.schedule="$E2E_TMP/ac.faults" run.save_model="$E2E_TMP/ac-$mode.bin"
  has "dmr $mode: both flips caught" '^faults: sdc injected 2, detected 2, rolled back 2, missed 0 '
  has "dmr $mode: the step-4 flip redone on the survivors" '^dmr: step 4: mismatch on 1 of 3 ranks \(r2\): rolled back'
  has "dmr $mode: one DMR redo" "^dmr: mode $mode, .*mismatches 2, steps redone 1 of 7 attempts"
  same "dmr $mode: weights bitwise equal" "$E2E_TMP/ac-$mode.bin" "$E2E_TMP/cleanac.bin"
done
# planned, a death in the profile's measured step (dmr.profile_steps = 2: step 1 warms up, step
# 2 is measured; rank 2 killed in step 2's backward): the broken attempt leaves the profile, and
# the plan comes from step 2 computed again, so rank 0 makes it after the recovery (one
# process's lines keep their order); bitwise
export FTLLM_TEST_KILL=2:backward:2
# shellcheck disable=SC2086
run "dmr planned: a death in the profile's step" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.ac=full dmr.mode=planned dmr.profile_steps=2 run.save_model="$E2E_TMP/ac-prof.bin"
has "dmr planned: the broken attempt not profiled" '^dmr: step 2: a process failure broke the attempt, which the profile does not count'
rec=$(grep -nE '^ulfm: step 2: recovered' "$E2E_TMP/out" | head -1 | cut -d: -f1)
pl=$(grep -nE '^\[r0\] dmr: planned from 2 profiled steps' "$E2E_TMP/out" | head -1 | cut -d: -f1)
if [ -n "$rec" ] && [ -n "$pl" ] && [ "$pl" -gt "$rec" ]; then ok "dmr planned: planned after the recovery, from the attempt computed again"
else bad "dmr planned: planned after the recovery, from the attempt computed again" "recovered at line '${rec}', rank 0's plan at line '${pl}'"; fi
same "dmr planned: a death in the profile: weights bitwise equal" "$E2E_TMP/ac-prof.bin" "$E2E_TMP/cleanac.bin"
# a suspect across a death: dmr.suspect_after = 2, world rank 2 mismatches in steps 2, 3 and
# 5, rank 0 dies in step 3 (its 4th optimizer entry: step 2 ran twice). Rank 2 keeps its own
# count when the world shrinks (it is rank 1 of the 3 survivors) and the death's step counts:
# suspect at step 5 (3 steps), its replica 2 retired before step 6; bitwise the 6-step run
# without faults (shards 0..3 each keep a live holder: replicas 1 and 3)
printf 'sdc step=2 rank=2 op=matmul:3 bit=21\nsdc step=3 rank=2 op=matmul:5 bit=22\nsdc step=5 rank=2 op=matmul:0 bit=3\n' > "$E2E_TMP/sus.faults"
export FTLLM_TEST_KILL=
# shellcheck disable=SC2086
run "6 steps, fault-free" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=6 run.save_model="$E2E_TMP/clean6.bin"
export FTLLM_TEST_KILL=0:optimizer:4
# shellcheck disable=SC2086
run "dmr: a suspect across a real death" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.steps=6 dmr.mode=naive dmr.suspect_after=2 faults.schedule="$E2E_TMP/sus.faults" run.save_model="$E2E_TMP/sus6.bin"
grep -q '^warning: dmr: rank 1 is suspect: its checks mismatched in 3 steps (dmr.suspect_after = 2)' \
  "$E2E_TMP/err" && ok "suspect across a death: named, its count kept" || bad "suspect across a death: named, its count kept" "$(grep -a suspect "$E2E_TMP/err" | head -3)"
has "suspect across a death: retired" '^dmr: rank 1 is suspect: SPARe retires its replica 2 before step 6$'
has "suspect across a death: both masked" '^spare: r 2, 4 replicas, live 2, depth 2; failures masked 2, wipe-outs 0;'
has "suspect across a death: every flip rolled back" '^faults: sdc injected 3, detected 3, rolled back 3, missed 0 '
same "suspect across a death: weights bitwise equal" "$E2E_TMP/sus6.bin" "$E2E_TMP/clean6.bin"

export FTLLM_TEST_KILL=1:backward:2,2:backward:4
# shellcheck disable=SC2086
run "ranks 1 and 2 killed: a wipe-out, exit 5" 5 "" 4 "$FTLLM" train inputs/default.ini $common
has "wipe-out counted" '^spare: .*failures masked 1, wipe-outs 1;'

# tp 2, pp 2 and ep 2 (dp 2, 4 ranks): the dead rank's tp, pp or ep partner sees the death in a 2-rank
# collective, where Open MPI says MPI_ERR_OTHER (the comm layer asks whether the communicator
# lost a member); the survivors recover and the checkpoint they write at step 5 holds the
# fault-free run's parameters and moments, bitwise (save_model needs an unsharded layout)
same_ckpt() { # same_ckpt NAME DIR_A DIR_B: both step-5 checkpoints' /params and /optim equal
  local a b
  a=$(ls "$2"/*step-00000005.h5 2>/dev/null | head -1) b=$(ls "$3"/*step-00000005.h5 2>/dev/null | head -1)
  if [ -n "$a" ] && [ -n "$b" ] && h5diff "$a" "$b" /params > /dev/null && h5diff "$a" "$b" /optim > /dev/null; then
    ok "$1"
  else bad "$1" "'$a' and '$b' differ (or one is missing)"; fi
}
mp="run.progress=lines parallel.dp=2 spare.r=2 train.steps=5 dmr.mode=off faults.schedule= train.val_batches=0 train.sample_tokens=0 model.channels=32 model.layers=2 model.heads=2 model.seq_len=16 train.batch=2 checkpoint.interval=5"
for lay in "parallel.tp=2" "parallel.pp=2 parallel.microbatches=2" "parallel.ep=2 model.experts=4 model.top_k=2"; do
  tag=${lay%%=*} && tag="dp 2 x ${tag#parallel.} 2"
  export FTLLM_TEST_KILL=
  # shellcheck disable=SC2086
  run "$tag, fault-free" 0 "" 4 "$FTLLM" train inputs/default.ini $mp $lay checkpoint.dir="$E2E_TMP/ck-${lay%%=*}"
  export FTLLM_TEST_KILL=3:backward:3
  # shellcheck disable=SC2086
  run "$tag: rank 3 killed" 0 "" 4 "$FTLLM" train inputs/default.ini $mp $lay checkpoint.dir="$E2E_TMP/ckk-${lay%%=*}"
  has "$tag: recovered" '^ulfm: step [0-9]+: recovered on 2 ranks'
  has "$tag: masked" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;'
  if grep -aq 'abandoned' "$E2E_TMP/err"; then bad "$tag: no checkpoint abandoned (none was being written)" "$(grep -a abandoned "$E2E_TMP/err")"
  else ok "$tag: no checkpoint abandoned (none was being written)"; fi
  same_ckpt "$tag: the survivors' checkpoint bitwise the fault-free one" "$E2E_TMP/ck-${lay%%=*}" "$E2E_TMP/ckk-${lay%%=*}"
done

# hot spares (spare.spares, main's path for an injected fail-stop): dp 3 + 1 spare on 4 ranks;
# rank 1 dies in step 3: the spare takes replica 1's place (redundancy back, depth 1); rank 2
# dies in step 4: no spare left, the controller masks it; the weights are those of the run
# without failures, bitwise
sp="run.progress=lines parallel.dp=3 spare.spares=1 spare.r=2 train.steps=5 dmr.mode=off faults.schedule= train.val_batches=0 train.sample_tokens=0 model.channels=32 model.layers=2 model.heads=2 model.seq_len=16 train.batch=2"
export FTLLM_TEST_KILL=
# shellcheck disable=SC2086
run "dp 3 + a hot spare, fault-free" 0 "" 4 "$FTLLM" train inputs/default.ini $sp run.save_model="$E2E_TMP/clean3.bin"
has "the spare idled" '^spare: r 2, 3 replicas, live 3, depth 1; failures masked 0, .*spares used 0 of 1;'
export FTLLM_TEST_KILL=1:backward:3,2:backward:5
# shellcheck disable=SC2086
run "ranks 1 and 2 killed (steps 3 and 4) with a hot spare" 0 "" 4 "$FTLLM" train inputs/default.ini $sp run.save_model="$E2E_TMP/spare3.bin"
has "the spare took the dead replica's place" '^spare: replica 1 failed in step 3 \(process failure, ULFM\): a hot spare took its place'
has "step 3 computed again with every replica (the spare in)" '^step +3/5 .*\| live 3 depth 1$'
has "the second death masked by the controller" '^spare: replica 2 failed in step 4 \(process failure, ULFM\): masked by the controller'
has "spare line" '^spare: r 2, 3 replicas, live 2, depth 2; failures masked 2, wipe-outs 0;.* spares used 1 of 1;'
same "weights bitwise equal with the spare" "$E2E_TMP/spare3.bin" "$E2E_TMP/clean3.bin"

# a hot spare's process dies while it waits (kill point `idle`): the survivors learn it at the
# next job event. Alone (rank 3, the spare, dies at its first wait): the run's end finds it
# and ends on the survivors, the weights bitwise; then with a replica's death in step 3: the
# dead spare is not used (its process cannot take the place), the controller masks the
# failure, bitwise. Then a spare of two ranks (dp 2 x tp 2 + 1 spare, 6 ranks): the spare's
# second rank (world rank 5) dies, then rank 2 (replica 1) in step 3: the spare is unusable
# though its first rank lives, the controller masks replica 1, the checkpoint bitwise the
# fault-free one's
export FTLLM_TEST_KILL=3:idle:1
# shellcheck disable=SC2086
run "the spare dies while it waits" 0 "" 4 "$FTLLM" train inputs/default.ini $sp run.save_model="$E2E_TMP/sdead.bin"
has "spare dead: every replica live, no spare used" '^spare: r 2, 3 replicas, live 3, depth 1; failures masked 0, wipe-outs 0;.* spares used 0 of 1;'
same "spare dead: weights bitwise equal" "$E2E_TMP/sdead.bin" "$E2E_TMP/clean3.bin"
export FTLLM_TEST_KILL=3:idle:1,1:backward:3
# shellcheck disable=SC2086
run "the spare dies, then rank 1 (step 3)" 0 "" 4 "$FTLLM" train inputs/default.ini $sp run.save_model="$E2E_TMP/sdead1.bin"
has "spare dead: the replica's death masked by the controller" '^spare: replica 1 failed in step 3 \(process failure, ULFM\): masked by the controller'
has "spare dead: the spare not used" '^spare: r 2, 3 replicas, live 2, depth 2; failures masked 1, wipe-outs 0;.* spares used 0 of 1;'
same "spare dead: weights bitwise equal after the masked death" "$E2E_TMP/sdead1.bin" "$E2E_TMP/clean3.bin"
# an injected fail-stop (the fault schedule's `fail`) that wants the spare after its process
# died: the join fails on the channel, the survivors shrink it and rebuild the grid, the join
# goes to the controller instead (masked), bitwise
printf 'fail step=3 replica=1\n' > "$E2E_TMP/inj.faults"
export FTLLM_TEST_KILL=3:idle:1
# shellcheck disable=SC2086
run "the spare dies, then an injected fail-stop wants it" 0 "" 4 "$FTLLM" train inputs/default.ini $sp faults.schedule="$E2E_TMP/inj.faults" run.save_model="$E2E_TMP/sdeadinj.bin"
has "spare dead: the injected failure masked" '^spare: replica 1 failed after step 2: masked'
has "spare dead: the injected failure, no spare used" '^spare: r 2, 3 replicas, live 2, depth 2; failures masked 1, wipe-outs 0;.* spares used 0 of 1;'
same "spare dead: weights bitwise equal after the injected failure" "$E2E_TMP/sdeadinj.bin" "$E2E_TMP/clean3.bin"
# a replica that left (an injected fail-stop) waits like a spare; its process dies there, and a
# later wipe-out that checkpoints would restart in-process finds it gone when the job's restart
# event fails: no restart (the dead process cannot come back), exit 5, said why
printf 'fail step=3 replica=1\nfail step=5 replica=2   ; shard 2 lost both holders\n' > "$E2E_TMP/wipe.faults"
export FTLLM_TEST_KILL=1:idle:1
# shellcheck disable=SC2086
run "a left replica dies while it waits, then a wipe-out: exit 5" 5 "" 3 "$FTLLM" train inputs/default.ini $common parallel.dp=3 faults.schedule="$E2E_TMP/wipe.faults" checkpoint.interval=1 checkpoint.dir="$E2E_TMP/ckwl"
if grep -q 'wipe-out before step 5: no in-process restart (a waiting process of the job died' "$E2E_TMP/out" "$E2E_TMP/err"; then ok "left replica dead: no restart, said why"; else bad "left replica dead: no restart, said why" "$(grep -a wipe "$E2E_TMP/out" "$E2E_TMP/err" | head -3)"; fi
sp2="$mp parallel.tp=2 spare.spares=1"
export FTLLM_TEST_KILL=
# shellcheck disable=SC2086
run "dp 2 x tp 2 + a spare of 2 ranks, fault-free" 0 "" 6 "$FTLLM" train inputs/default.ini $sp2 checkpoint.dir="$E2E_TMP/ck-sp2"
has "tp 2 spare idled" '^spare: r 2, 2 replicas, live 2, depth 1; failures masked 0, .*spares used 0 of 1;'
export FTLLM_TEST_KILL=5:idle:1,2:backward:3
# shellcheck disable=SC2086
run "dp 2 x tp 2: the spare's second rank dies, then rank 2 (step 3)" 0 "" 6 "$FTLLM" train inputs/default.ini $sp2 checkpoint.dir="$E2E_TMP/ckk-sp2"
has "tp 2 spare dead: masked by the controller" '^spare: replica 1 failed in step 3 \(process failure, ULFM\): masked by the controller'
has "tp 2 spare dead: the spare not used" '^spare: r 2, 2 replicas, live 1, depth 2; failures masked 1, wipe-outs 0;.* spares used 0 of 1;'
same_ckpt "tp 2 spare dead: the checkpoint bitwise the fault-free one" "$E2E_TMP/ck-sp2" "$E2E_TMP/ckk-sp2"
export FTLLM_TEST_KILL=
# two hot spares (dp 3 + 2 spares, 5 ranks; the spares are ranks 3 and 4) and a second death
# while the job handles the first (before: the second one's failed split or job event killed
# the run, or hung it):
#  - spare 0 dies as it starts to wait; the run's end finds it, and spare 1 dies as the
#    survivors split the grid they rebuild (kill point `regrid`): the split fails, the
#    survivors agree on that, shrink the job again and split again; the end on 3 ranks;
#  - rank 1 dies in step 3 and spare 0, the one chosen for its place, dies as the job's
#    channel shrinks (its second wait): the job's event fails, spare 1 takes the place;
#  - rank 1 dies in step 3, spare 0 takes its place, and spare 1 dies as the grid is split;
#  - rank 1 dies in step 3 and both spares die as the channel shrinks: the controller masks;
#  - rank 1 dies in step 3 and spare 0, chosen for its place, dies as the grid is split: every
#    survivor learns it there, the decision is made again, spare 1 takes the place;
#  - an injected fail-stop of replica 1 (step 3): spare 1 dies in the join's split (spare 0
#    joins), or spare 0 does (the training grid is rebuilt, the join goes to spare 1).
#  - dp 3 + 1 spare: the spare joins (step 3), then a wipe-out (step 5) restarts the job
#    in-process from step 4's checkpoint, and the spare, going back to waiting, dies in the
#    restart's split: the restart goes on without it.
# Every run's weights bitwise the fault-free run's. A training rank that dies as the grid is
# rebuilt (rank 2, after rank 1's death): its replica fails too and the grid is rebuilt again
# (both spares take places; without spares the controller masks both, or, two neighbouring
# replicas of r 2, a wipe-out: exit 5). And a
# wipe-out from a real death (dp 3, replica 2 left at step 2, rank 1 killed) whose event fails
# (rank 2, waiting, dies as the channel shrinks): the event goes again, still a wipe-out, exit 5
# (before that retry kept the verdict, it came back as no wipe-out and the run went on).
sp5="${sp/spare.spares=1/spare.spares=2}"
# s2 NAME KILL OUT [overrides]: the two-spare job with FTLLM_TEST_KILL=KILL, exit 0, its weights
# ($E2E_TMP/OUT.bin) bitwise the fault-free run's
s2() {
  local name=$1 out=$E2E_TMP/$3.bin
  export FTLLM_TEST_KILL=$2
  shift 3
  # shellcheck disable=SC2086
  run "$name" 0 "" 5 "$FTLLM" train inputs/default.ini $sp5 run.save_model="$out" "$@"
  same "$name: weights bitwise equal" "$out" "$E2E_TMP/clean3.bin"
}
# the spare: line with MASKED failures, LIVE replicas, DEPTH and USED spares
spares() { echo "^spare: r 2, 3 replicas, live $2, depth $3; failures masked $1, wipe-outs 0;.* spares used $4 of 2;"; }
rebuilt='^spare: a waiting process of the job died as the training grid was rebuilt \(ULFM\): rebuilt without it'
joindied='^spare: a hot spare died as it joined the training grid \(ULFM\)'
took='^spare: replica 1 failed in step 3 \(process failure, ULFM\): a hot spare took its place'
s2 "both spares die, the second in the rebuild after the first" 3:idle:1,4:regrid:1 s2regrid
has "both spares dead: the rebuild redone" "$rebuilt"
has "both spares dead: every replica live, no spare used" "$(spares 0 3 1 0)"
s2 "rank 1 dies, then the spare chosen for its place" 1:backward:3,3:idle:2 s2chosen
has "chosen spare dead: the next spare took the place" "$took"
has "chosen spare dead: one spare used" "$(spares 1 3 1 1)"
s2 "rank 1 dies, the other spare in the split" 1:backward:3,4:regrid:1 s2split
has "other spare dead in the split: the split redone" "$rebuilt"
has "other spare dead in the split: the spare took the place" "$took"
has "other spare dead in the split: one spare used" "$(spares 1 3 1 1)"
s2 "rank 1 dies, then both spares" 1:backward:3,3:idle:2,4:idle:2 s2both
has "both spares dead after rank 1: masked by the controller" '^spare: replica 1 failed in step 3 \(process failure, ULFM\): masked by the controller'
has "both spares dead after rank 1: no spare used" "$(spares 1 2 2 0)"
s2 "rank 1 dies, then the joining spare in the split" 1:backward:3,3:regrid:1 s2join
has "joining spare dead in the split: said so" "$joindied"
has "joining spare dead in the split: the next spare took the place" "$took"
has "joining spare dead in the split: one spare used" "$(spares 1 3 1 1)"
s2 "an injected fail-stop, the other spare dies in the join's split" 4:regrid:1 s2inj faults.schedule="$E2E_TMP/inj.faults"
has "injected, other spare dead: the split redone" "$rebuilt"
has "injected, other spare dead: spare 0 took the place" '^spare: replica 1 failed before step 3: hot spare 0 \(1 of 2\) took its place'
has "injected, other spare dead: one spare used" "$(spares 1 3 1 1)"
s2 "an injected fail-stop, the joining spare dies in the split" 3:regrid:1 s2injj faults.schedule="$E2E_TMP/inj.faults"
has "injected, joining spare dead: said so" "$joindied"
has "injected, joining spare dead: spare 1 took the place" '^spare: replica 1 failed before step 3: hot spare 1 \(2 of 2\) took its place'
has "injected, joining spare dead: one spare used" "$(spares 1 3 1 1)"
printf 'fail step=3 replica=1\nfail step=5 replica=2\nfail step=5 replica=0   ; a wipe-out\n' > "$E2E_TMP/rs.faults"
export FTLLM_TEST_KILL=3:regrid:2
# shellcheck disable=SC2086
run "a wipe-out's restart, the spare dies in its split" 0 "" 4 "$FTLLM" train inputs/default.ini $sp faults.schedule="$E2E_TMP/rs.faults" checkpoint.interval=1 checkpoint.dir="$E2E_TMP/ckrs" run.save_model="$E2E_TMP/rs.bin"
has "restart, spare dead: the rebuild redone" "$rebuilt"
has "restart, spare dead: restarted" '^spare: restarted in-process from the checkpoint of step 4 after the wipe-out before step 5: every replica back'
same "restart, spare dead: weights bitwise equal" "$E2E_TMP/rs.bin" "$E2E_TMP/clean3.bin"
printf 'fail step=2 replica=2\n' > "$E2E_TMP/w2.faults"
export FTLLM_TEST_KILL=1:backward:3,2:idle:2
# shellcheck disable=SC2086
run "a wipe-out from a death, the waiting rank dies in its event: exit 5" 5 "" 3 "$FTLLM" train inputs/default.ini $common parallel.dp=3 faults.schedule="$E2E_TMP/w2.faults"
has "wipe-out, event again: still a wipe-out" '^spare: replica 1 failed in step [0-9]+ \(process failure, ULFM\): part of a wipe-out'
has "wipe-out, event again: both deaths seen" '^ulfm: 2 processes died during the run'
again='^spare: a training process died as the job rebuilt the training grid \(ULFM\): its replica fails too, and the grid is rebuilt again$'
s2 "rank 1 dies, then rank 2 as the grid is rebuilt" 1:backward:3,2:regrid:1 s2train
has "training rank dead in the rebuild: said so" "$again"
has "training rank dead in the rebuild: both spares took places" "$(spares 2 3 1 2)"
export FTLLM_TEST_KILL=1:backward:3,3:regrid:1
# shellcheck disable=SC2086
run "no spares: rank 1 dies, then rank 3 as the grid is rebuilt" 0 "" 4 "$FTLLM" train inputs/default.ini $common run.save_model="$E2E_TMP/regrid13.bin"
has "no spares, training rank dead in the rebuild: said so" "$again"
has "no spares, training rank dead in the rebuild: both masked" '^spare: r 2, 4 replicas, live 2, depth 2; failures masked 2, wipe-outs 0;'
same "no spares, training rank dead in the rebuild: weights bitwise equal" "$E2E_TMP/regrid13.bin"
export FTLLM_TEST_KILL=1:backward:3,2:regrid:1
# shellcheck disable=SC2086
run "no spares: rank 1 dies, then rank 2 as the grid is rebuilt: a wipe-out, exit 5" 5 "" 4 "$FTLLM" train inputs/default.ini $common
has "no spares, rebuild death: a wipe-out" '^spare: replica 2 failed in step 3 \(process failure, ULFM\): part of a wipe-out'
export FTLLM_TEST_KILL=

# a suspect named at a step's DMR agreement whose process dies right after it (kill point
# `agreed`: rank 1's 4th agreement is step 3's first attempt, where its second mismatch names
# it), before SPARe could retire it: the hot spare takes its place, the name (of the old
# world) is dropped, and nothing retires the spare's healthy replica (before: it was retired,
# and the run hung); weights bitwise the fault-free run's. The faults line counts the dead
# process's step-2 flip (summed at step 2's agreements), and its step-3 flip, injected in the
# attempt it died in, as not applied (before: neither, the dead process's counters died with
# it).
printf 'sdc step=2 rank=1 op=matmul:3 bit=21\nsdc step=3 rank=1 op=matmul:5 bit=22\n' > "$E2E_TMP/agreed.faults"
export FTLLM_TEST_KILL=1:agreed:4
# shellcheck disable=SC2086
run "a suspect dies right after its naming agreement (hot spare)" 0 "" 4 "$FTLLM" train inputs/default.ini $sp dmr.mode=naive dmr.suspect_after=2 faults.schedule="$E2E_TMP/agreed.faults" run.save_model="$E2E_TMP/agreed.bin"
grep -q '^warning: dmr: rank 1 is suspect: its checks mismatched in 2 steps' "$E2E_TMP/err" \
  && ok "agreed: the suspect was named" || bad "agreed: the suspect was named" "$(grep -a suspect "$E2E_TMP/err" | head -3)"
has "agreed: the spare took the dead place" '^spare: replica 1 failed in step 3 \(process failure, ULFM\): a hot spare took its place'
if grep -q 'SPARe retires' "$E2E_TMP/out"; then bad "agreed: the spare is not retired" "$(grep -a 'SPARe retires' "$E2E_TMP/out")"; else ok "agreed: the spare is not retired"; fi
has "agreed: every replica live, the spare used" '^spare: r 2, 3 replicas, live 3, depth 1; failures masked 1, wipe-outs 0;.* spares used 1 of 1;'
same "agreed: weights bitwise equal" "$E2E_TMP/agreed.bin" "$E2E_TMP/clean3.bin"
has "agreed: the dead process's flips counted" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 \(schedule .*; 1 flip not applied;'

# a process with a detected flip (step 2) dies in step 3 (rank 0, the speaker: its 4th entry
# into the backward, step 2 having run twice) and the hot spare that takes its place becomes
# world rank 0, which prints the report: the job's counters summed at each committed step's
# agreement outlive the process, and the joining spare takes them with the state (before:
# "sdc injected 0, detected 0"); weights bitwise
printf 'sdc step=2 rank=0 op=matmul:3 bit=21\n' > "$E2E_TMP/dead.faults"
export FTLLM_TEST_KILL=0:backward:4
# shellcheck disable=SC2086
run "a flip's process dies a step later (hot spare, the new rank 0)" 0 "" 4 "$FTLLM" train inputs/default.ini $sp dmr.mode=naive faults.schedule="$E2E_TMP/dead.faults" run.save_model="$E2E_TMP/dead.bin"
has "dead: the spare took rank 0's place" '^spare: replica 0 failed in step 3 \(process failure, ULFM\): a hot spare took its place'
has "dead: the flip counted after its process died" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 \(schedule .*; 0 flips not applied;'
has "dead: one step redone" '^dmr: mode naive, .*steps redone 1 of '
same "dead: weights bitwise equal" "$E2E_TMP/dead.bin" "$E2E_TMP/clean3.bin"
export FTLLM_TEST_KILL=

# a wipe-out after a real death is not restarted in-process even with a checkpoint (the dead
# process cannot come back): exit 5, the requeue path
export FTLLM_TEST_KILL=1:backward:3
# shellcheck disable=SC2086
run "a wipe-out after a real death with checkpoints: exit 5" 5 "" 4 "$FTLLM" train inputs/default.ini $common spare.r=1 checkpoint.interval=1 checkpoint.dir="$E2E_TMP/ckw"
if grep -q 'wipe-out .*no in-process restart (the dead process cannot come back)' "$E2E_TMP/out" "$E2E_TMP/err"; then ok "no in-process restart, said why"; else bad "no in-process restart, said why" "$(grep -a wipe "$E2E_TMP/out" "$E2E_TMP/err" | head -3)"; fi

export FTLLM_TEST_KILL=1:sideways:2
# shellcheck disable=SC2086
run "a bad FTLLM_TEST_KILL: exit 2" 2 "" 4 "$FTLLM" train inputs/default.ini $common
# one line from ftllm; Open MPI's launcher may add its own box about the non-zero exit
n=$(grep -c 'FTLLM_TEST_KILL' "$E2E_TMP/err") other=$(grep -v 'FTLLM_TEST_KILL' "$E2E_TMP/err" | grep -c -E 'FATAL|error:|warning:')
if [ "$n" -eq 1 ] && [ "$other" -eq 0 ] && grep -q '^FTLLM_TEST_KILL=1:sideways:2: expected RANK:REGION:N' "$E2E_TMP/err"; then
  ok "a bad FTLLM_TEST_KILL is one line"
else bad "a bad FTLLM_TEST_KILL is one line" "$(head -c 600 "$E2E_TMP/err")"; fi
export FTLLM_TEST_KILL=

ck="checkpoint.dir=$E2E_TMP/ck checkpoint.interval=3 train.steps=6 spare.r=0"
# shellcheck disable=SC2086
run "6 steps with checkpoints (parallel HDF5 on Open MPI 5)" 0 "" 4 "$FTLLM" train inputs/default.ini $common $ck run.save_model="$E2E_TMP/straight.bin"
c3=$(ls "$E2E_TMP"/ck/*step-00000003.h5 2>/dev/null | head -1)
if [ -n "$c3" ]; then ok "the step-3 checkpoint exists"; else bad "the step-3 checkpoint exists" "$(ls "$E2E_TMP/ck")"; fi
run "the checkpoint verifies" 0 "" 1 "$FTLLM" inspect "$c3"
# shellcheck disable=SC2086
run "resumed from step 3 to 6" 0 "" 4 "$FTLLM" train inputs/default.ini $common $ck checkpoint.dir="$E2E_TMP/ck2" checkpoint.resume="$c3" run.save_model="$E2E_TMP/resumed.bin"
same "resumed weights bitwise equal" "$E2E_TMP/resumed.bin" "$E2E_TMP/straight.bin"

# a death during a checkpoint: the survivors abandon that write (no file under its name, no
# FATAL), recover at the next step and write a checkpoint at its end, which verifies; the run
# ends as without the death, bitwise. Synchronous, rank 2 dying as step 2's checkpoint starts
# (the layout all-reduce fails on the others); a writer dying inside the HDF5 write (kill point
# `write`: before its 5th dataset) on dp 2 x tp 2, rank 1 and rank 0 (the writer of the
# manifest and the rename); rank 0 dying in an asynchronous write, in the background thread
# while the others train on (the step whose write is abandoned then depends on timing)
warned() { # warned NAME ERE: stderr (the last run's) has a line matching ERE
  if grep -aqE -- "$2" "$E2E_TMP/err"; then ok "$1"; else bad "$1" "no '$2' in: $(head -c 600 "$E2E_TMP/err")"; fi
}
no_fatal() {
  if grep -aq 'FATAL' "$E2E_TMP/err"; then bad "$1" "$(grep -a FATAL "$E2E_TMP/err" | head -c 600)"; else ok "$1"; fi
}
verifies() { # verifies NAME FILE: ftllm inspect says the checkpoint is whole (a run of its own:
  # after the checks of the last run's output)
  if [ -f "$2" ]; then run "$1" 0 "" 1 "$FTLLM" inspect "$2"; else bad "$1" "no $2"; fi
}
export FTLLM_TEST_KILL=2:checkpoint:2
# shellcheck disable=SC2086
run "rank 2 killed as step 2's checkpoint starts" 0 "" 4 "$FTLLM" train inputs/default.ini $common checkpoint.interval=2 checkpoint.keep=9 checkpoint.dir="$E2E_TMP/ckd" run.save_model="$E2E_TMP/ckd.bin"
no_fatal "checkpoint death: no FATAL"
warned "checkpoint death: the write abandoned, step 3's written" '^warning: checkpoint of step 2 abandoned: a process died during its write; the survivors write step 3.s now \(before it, the newest: none of this run\)$'
has "checkpoint death: recovered" '^ulfm: step 3: recovered on 3 ranks'
has "checkpoint death: 3 written (steps 3, 4, 5)" '^checkpoints: 3 written,'
same "checkpoint death: weights bitwise equal" "$E2E_TMP/ckd.bin"
verifies "checkpoint death: step 3's checkpoint verifies" "$E2E_TMP/ckd/default.step-00000003.h5"
verifies "checkpoint death: step 5's checkpoint verifies" "$E2E_TMP/ckd/default.step-00000005.h5"
if [ ! -e "$E2E_TMP/ckd/default.step-00000002.h5" ]; then ok "checkpoint death: no step-2 file"
else bad "checkpoint death: no step-2 file" "$(ls "$E2E_TMP/ckd")"; fi
# a second recovery before that checkpoint is written again (rank 0 dies as step 3 is
# computed again): the agreement in the second regrid keeps the pending write
export FTLLM_TEST_KILL=2:checkpoint:2,0:forward:4
# shellcheck disable=SC2086
run "rank 2 killed as step 2's checkpoint starts, rank 0 in step 3's recompute" 0 "" 4 "$FTLLM" train inputs/default.ini $common checkpoint.interval=2 checkpoint.keep=9 checkpoint.dir="$E2E_TMP/ckd2" run.save_model="$E2E_TMP/ckd2.bin"
no_fatal "two recoveries: no FATAL"
warned "two recoveries: step 3's written" '^warning: checkpoint of step 2 abandoned: a process died during its write; the survivors write step 3.s now'
same "two recoveries: weights bitwise equal" "$E2E_TMP/ckd2.bin"
verifies "two recoveries: step 3's checkpoint verifies" "$E2E_TMP/ckd2/default.step-00000003.h5"
tp2="$mp parallel.tp=2 checkpoint.interval=2 checkpoint.keep=9"
for case in "1:write:5|parallel.tp=2" "0:write:5|parallel.tp=2" "1:write:5|parallel.pp=2 parallel.microbatches=2" "1:write:5|parallel.ep=2 model.experts=4 model.top_k=2"; do
  k=${case%%|*} lay=${case#*|}
  tag="dp 2 x ${lay%%=*}" && tag="${tag/parallel./} 2, rank ${k%%:*}" && d="$E2E_TMP/ckw${k%%:*}-${lay%%=*}"
  export FTLLM_TEST_KILL=$k
  # shellcheck disable=SC2086
  run "$tag killed inside step 2's HDF5 write" 0 "" 4 "$FTLLM" train inputs/default.ini $mp $lay checkpoint.interval=2 checkpoint.keep=9 checkpoint.dir="$d"
  no_fatal "write death, $tag: no FATAL"
  warned "write death, $tag: abandoned, step 3's written" '^warning: checkpoint of step 2 abandoned: a process died during its write; the survivors write step 3.s now'
  same_ckpt "write death, $tag: the step-5 checkpoint bitwise the fault-free one" "$E2E_TMP/ck-${lay%%=*}" "$d"
  verifies "write death, $tag: step 3's checkpoint verifies" "$d/default.step-00000003.h5"
done
# the last step's checkpoint: rank 2 dies entering it, after the step's agreement; at the end
# the survivors fail its replica as in a step (the controller masks it; on dp 3 + a hot spare,
# the spare takes its place), regrid and write that checkpoint: bitwise the fault-free one
export FTLLM_TEST_KILL=2:checkpoint:5
# shellcheck disable=SC2086
run "dp 2 x tp 2: rank 2 killed as the last step's checkpoint starts" 0 "" 4 "$FTLLM" train inputs/default.ini $tp2 checkpoint.dir="$E2E_TMP/ckl"
no_fatal "last checkpoint death: no FATAL"
has "last checkpoint death: recovered at the end" '^ulfm: after the last step \(5\): recovered on 2 ranks'
warned "last checkpoint death: written again" '^warning: checkpoint of step 5 abandoned: a process died during its write, after the last step; the survivors write it now$'
same_ckpt "last checkpoint death: bitwise the fault-free one" "$E2E_TMP/ck-parallel.tp" "$E2E_TMP/ckl"
# shellcheck disable=SC2086
run "dp 3 + a hot spare: rank 2 killed as the last step's checkpoint starts" 0 "" 4 "$FTLLM" train inputs/default.ini $sp checkpoint.interval=2 checkpoint.dir="$E2E_TMP/ckls" run.save_model="$E2E_TMP/ckls.bin"
no_fatal "last checkpoint death, spare: no FATAL"
has "last checkpoint death, spare: the spare took the place" '^spare: replica 2 failed in step 5 \(process failure, ULFM\): a hot spare took its place'
same "last checkpoint death, spare: weights bitwise equal" "$E2E_TMP/ckls.bin" "$E2E_TMP/clean3.bin"
verifies "last checkpoint death, spare: step 5's checkpoint verifies" "$E2E_TMP/ckls/default.step-00000005.h5"
# a second death, rank 0's inside that last write (its 111th dataset: 54 a checkpoint, two
# written before): the last checkpoint is lost, exit 5, said why; the requeued run resumes from
# step 4's and ends bitwise as without deaths
export FTLLM_TEST_KILL=2:checkpoint:5,0:write:111
# shellcheck disable=SC2086
run "rank 2 killed as the last checkpoint starts, rank 0 as it is written again: exit 5" 5 "" 4 "$FTLLM" train inputs/default.ini $common checkpoint.interval=2 checkpoint.dir="$E2E_TMP/ck2d"
no_fatal "last checkpoint lost: no FATAL"
warned "last checkpoint lost: said why" '^\[r[0-9]+\] error: checkpoint of step 5: abandoned \(a process died during its write\) and not written again \(another death\)'
export FTLLM_TEST_KILL=
# shellcheck disable=SC2086
run "last checkpoint lost: the requeued run resumes" 0 "" 4 "$FTLLM" train inputs/default.ini $common checkpoint.interval=2 checkpoint.dir="$E2E_TMP/ck2d" checkpoint.resume=auto run.save_model="$E2E_TMP/ck2d.bin"
has "last checkpoint lost: resumed from step 4" '^resumed from .*step-00000004.h5: step 4'
same "last checkpoint lost: weights bitwise equal" "$E2E_TMP/ck2d.bin"
# both replicas of dp 2 x tp 2 lose a process (rank 1 in step 3, rank 3 in its recompute, its
# 4th backward): no training rank
# is left to end the run for the waiting ones; every survivor stops with exit 5, said why (before:
# the waiting ranks read an event nobody sent, FATAL, exit 4)
export FTLLM_TEST_KILL=1:backward:3,3:backward:4
# shellcheck disable=SC2086
run "dp 2 x tp 2: both replicas lose a process: exit 5" 5 "" 4 "$FTLLM" train inputs/default.ini $mp parallel.tp=2
no_fatal "no replica left: no FATAL"
warned "no replica left: said why" '^error: spare: every replica lost a process in step 3 \(ULFM\): a wipe-out with no replica left to end the run'
# the same end-of-run recovery for a death in the last step's validation (no checkpoints)
export FTLLM_TEST_KILL=2:eval:1
# shellcheck disable=SC2086
run "rank 2 killed in the last step's validation" 0 "" 4 "$FTLLM" train inputs/default.ini $common train.val_batches=2 train.val_every=0 run.save_model="$E2E_TMP/evl.bin"
no_fatal "last validation death: no FATAL"
has "last validation death: recovered at the end" '^ulfm: after the last step \(5\): recovered on 3 ranks'
same "last validation death: weights bitwise equal" "$E2E_TMP/evl.bin"
export FTLLM_TEST_KILL=0:write:5
# shellcheck disable=SC2086
run "asynchronous: rank 0 killed in its background write" 0 "" 4 "$FTLLM" train inputs/default.ini $common checkpoint.interval=2 checkpoint.async=true checkpoint.dir="$E2E_TMP/cka" run.save_model="$E2E_TMP/cka.bin"
no_fatal "async write death: no FATAL"
warned "async write death: abandoned, written again" '^warning: checkpoint of step [24] abandoned: a process died during its write; the survivors write step [345].s now'
same "async write death: weights bitwise equal" "$E2E_TMP/cka.bin"
verifies "async write death: step 5's checkpoint verifies" "$E2E_TMP/cka/default.step-00000005.h5"
export FTLLM_TEST_KILL=
e2e_finish
