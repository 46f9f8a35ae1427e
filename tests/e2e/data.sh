#!/bin/bash
# e2e/data.sh: `ftllm tokenize` as a user meets it, with the normal binary ($FTLLM) and the
# address-sanitizer build ($FTLLM_SAN, when given): the shard it writes is exactly llm.c's
# format (header bytes, one uint16 token per input byte), the --val split shares no byte and
# loses none, and every bad input is one line on stderr with exit code 2; which tokens
# `ftllm train` hands to the model, in which order, over ranks and across a resume (its debug
# log, checked against the shards' bytes). Also checks the default shards that `make data` built,
# when present.
set -u
source "$(dirname "$0")/lib.bash"
tmp=$E2E_TMP

# the tokens of a shard, one decimal per line (skipping the 1024-byte header)
tokens() { od -A n -v -t u2 -j 1024 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
# the text's bytes, one decimal per line
bytes() { od -A n -v -t u1 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
header() { od -A n -t d4 -N 12 "$1" | tr -s ' ' ' ' | sed 's/^ //;s/ $//'; }

printf 'In the beginning God created the heaven and the earth.\nAnd the earth was without form, and void.\n\xc3\xa9\x00\xff binary bytes too\nlast line\n' > "$tmp/in.txt"
size=$(stat -c %s "$tmp/in.txt")
: > "$tmp/empty.txt"
mkdir -p "$tmp/adir"

bins=("$FTLLM")
[ -n "${FTLLM_SAN:-}" ] && [ -x "$FTLLM_SAN" ] && bins+=("$FTLLM_SAN")

for bin in "${bins[@]}"; do
  tag=$(basename "$(dirname "$bin")")
  rm -f "$tmp"/*.bin
  run "$tag tokenize" 0 "" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/out.bin"
  if [ "$(header "$tmp/out.bin")" = "20240520 1 $size" ]; then ok "$tag header"
  else bad "$tag header" "got '$(header "$tmp/out.bin")', want '20240520 1 $size'"; fi
  if [ "$(stat -c %s "$tmp/out.bin")" -eq $((1024 + 2 * size)) ]; then ok "$tag shard size"
  else bad "$tag shard size" "$(stat -c %s "$tmp/out.bin") bytes, want $((1024 + 2 * size))"; fi
  if [ "$(tokens "$tmp/out.bin")" = "$(bytes "$tmp/in.txt")" ]; then ok "$tag one token per byte"
  else bad "$tag one token per byte" "tokens differ from the input bytes"; fi
  echo "$LAST_OUT" | grep -q "$size tokens" && ok "$tag summary line" || bad "$tag summary line" "$LAST_OUT"

  # --val: the two shards are the text cut at the first line start in its last 30%, nothing lost
  # or shared
  run "$tag tokenize --val" 0 "" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/tr.bin" --val "$tmp/va.bin" --val-fraction 0.3
  ntr=$(header "$tmp/tr.bin" | cut -d' ' -f3) nva=$(header "$tmp/va.bin" | cut -d' ' -f3)
  if [ $((ntr + nva)) -eq "$size" ] && [ "$nva" -gt 0 ] && [ "$nva" -le $(((size * 3 + 9) / 10)) ]; then ok "$tag val split sizes"
  else bad "$tag val split sizes" "train $ntr + val $nva tokens, text $size bytes"; fi
  if [ "$( (tokens "$tmp/tr.bin"; tokens "$tmp/va.bin") )" = "$(bytes "$tmp/in.txt")" ]; then ok "$tag val split content"
  else bad "$tag val split content" "train + val != text"; fi
  [ "$(tokens "$tmp/tr.bin" | tail -1)" = 10 ] && ok "$tag val starts on a line" || bad "$tag val starts on a line" "train does not end with a newline"
  run "$tag tokenize on 2 ranks" 0 "" 2 "$bin" tokenize "$tmp/in.txt" "$tmp/two.bin"
  cmp -s "$tmp/two.bin" "$tmp/out.bin" && ok "$tag 2 ranks same shard" || bad "$tag 2 ranks same shard" "differs"
  ls "$tmp" | grep -q tmp && bad "$tag no temporary left" "$(ls "$tmp")" || ok "$tag no temporary left"

  # bad input: one line, exit code 2
  run "$tag missing input" 2 "$tmp/nope.txt: cannot open the input text: No such file or directory" 1 "$bin" tokenize "$tmp/nope.txt" "$tmp/x.bin"
  run "$tag empty input" 2 "$tmp/empty.txt: empty input, nothing to tokenize" 1 "$bin" tokenize "$tmp/empty.txt" "$tmp/x.bin"
  run "$tag input is a directory" 2 "$tmp/adir: is a directory" 1 "$bin" tokenize "$tmp/adir" "$tmp/x.bin"
  run "$tag unwritable output" 2 "/nonexistent/ftllm/x.bin: cannot create the token shard" 1 "$bin" tokenize "$tmp/in.txt" /nonexistent/ftllm/x.bin
  run "$tag output is a directory" 2 "$tmp/adir: is a directory, cannot write" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/adir"
  run "$tag unwritable val" 2 "/nonexistent/ftllm/v.bin: cannot create" 2 "$bin" tokenize "$tmp/in.txt" "$tmp/t2.bin" --val /nonexistent/ftllm/v.bin --val-fraction 0.5
  [ -e "$tmp/t2.bin" ] && bad "$tag failed val leaves no train shard" "t2.bin exists" || ok "$tag failed val leaves no train shard"
  run "$tag no arguments" 2 "usage: ftllm tokenize IN.txt OUT.bin" 1 "$bin" tokenize
  run "$tag one argument" 2 "usage: ftllm tokenize IN.txt OUT.bin" 1 "$bin" tokenize "$tmp/in.txt"
  run "$tag extra argument" 2 "unexpected argument 'z'" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" z
  run "$tag unknown option" 2 "unknown option '--vocab'" 1 "$bin" tokenize --vocab 3 "$tmp/in.txt" "$tmp/x.bin"
  run "$tag bad fraction" 2 "--val-fraction '1.5': expected a number in (0, 1)" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" --val "$tmp/v.bin" --val-fraction 1.5
  run "$tag fraction 1" 2 "--val-fraction '1': expected a number in (0, 1)" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" --val "$tmp/v.bin" --val-fraction 1
  run "$tag fraction 0" 2 "--val-fraction '0': expected a number in (0, 1)" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" --val "$tmp/v.bin" --val-fraction 0
  run "$tag fraction without val" 2 "--val and --val-fraction go together" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" --val-fraction 0.1
  run "$tag val without fraction" 2 "--val and --val-fraction go together" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" --val "$tmp/v.bin"
  run "$tag val without value" 2 "--val needs a value" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" --val
  printf 'one line only' > "$tmp/oneline.txt"
  run "$tag split impossible" 2 "leaves" 1 "$bin" tokenize "$tmp/oneline.txt" "$tmp/x.bin" --val "$tmp/v.bin" --val-fraction 0.5
  [ -e "$tmp/x.bin" ] && bad "$tag no output after errors" "x.bin exists" || ok "$tag no output after errors"
done

# Which tokens reach the model: `ftllm train` at run.log_level=debug logs every sequence it hands
# to the model (number, stream offset, file:token, inputs, targets). On a stream of two shards
# (one sequence runs across the file boundary), T = 8, B = 2, a held-back validation tail:
#  - every logged sequence's inputs and targets are the stream's tokens at the offset it names,
#    and that offset is in the file it names;
#  - unshuffled: sequences 0, 1, 2, ... in order at offsets (i mod n) T, wrapping after the epoch
#    of n; validation sequences lie past the last training target;
#  - shuffled: each epoch's offsets are a permutation of the unshuffled ones, not the identity;
#  - dp 2 on 2 ranks takes exactly the sequences of one rank with 2 micro-batches, each once;
#  - 3 steps + checkpoint + resume=auto to 6 trains on the same sequences as 6 steps straight.
T=8
printf 'In the beginning God created the heaven and the earth.\nAnd the earth was without form, and void; and darkness was upon the face of the deep.\n' > "$tmp/a.txt"
printf 'And the Spirit of God moved upon the face of the waters.\nAnd God said, Let there be light: and there was light.\n' > "$tmp/b.txt"
run "order: shard 0" 0 "" 1 "$FTLLM" tokenize "$tmp/a.txt" "$tmp/sh_0.bin"
run "order: shard 1" 0 "" 1 "$FTLLM" tokenize "$tmp/b.txt" "$tmp/sh_1.bin"
(tokens "$tmp/sh_0.bin"; tokens "$tmp/sh_1.bin") > "$tmp/stream"
n0=$(tokens "$tmp/sh_0.bin" | wc -l)
tiny=(inputs/default.ini "data.train=$tmp/sh_*.bin" data.val= data.val_fraction=0.2 model.layers=1
      model.channels=16 model.heads=2 train.seq_len=$T train.batch=2 train.val_batches=1
      train.sample_tokens=0 run.log_level=debug run.name=order dmr.mode=off faults.schedule=)
# (no DMR and no injected flips here: a rolled-back step fetches its sequences again, which the
# "redo" check below looks at on its own)
# train_log NAME NP OUT ARGS...: trains, keeps the "batch:" lines (without the rank) in OUT
train_log() {
  local name=$1 np=$2 out=$3; shift 3
  run "order: $name" 0 "" "$np" "$FTLLM" train "${tiny[@]}" "$@"
  grep -h ' batch: ' "$E2E_TMP/out" | sed 's/^\[r[0-9]*\] //' > "$out"
  [ -s "$out" ] && ok "order: $name: sequences logged" || bad "order: $name: sequences logged" "$(tail -c 300 "$E2E_TMP/out")"
}
# check_tokens NAME LOG: every line's tokens are the stream's at its offset, in the file it names
check_tokens() {
  local r
  r=$(awk -v T=$T -v n0="$n0" -v f0="$tmp/sh_0.bin" -v f1="$tmp/sh_1.bin" '
    FNR == NR {s[NR - 1] = $1; next}
    {
      # batch: WHAT sequence I at stream token OFF (FILE:token K): inputs x T | targets x T
      off = $8; file = substr($9, 2); sub(/:token$/, "", file); k = $10 + 0
      if ((off < n0 && (file != f0 || k != off)) || (off >= n0 && (file != f1 || k != off - n0))) { bad++; next }
      if ($11 != "inputs" || $(12 + T) != "|" || $(13 + T) != "targets" || NF != 13 + 2 * T) { bad++; next }
      for (j = 0; j < T; j++) if ($(12 + j) != s[off + j] || $(14 + T + j) != s[off + 1 + j]) { bad++; next }
      n++
    }
    END {printf "%d sequences, %d wrong", n, bad; exit !(n > 0 && !bad)}' "$tmp/stream" "$2")
  [ $? -eq 0 ] && ok "$1 ($r)" || bad "$1" "$r: $(head -3 "$2")"
}
nseq() { sed -n 's/^data: .* \([0-9]*\) sequences of .*/\1/p' "$E2E_TMP/out"; }
train_seqs() { awk '$2 == "train" {print $4, $8}' "$1"; } # "number offset" per train sequence

train_log "unshuffled" 1 "$tmp/plain" data.shuffle=false train.steps=14 train.val_every=7
n=$(nseq)
check_tokens "order: unshuffled: tokens" "$tmp/plain"
want=$(for i in $(seq 0 27); do echo "$i $(( (i % n) * T ))"; done)
[ "$(train_seqs "$tmp/plain")" = "$want" ] && ok "order: unshuffled: sequences 0-27 in order at (i mod $n) T" || bad "order: unshuffled: sequences in order" "$(train_seqs "$tmp/plain" | tr '\n' ' ')"
# a step redone by DMR (the flip of inputs/default.faults at step 3 caught by naive DMR) trains
# on the same sequences again: the same list with step 3's two sequences once more
train_log "dmr redo" 1 "$tmp/redo" data.shuffle=false train.steps=14 train.val_every=7 dmr.mode=naive faults.schedule=inputs/default.faults
want_redo=$(echo "$want" | awk '{print} NR == 6 {print l5; print $0} {l5 = (NR == 5 ? $0 : l5)}')
[ "$(train_seqs "$tmp/redo")" = "$want_redo" ] && ok "order: a redone step fetches its own sequences again" \
  || bad "order: a redone step fetches its own sequences again" "$(train_seqs "$tmp/redo" | head -10 | tr '\n' ' ')"
awk -v lim=$((n * T + 1)) '$2 == "val" {v++; if ($8 < lim) b++} END {exit !(v > 0 && !b)}' "$tmp/plain" \
  && ok "order: validation past the last training target" || bad "order: validation past the last training target" "$(grep ' val ' "$tmp/plain" | head -2)"
check_tokens "order: the boundary-crossing sequence checked" <(awk -v n0="$n0" -v T=$T '$8 < n0 && $8 + T >= n0' "$tmp/plain" | head -1)

# a sequence longer than 64 tokens: its first 64 inputs and targets, each list ending in "..."
# (a later override wins over tiny's train.seq_len)
train_log "T 70" 1 "$tmp/long" data.shuffle=false train.steps=3 train.seq_len=70 model.seq_len=70 train.val_every=0
r=$(awk 'FNR == NR {s[NR - 1] = $1; next}
  $2 == "train" {
    off = $8
    if ($11 != "inputs" || $76 != "..." || $77 != "|" || $78 != "targets" || $143 != "..." || NF != 143) { bad++; next }
    for (j = 0; j < 64; j++) if ($(12 + j) != s[off + j] || $(79 + j) != s[off + 1 + j]) { bad++; next }
    n++
  }
  END {printf "%d sequences, %d wrong", n, bad; exit !(n > 0 && !bad)}' "$tmp/stream" "$tmp/long")
[ $? -eq 0 ] && ok "order: T 70: the first 64 tokens, then ... ($r)" || bad "order: T 70: the first 64 tokens, then ..." "$r: $(head -c 600 "$tmp/long")"

train_log "shuffled" 1 "$tmp/shuf" data.shuffle=true train.steps=14 train.val_every=0
check_tokens "order: shuffled: tokens" "$tmp/shuf"
perm=$(train_seqs "$tmp/shuf" | awk -v n="$n" -v T=$T '$1 < n {print $2 / T}')
[ "$(sort -n <<< "$perm" | tr '\n' ' ')" = "$(seq 0 $((n - 1)) | tr '\n' ' ')" ] && ok "order: shuffled: epoch 0 is a permutation" || bad "order: shuffled: epoch 0 is a permutation" "$(tr '\n' ' ' <<< "$perm")"
[ "$(tr '\n' ' ' <<< "$perm")" != "$(seq 0 $((n - 1)) | tr '\n' ' ')" ] && ok "order: shuffled: not the identity" || bad "order: shuffled: not the identity" "$perm"
[ "$(train_seqs "$tmp/shuf" | awk '{print $1}' | tr '\n' ' ')" = "$(seq 0 27 | tr '\n' ' ')" ] && ok "order: shuffled: sequence numbers 0-27" || bad "order: shuffled: sequence numbers 0-27" "$(train_seqs "$tmp/shuf" | tr '\n' ' ')"

train_log "2 micro-batches" 1 "$tmp/mb2" train.steps=5 parallel.microbatches=2 train.val_every=0
train_log "dp 2" 2 "$tmp/dp2" train.steps=5 parallel.dp=2 train.val_every=0
check_tokens "order: dp 2: tokens" "$tmp/dp2"
[ "$(train_seqs "$tmp/dp2" | sort -n)" = "$(train_seqs "$tmp/mb2" | sort -n)" ] && [ "$(train_seqs "$tmp/dp2" | wc -l)" -eq 20 ] \
  && ok "order: dp 2: the sequences of 2 micro-batches, each once" || bad "order: dp 2: the sequences of 2 micro-batches, each once" "$(train_seqs "$tmp/dp2" | sort -n | tr '\n' ' ')"

train_log "6 steps straight" 1 "$tmp/straight" train.steps=6 train.val_every=0
train_log "3 steps, checkpoint" 1 "$tmp/first3" train.steps=3 train.val_every=0 checkpoint.dir="$tmp/ck" checkpoint.interval=3
train_log "resume to 6" 1 "$tmp/resumed" train.steps=6 train.val_every=0 checkpoint.dir="$tmp/ck" checkpoint.resume=auto
[ "$(grep ' train ' "$tmp/resumed")" = "$(grep ' train ' "$tmp/straight" | tail -n 6)" ] && [ "$(grep -c ' train ' "$tmp/resumed")" -eq 6 ] \
  && ok "order: resumed run trains on the straight run's sequences of steps 4-6" || bad "order: resumed run trains on the straight run's sequences" "$(train_seqs "$tmp/resumed" | tr '\n' ' ')"

# the default shards (make data): the header is llm.c's and the text is English
for f in data/train_000.bin data/val_000.bin; do
  [ -f "$f" ] || continue
  n=$(header "$f" | cut -d' ' -f3)
  if [ "$(header "$f" | cut -d' ' -f1,2)" = "20240520 1" ] && [ "$(stat -c %s "$f")" -eq $((1024 + 2 * n)) ]; then ok "default shard $f"
  else bad "default shard $f" "header $(header "$f"), $(stat -c %s "$f") bytes"; fi
done

e2e_finish
