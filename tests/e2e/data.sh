#!/bin/bash
# e2e/data.sh: `ftllm tokenize` as a user meets it, with the normal binary ($FTLLM) and the
# address-sanitizer build ($FTLLM_SAN, when given): the shard it writes is exactly llm.c's
# format (header bytes, one uint16 token per input byte), the --val split shares no byte and
# loses none, and every bad input is one line on stderr with exit code 2. Also checks the
# default shards that `make data` built, when present.
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
  run "$tag fraction without val" 2 "--val and --val-fraction go together" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" --val-fraction 0.1
  run "$tag val without value" 2 "--val needs a value" 1 "$bin" tokenize "$tmp/in.txt" "$tmp/x.bin" --val
  printf 'one line only' > "$tmp/oneline.txt"
  run "$tag split impossible" 2 "leaves" 1 "$bin" tokenize "$tmp/oneline.txt" "$tmp/x.bin" --val "$tmp/v.bin" --val-fraction 0.5
  [ -e "$tmp/x.bin" ] && bad "$tag no output after errors" "x.bin exists" || ok "$tag no output after errors"
done

# the default shards (make data): the header is llm.c's and the text is English
for f in data/train_000.bin data/val_000.bin; do
  [ -f "$f" ] || continue
  n=$(header "$f" | cut -d' ' -f3)
  if [ "$(header "$f" | cut -d' ' -f1,2)" = "20240520 1" ] && [ "$(stat -c %s "$f")" -eq $((1024 + 2 * n)) ]; then ok "default shard $f"
  else bad "default shard $f" "header $(header "$f"), $(stat -c %s "$f") bytes"; fi
done

e2e_finish
