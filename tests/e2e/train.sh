#!/bin/bash
# e2e/train.sh: `ftllm train` and `ftllm sample` as a user meets them, on the default English
# shards (make data) with short runs: per-step lines, validation, summary, verdict, saved llm.c
# weights that `sample` and `train` read back, deterministic sampling, a NaN loss giving exit
# code 1, and bad model files giving one line on stderr and exit code 2. Runs the address-
# sanitizer build ($FTLLM_SAN) once too.
set -u
FTLLM=${FTLLM:-bin/ftllm}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME WANT_RC WANT_STDERR CMD...: one check; stdout in $tmp/out, stderr in $tmp/err
run() {
  local name=$1 want_rc=$2 want=$3; shift 3
  timeout 300 mpiexec -n 1 "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$? lines; lines=$(wc -l < "$tmp/err")
  if [ "$rc" -ne "$want_rc" ]; then bad "$name" "exit code $rc, want $want_rc; stderr: $(head -c 400 "$tmp/err")"; return 1
  elif [ -n "$want" ] && ! grep -qF -- "$want" "$tmp/err"; then bad "$name" "stderr lacks '$want': $(head -c 400 "$tmp/err")"; return 1
  elif [ -n "$want" ] && [ "$lines" -ne 1 ]; then bad "$name" "stderr has $lines lines, want 1: $(head -c 600 "$tmp/err")"; return 1
  elif grep -q 'Sanitizer\|runtime error' "$tmp/err"; then bad "$name" "sanitizer report: $(head -c 600 "$tmp/err")"; return 1
  fi
  ok "$name"
}
has() { grep -qE -- "$2" "$tmp/out" && ok "$1" || bad "$1" "stdout lacks /$2/: $(tail -c 600 "$tmp/out")"; }

deck=inputs/default.ini
short="train.steps=4 train.val_every=2 train.val_batches=2 train.sample_tokens=24"
# shellcheck disable=SC2086
run "train default deck, 4 steps" 0 "" "$FTLLM" train $deck $short run.save_model=$tmp/m.bin
has "per-step line" '^step +1/4 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm [0-9.]+ \| +[0-9.]+ ms \| +[0-9]+ tok/s$'
has "validation line" '^step +2/4 \| val loss [0-9.]+'
has "summary line" '^summary: 4 steps, loss [0-9.]+ -> [0-9.]+, val loss [0-9.]+, [0-9.]+ ms/step'
has "sample printed" '^sample \(24 tokens\):'
has "verdict" '^verdict: OK \(trained 4 steps'
[ -s "$tmp/m.bin" ] && ok "weights saved" || bad "weights saved" "no $tmp/m.bin"

run "sample from saved weights" 0 "" "$FTLLM" sample $deck model.init=$tmp/m.bin train.sample_tokens=40
cp "$tmp/out" "$tmp/sample1"
[ "$(wc -c < "$tmp/sample1")" -ge 40 ] && ok "sample length" || bad "sample length" "$(cat "$tmp/sample1")"
run "sample again" 0 "" "$FTLLM" sample $deck model.init=$tmp/m.bin train.sample_tokens=40
cmp -s "$tmp/out" "$tmp/sample1" && ok "sampling is deterministic" || bad "sampling is deterministic" "outputs differ"

run "train from llm.c weights" 0 "" "$FTLLM" train $deck model.init=$tmp/m.bin train.steps=2 train.sample_tokens=0
has "init from file" "^init: $tmp/m.bin"
# the end-of-run sample: none with train.sample_tokens = 0 or below log level info, one from
# one rank on two (random mutant R01 of seed 6, tests/mutants/random_sample.md: any of the
# three conditions enough printed a 0-token sample, or one per rank)
grep -q '^sample (' "$tmp/out" && bad "no sample with train.sample_tokens = 0" "$(grep '^sample (' "$tmp/out")" ||
  ok "no sample with train.sample_tokens = 0"
run "train at log level warn" 0 "" "$FTLLM" train $deck train.steps=2 train.sample_tokens=8 \
  run.log_level=warn train.val_batches=0
grep -q '^sample (' "$tmp/out" && bad "no sample below log level info" "$(grep '^sample (' "$tmp/out")" ||
  ok "no sample below log level info"
timeout 300 mpiexec -n 2 "$FTLLM" train $deck train.steps=2 train.sample_tokens=8 train.val_batches=0 \
  parallel.dp=2 > "$tmp/out" 2> "$tmp/err"
rc=$?
n=$(grep -c '^sample (8 tokens):' "$tmp/out")
[ "$rc" = 0 ] && [ "$n" = 1 ] && ok "one sample from 2 ranks" ||
  bad "one sample from 2 ranks" "rc $rc, $n sample lines: $(head -c 300 "$tmp/err")"

# llm.c weights read into a sharded layout (tp 2, pp 2: each rank takes its part of the file,
# model_from_deck's !whole path): the first two steps' losses and gradient norms as on one rank
# (within 0.002: the shards sum in other orders). The weights come from 6 steps at lr 0.03, so
# that every tensor is far from its initial value: one tensor left out of the copy moves them by
# more than that (leaving out the final LayerNorm's bias, the smallest, moves the first loss by 0.14).
run "weights trained hard" 0 "" "$FTLLM" train $deck train.steps=6 train.lr=0.03 train.sample_tokens=0 \
  train.val_every=0 faults.schedule= run.save_model=$tmp/hard.bin
run "train from them, one rank" 0 "" "$FTLLM" train $deck model.init=$tmp/hard.bin train.steps=2 train.sample_tokens=0
# loss_norm: "LOSS NORM" of the last run's steps 1 and 2 (from its per-step lines)
loss_norm() { sed -nE 's/^step +[12]\/2 \| loss ([0-9.]+) \| lr [0-9.e+-]+ \| norm ([0-9.]+) .*/\1 \2/p' "$tmp/out"; }
loss_norm > "$tmp/from1"
for lay in parallel.tp=2 parallel.pp=2; do
  timeout 300 mpiexec -n 2 "$FTLLM" train $deck model.init=$tmp/hard.bin train.steps=2 train.sample_tokens=0 \
    $lay > "$tmp/out" 2> "$tmp/err"
  rc=$?
  loss_norm > "$tmp/from2"
  if [ "$rc" -ne 0 ]; then bad "llm.c weights on $lay" "exit code $rc: $(head -c 400 "$tmp/err")"
  elif ! grep -q "^init: $tmp/hard.bin" "$tmp/out"; then bad "llm.c weights on $lay" "no init line"
  elif ! paste -d' ' "$tmp/from1" "$tmp/from2" | awk '
      { d1 = $1 - $3; d2 = $2 - $4; if (NF != 4 || d1 * d1 > 4e-6 || d2 * d2 > 4e-6) exit 1 }
      END { if (NR != 2) exit 1 }'; then
    bad "llm.c weights on $lay" "steps differ from one rank's: $(cat "$tmp/from1") vs $(cat "$tmp/from2")"
  else ok "llm.c weights on $lay: the one-rank run's losses and norms"; fi
done

# two identical runs print identical losses
run "run A" 0 "" "$FTLLM" train $deck train.steps=3 train.sample_tokens=0 run.log_level=info
grep -o 'loss [0-9.]*' "$tmp/out" > "$tmp/lossA"
run "run B" 0 "" "$FTLLM" train $deck train.steps=3 train.sample_tokens=0 run.log_level=info
grep -o 'loss [0-9.]*' "$tmp/out" | cmp -s - "$tmp/lossA" && ok "two runs, same losses" || bad "two runs, same losses" "differ"

# a NaN in the weights: the loss is NaN, the verdict fails, exit code 1
cp "$tmp/m.bin" "$tmp/nan.bin"  # wte[0][0] = NaN: the LM head reads every row of wte
printf '\x00\x00\xc0\x7f' | dd of="$tmp/nan.bin" bs=1 seek=1024 conv=notrunc status=none
run "NaN loss fails the verdict" 1 "" "$FTLLM" train $deck model.init=$tmp/nan.bin train.steps=3 train.sample_tokens=0
has "failed verdict" '^verdict: FAILED \(the loss was not finite at step 1\)'

# bad model files: one line, exit code 2
run "model.init is a token shard" 2 "data/train_000.bin: not an llm.c model file (magic 20240520, expected 20240326)" \
  "$FTLLM" train $deck model.init=data/train_000.bin
run "model.init shape vs deck" 2 "does not match the deck" "$FTLLM" train $deck model.init=$tmp/m.bin model.layers=2
head -c 5000 "$tmp/m.bin" > "$tmp/short.bin"
run "model.init truncated" 2 "$tmp/short.bin: truncated" "$FTLLM" train $deck model.init=$tmp/short.bin
run "model.init missing" 2 "nope.bin: cannot open the model file" "$FTLLM" train $deck model.init=nope.bin
run "sample, model.init missing" 2 "nope.bin: cannot open the model file" "$FTLLM" sample $deck model.init=nope.bin
# run.save_model where no file can be made: the run trains, says why in one line, fails its verdict
run "run.save_model unwritable" 1 "$tmp/no/such/dir/m.bin.tmp: cannot create" "$FTLLM" train $deck \
  train.steps=2 train.sample_tokens=0 faults.schedule= run.save_model=$tmp/no/such/dir/m.bin
has "unwritable weights fail the verdict" '^verdict: FAILED \(the weights could not be written\)'
run "sample needs model.init" 2 "ftllm sample: model.init is empty" "$FTLLM" sample $deck
run "train.seq_len too long" 2 "train.seq_len = 65 exceeds model.seq_len = 64" "$FTLLM" train $deck train.seq_len=65
run "bad data glob" 2 "nothing/*.bin" "$FTLLM" train $deck 'data.train=nothing/*.bin'
# SPARe's shard-keyed reduction on one rank (dp 1, r 1): the end-of-run line scripts read
run "SPARe r 1" 0 "" "$FTLLM" train $deck train.steps=2 spare.r=1 train.sample_tokens=0 train.val_batches=1
has "per-step SPARe fields" '^step +2/2 \| loss .* tok/s \| live 1 depth 1$'
has "spare: line" '^spare: r 1, 1 replicas, live 1, depth 1; failures masked 0, wipe-outs 0; shards computed 2 vs needed 2'

if [ -n "${FTLLM_SAN:-}" ] && [ -x "$FTLLM_SAN" ]; then
  run "address sanitizer: train with AC and accumulation" 0 "" "$FTLLM_SAN" train $deck train.steps=2 \
    train.ac=every train.ac_every=3 parallel.microbatches=2 train.sample_tokens=8 train.val_batches=1
  run "address sanitizer: bad model file" 2 "not an llm.c model file" "$FTLLM_SAN" train $deck model.init=data/train_000.bin
fi

echo "[  PASSED  ] $pass test(s)."
[ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s), listed above."
[ "$fail" -eq 0 ]
