#!/bin/bash
# e2e/train_ckpt.sh: checkpoints of `ftllm train` as a user and a crash meet them, on the default
# English shards with a small model (constant learning rate, so a run of N steps and the first N
# steps of a run of 2N are the same computation):
#  - 6 steps straight vs 3 steps + checkpoint + checkpoint.resume=auto + 3 more: the saved
#    weights are bitwise identical and so are the losses of steps 4-6 (sync, async, and 2 ranks);
#  - a checkpoint written on tp 2 and resumed on 1 rank and on pp 2: losses and weights match the
#    straight run within the different summation orders; its first or last element of a tensor
#    changed, the file is refused;
#  - a run SIGKILLed in the middle of a checkpoint write (2 ranks, checkpoint.debug_delay_ms)
#    leaves the previous checkpoint usable, resume=auto picks it (reporting the temporary) and
#    the finished run matches the straight one bitwise;
#  - flipped bytes, a truncated file, a file of another format: resume=auto reports each and falls
#    back; resume=FILE with each, a missing file, a checkpoint of another model shape: one line on
#    stderr naming the file (and dataset), exit code 2;
#  - a requeued job resumed with the same fault schedule: the events the checkpoint's steps held
#    are said at the start and not acted on, the later flip is caught, weights bitwise;
#  - resumed with another run.seed: one warning naming the file and both seeds (none with the same);
#  - checkpoint.interval = auto prints the chosen interval, what it measured and what the deck gave.
set -u
FTLLM=${FTLLM:-bin/ftllm}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
D=$(mktemp -d "${TMPDIR:-/tmp}/ft_e2e_train_ckpt_XXXXXX")
trap 'rm -rf "$D"' EXIT

# run NAME WANT_RC WANT_STDERR NP CMD...: one check; stdout in $D/out, stderr in $D/err
run() {
  local name=$1 want_rc=$2 want=$3 np=$4; shift 4
  timeout 300 mpiexec -n "$np" "$@" > "$D/out" 2> "$D/err"
  local rc=$?
  if [ "$rc" -ne "$want_rc" ]; then bad "$name" "exit code $rc, want $want_rc; stderr: $(head -c 600 "$D/err")"; return 1
  elif [ -n "$want" ] && ! grep -qF -- "$want" "$D/err"; then bad "$name" "stderr lacks '$want': $(head -c 600 "$D/err")"; return 1
  elif [ "$want_rc" -eq 2 ] && [ "$(wc -l < "$D/err")" -ne 1 ]; then bad "$name" "stderr is not one line: $(head -c 600 "$D/err")"; return 1
  elif grep -q 'Sanitizer\|runtime error' "$D/err"; then bad "$name" "sanitizer report: $(head -c 600 "$D/err")"; return 1
  fi
  ok "$name"
}
has() { grep -qF -- "$2" "$D/out" && ok "$1" || bad "$1" "stdout lacks '$2': $(tail -c 600 "$D/out")"; }
hasre() { grep -qE -- "$2" "$D/out" && ok "$1" || bad "$1" "stdout lacks /$2/: $(tail -c 600 "$D/out")"; }
errhas() { grep -qF -- "$2" "$D/err" && ok "$1" || bad "$1" "stderr lacks '$2': $(head -c 600 "$D/err")"; }
name() { printf '%s/e2e.step-%08d.h5' "$1" "$2"; }
losses() { grep -E '^step +[456]/6 \| loss' "$D/out" | cut -d'|' -f1-2; } # steps 4-6
same() { cmp -s "$2" "$3" && ok "$1" || bad "$1" "$2 and $3 differ"; }
# the numbers of a file, one a line: the losses() lines, or an llm.c model file's weights (after
# its 1024-byte header)
numbers() {
  case $1 in
  *.bin) od -A n -v -t f4 -j 1024 "$1" | tr -s ' ' '\n' | sed '/^$/d' ;;
  *) grep -oE 'loss +[0-9.]+' "$1" | awk '{print $2}' ;;
  esac
}
# near NAME TOL A B: A and B have the same count of numbers (at least one), each within TOL
near() {
  local r
  r=$(paste <(numbers "$3") <(numbers "$4") | awk -v tol="$2" '
    NF != 2 {bad++} {d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; n++}
    END {printf "%d numbers, max difference %.3g", n, m; exit !(n > 0 && !bad && m <= tol)}')
  [ $? -eq 0 ] && ok "$1 ($r)" || bad "$1" "$r, want <= $2 ($3 vs $4)"
}
# h5_span FILE DATASET: "OFFSET SIZE" of a contiguous dataset's data in the file (h5dump -p)
h5_span() { h5dump -p -H -d "$2" "$1" | awk '$1 == "OFFSET" {o = $2} $1 == "SIZE" {s = $2} END {print o, s}'; }
flip() { # flip BYTE OFFSET of FILE (xor 0x10)
  local b; b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "\\$(printf %03o $((b ^ 16)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

deck=inputs/default.ini
small="run.name=e2e model.layers=2 model.channels=64 train.batch=2 train.seq_len=32 train.schedule=constant train.warmup=2 train.sample_tokens=0 train.val_batches=1 train.val_every=0"

# shellcheck disable=SC2086
run "straight 6 steps" 0 "" 1 "$FTLLM" train $deck $small train.steps=6 run.save_model=$D/straight.bin
losses > "$D/l_straight"
has "straight: the end-of-run line" "---- end of run e2e: 6 steps on 1 rank ----"
[ "$(wc -l < "$D/l_straight")" -eq 3 ] && ok "losses of steps 4-6 found" || bad "losses of steps 4-6 found" "$(cat "$D/l_straight")"
dp2="parallel.dp=2" # 2 ranks: two data-parallel replicas, compared with a straight 2-rank run
# shellcheck disable=SC2086
run "straight 6 steps, 2 ranks" 0 "" 2 "$FTLLM" train $deck $small $dp2 train.steps=6 run.save_model=$D/straight2.bin
losses > "$D/l_straight2"

for mode in sync async np2; do
  d="$D/$mode" async=false np=1 lay="" ref=straight
  [ "$mode" = async ] && async=true
  [ "$mode" = np2 ] && np=2 lay=$dp2 ref=straight2
  # shellcheck disable=SC2086
  run "$mode: 3 steps, checkpoint at 3" 0 "" $np "$FTLLM" train $deck $small $lay train.steps=3 checkpoint.dir=$d checkpoint.interval=3 checkpoint.async=$async
  [ -e "$(name "$d" 3)" ] && ok "$mode: file of step 3" || bad "$mode: file of step 3" "$(ls "$d")"
  # shellcheck disable=SC2086
  run "$mode: resume=auto to 6" 0 "" $np "$FTLLM" train $deck $small $lay train.steps=6 checkpoint.dir=$d checkpoint.resume=auto run.save_model=$D/$mode.bin
  has "$mode: resumed at step 3" "resumed from $(name "$d" 3): step 3, data cursor"
  hasre "$mode: continues at step 4" '^step +4/6 \| loss'
  same "$mode: weights bitwise equal to the straight run" "$D/$ref.bin" "$D/$mode.bin"
  losses > "$D/l_$mode"
  same "$mode: losses of steps 4-6 equal" "$D/l_$ref" "$D/l_$mode"
  ! grep -qF "written with run.seed" "$D/err" && ok "$mode: the same seed, no seed warning" ||
    bad "$mode: the same seed, no seed warning" "$(head -c 600 "$D/err")"
done
# resumed with another run.seed: the data order differs from the original run's from here on,
# which the run says (one warning naming the file and both seeds) and then trains
# shellcheck disable=SC2086
run "resume with another run.seed" 0 "" 1 "$FTLLM" train $deck $small train.steps=4 checkpoint.dir=$D/sync checkpoint.resume=$(name "$D/sync" 3) checkpoint.interval=0 run.seed=4242
errhas "another seed: warned" "$(name "$D/sync" 3): written with run.seed = "
errhas "another seed: both seeds named" "this run has 4242: the data order from here on differs"
hasre "another seed: continues at step 4" '^step +4/4 \| loss'

# a requeued job resumes with the same fault schedule: its events at steps the checkpoint holds
# (step 3 itself included: the boundary)
# are said once at the start and not acted on (no fail-stop counted, the early flip "not
# applied"); the later flip is caught; the weights are the straight 2-rank run's, bitwise
d="$D/requeue"
printf 'fail step=3 replica=1\nsdc step=3 rank=0 op=matmul:1 bit=20\nsdc step=5 rank=1 op=matmul:2 bit=21\n' > "$D/rq.faults"
rq="$dp2 spare.r=2 dmr.mode=naive faults.schedule=$D/rq.faults checkpoint.dir=$d"
# shellcheck disable=SC2086
run "requeue: 3 steps with faults, checkpoint at 3" 0 "" 2 "$FTLLM" train $deck $small $rq train.steps=3 checkpoint.interval=3
has "requeue: the first job's fail-stop" "fail-stop events 1, acted on by SPARe"
# shellcheck disable=SC2086
run "requeue: resumed to 6 with the same schedule" 0 "" 2 "$FTLLM" train $deck $small $rq train.steps=6 checkpoint.resume=auto run.save_model=$D/requeue.bin
has "requeue: the early events said" "1 bit flip and 1 fail-stop event at steps up to 3, which the resumed checkpoint holds, are not applied (this run computes steps 4 on)"
hasre "requeue: the late flip caught, the early one not applied" '^faults: sdc injected 1, detected 1, rolled back 1, missed 0 \(schedule .*; 1 flip not applied; fail-stop events 0\)'
hasre "requeue: every replica live" '^spare: r 2, 2 replicas, live 2, depth 1; failures masked 0'
same "requeue: weights bitwise equal to the straight run" "$D/straight2.bin" "$D/requeue.bin"

# resharding: written by tp 2 (2 ranks), resumed on one rank and on pp 2, each to step 6; both
# must match the straight single-rank run (the same global batch): the losses of steps 4-6 as
# printed (4 decimals) within 2e-4, the weights within 1e-4 (pp 2's read back from its final
# checkpoint by a one-rank run with nothing left to train). The layouts sum in different orders
# (about 1e-6 here); a misplaced shard or moment is off by about lr = 1e-3, or far more.
d="$D/reshard"
# shellcheck disable=SC2086
run "reshard: 3 steps on tp 2" 0 "" 2 "$FTLLM" train $deck $small parallel.tp=2 train.steps=3 checkpoint.dir=$d checkpoint.interval=3
# shellcheck disable=SC2086
run "reshard: resume on 1 rank" 0 "" 1 "$FTLLM" train $deck $small train.steps=6 checkpoint.dir=$d checkpoint.resume=$(name "$d" 3) checkpoint.interval=0 run.save_model=$D/reshard1.bin
has "reshard: 1 rank resumed at step 3" "resumed from $(name "$d" 3): step 3"
losses > "$D/l_reshard1"
near "reshard: 1 rank: losses of steps 4-6" 2e-4 "$D/l_straight" "$D/l_reshard1"
near "reshard: 1 rank: weights" 1e-4 "$D/straight.bin" "$D/reshard1.bin"
# shellcheck disable=SC2086
run "reshard: resume on pp 2" 0 "" 2 "$FTLLM" train $deck $small parallel.pp=2 train.steps=6 checkpoint.dir=$d/pp2 checkpoint.resume=$(name "$d" 3) checkpoint.interval=6
hasre "reshard: pp 2 continues at step 4" '^step +4/6 \| loss'
losses > "$D/l_reshard_pp2"
near "reshard: pp 2: losses of steps 4-6" 2e-4 "$D/l_straight" "$D/l_reshard_pp2"
# shellcheck disable=SC2086
run "reshard: pp 2's weights read back" 0 "" 1 "$FTLLM" train $deck $small train.steps=6 checkpoint.resume=$(name "$d/pp2" 6) run.save_model=$D/reshard_pp2.bin
near "reshard: pp 2: weights" 1e-4 "$D/straight.bin" "$D/reshard_pp2.bin"
# the tp 2 file with its first or its last element of params/qkvw changed (the last one written
# by tp rank 1; found with h5dump): refused
read -r off size <<< "$(h5_span "$(name "$d" 3)" params/qkvw)"
for at in first last; do
  cp "$(name "$d" 3)" "$d/$at.h5"
  [ $at = first ] && flip "$d/$at.h5" "${off:-0}" || flip "$d/$at.h5" $((${off:-0} + ${size:-0} - 1))
  # shellcheck disable=SC2086
  run "reshard: $at element of a tensor changed" 2 "$d/$at.h5: dataset 'params/qkvw': checksum mismatch" 1 "$FTLLM" train $deck $small checkpoint.resume=$d/$at.h5
done

# SIGKILL in the middle of the write of step 4 (2 ranks): the checkpoint of step 2 stays usable
d="$D/kill"
# shellcheck disable=SC2086
run "kill: checkpoint at 2" 0 "" 2 "$FTLLM" train $deck $small $dp2 train.steps=2 checkpoint.dir=$d checkpoint.interval=2
tmp="$(name "$d" 4).tmp"
# shellcheck disable=SC2086
mpiexec -n 2 "$FTLLM" train $deck $small $dp2 train.steps=6 checkpoint.dir=$d checkpoint.interval=2 checkpoint.resume=auto checkpoint.debug_delay_ms=150 > "$D/kill.out" 2>&1 &
launcher=$!
for _ in $(seq 1 300); do [ -e "$tmp" ] && break; sleep 0.1; done
sleep 1 # some datasets written, not all (54 datasets x 150 ms)
if [ -e "$tmp" ]; then
  # the ranks are the processes whose command line names this unique folder
  kill -9 $(pgrep -f -- "checkpoint.dir=$d ") 2> /dev/null
  wait "$launcher" 2> /dev/null
  [ -e "$tmp" ] && [ ! -e "$(name "$d" 4)" ] && ok "kill: only a temporary of step 4" || bad "kill: only a temporary of step 4" "$(ls "$d")"
else
  bad "kill: the write of step 4 started" "no $tmp: $(tail -c 400 "$D/kill.out")"
  kill -9 "$launcher" 2> /dev/null; wait "$launcher" 2> /dev/null
fi
# shellcheck disable=SC2086
run "kill: resume=auto" 0 "ignoring $tmp, left by an interrupted write" 2 "$FTLLM" train $deck $small $dp2 train.steps=6 checkpoint.dir=$d checkpoint.resume=auto checkpoint.interval=2 run.save_model=$D/kill.bin
has "kill: resumed from step 2" "resumed from $(name "$d" 2): step 2"
same "kill: weights bitwise equal to the straight run" "$D/straight2.bin" "$D/kill.bin"
[ ! -e "$tmp" ] && [ -e "$(name "$d" 6)" ] && ok "kill: temporary removed, step 6 written" || bad "kill: temporary removed, step 6 written" "$(ls "$d")"

# bad files: resume=auto falls back; resume=FILE is an error
d="$D/bad"
# shellcheck disable=SC2086
run "bad: checkpoints 1-4" 0 "" 1 "$FTLLM" train $deck $small train.steps=4 checkpoint.dir=$d checkpoint.interval=1 checkpoint.keep=10
f1=$(name "$d" 1) f2=$(name "$d" 2) f3=$(name "$d" 3) f4=$(name "$d" 4)
flip "$f4" $(($(stat -c %s "$f4") / 2))
truncate -s $(($(stat -c %s "$f3") / 3)) "$f3"
echo "step,loss" > "$f2"
# shellcheck disable=SC2086
run "bad: resume=auto falls back to step 1" 0 "skipping $f4: dataset 'optim/" 1 "$FTLLM" train $deck $small train.steps=4 checkpoint.dir=$d checkpoint.resume=auto
errhas "bad: truncated file reported" "skipping $f3: truncated or damaged HDF5 file"
errhas "bad: foreign file reported" "skipping $f2: not an HDF5 file"
has "bad: resumed from step 1" "resumed from $f1: step 1"
errhas "bad: the newer files counted" "checkpoint: resuming from $f1, older than 3 newer files that failed verification"
# shellcheck disable=SC2086
run "bad: resume=FILE flipped bytes" 2 "$f4: dataset 'optim/" 1 "$FTLLM" train $deck $small checkpoint.resume=$f4
errhas "bad: flipped bytes: checksum mismatch" "checksum mismatch"
# shellcheck disable=SC2086
run "bad: resume=FILE truncated" 2 "$f3: truncated or damaged HDF5 file" 1 "$FTLLM" train $deck $small checkpoint.resume=$f3
# shellcheck disable=SC2086
run "bad: resume=FILE another format" 2 "$f2: not an HDF5 file" 1 "$FTLLM" train $deck $small checkpoint.resume=$f2
# shellcheck disable=SC2086
run "bad: resume=FILE missing" 2 "$d/nope.h5: cannot open the checkpoint" 1 "$FTLLM" train $deck $small checkpoint.resume=$d/nope.h5
# shellcheck disable=SC2086
run "bad: another model shape" 2 "$f1: dataset 'params/ln1w' has shape [2,64], the model expects [3,64]" 1 "$FTLLM" train $deck $small model.layers=3 checkpoint.resume=$f1
# shellcheck disable=SC2086
run "bad: another model shape, 2 ranks" 2 "the model expects [3,64]" 2 "$FTLLM" train $deck $small $dp2 model.layers=3 checkpoint.resume=$f1

# interval = auto: the choice and its inputs are printed; the checkpoints follow it
d="$D/auto"
# shellcheck disable=SC2086
run "auto interval" 0 "" 1 "$FTLLM" train $deck $small train.steps=6 checkpoint.dir=$d checkpoint.interval=auto checkpoint.keep=10 cluster.gpus=8 cluster.gpus_per_replica=8 cluster.gpu_mtbf_h=0.001 cluster.restart_s=1
hasre "auto: the choice" '^checkpoint.interval = auto: every [0-9]+ steps \([0-9.e+-]+ s of work\), chosen by the optimizer'
hasre "auto: what it measured" '^  measured here: step [0-9.e+-]+ s \(mean of [0-9]+ timed steps\), checkpoint write [0-9.e+-]+ s'
has "auto: what the deck gave" "from the deck ([cluster]): 8 GPUs, 8 per replica, GPU MTBF 0.001 h"
has "auto: why" "why: Young sqrt(2CM) ="
[ -e "$(name "$d" 2)" ] && [ -e "$(name "$d" 6)" ] && ok "auto: first checkpoint after the first timed step, and the end" || bad "auto: checkpoints" "$(ls "$d")"

if [ -n "${FTLLM_SAN:-}" ] && [ -x "$FTLLM_SAN" ]; then
  d="$D/san"
  # shellcheck disable=SC2086
  run "sanitizer: async checkpoints" 0 "" 1 "$FTLLM_SAN" train $deck $small train.steps=3 checkpoint.dir=$d checkpoint.interval=2 checkpoint.async=true
  # shellcheck disable=SC2086
  run "sanitizer: resume" 0 "" 1 "$FTLLM_SAN" train $deck $small train.steps=4 checkpoint.dir=$d checkpoint.resume=auto
  has "sanitizer: resumed" "resumed from $(name "$d" 3): step 3"
  # shellcheck disable=SC2086
  run "sanitizer: another model shape" 2 "has shape" 1 "$FTLLM_SAN" train $deck $small model.layers=3 checkpoint.resume=$(name "$d" 3)
fi

echo "[  PASSED  ] $pass test(s)."
[ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s), listed above."
[ "$fail" -eq 0 ]
