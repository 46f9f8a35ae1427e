#!/bin/bash
# e2e/cli.sh: the command line as a user meets it. Every bad deck in tests/e2e/bad_decks/ must
# give exactly one line on stderr that contains its "; expect:" text, exit code 2, and no crash,
# with the normal binary ($FTLLM) and the address-sanitizer build ($FTLLM_SAN, when given).
# A bad deck's header may also carry "; args: OVERRIDES" and "; np: RANKS".
set -u
source "$(dirname "$0")/lib.bash"
for bin in "${e2e_bins[@]}"; do
  tag=$(e2e_tag "$bin")
  for deck in tests/e2e/bad_decks/*.ini; do
    want=$(sed -n 's/^; expect: //p' "$deck" | head -1)
    args=$(sed -n 's/^; args: //p' "$deck" | head -1)
    np=$(sed -n 's/^; np: //p' "$deck" | head -1)
    # shellcheck disable=SC2086
    run "$tag bad deck $(basename "$deck")" 2 "$deck:$want" "${np:-1}" "$bin" train "$deck" $args
  done
  run "$tag missing deck" 2 "nope.ini: cannot open the deck: No such file or directory" 1 "$bin" train nope.ini
  run "$tag deck is a directory" 2 "inputs: " 1 "$bin" train inputs
  run "$tag train without deck" 2 "usage: ftllm train DECK" 1 "$bin" train
  run "$tag train override first" 2 "usage: ftllm train DECK" 1 "$bin" train model.layers=2
  run "$tag bad override" 2 "command line override 1 'model.layers=two': model.layers: expected an integer" 1 "$bin" train inputs/default.ini model.layers=two
  run "$tag layout vs ranks" 2 "but the job has 1" 1 "$bin" train inputs/default.ini parallel.dp=2
  run "$tag layout vs ranks np2" 2 "but the job has 2" 2 "$bin" train inputs/default.ini
  run "$tag unknown verb" 2 "unknown verb 'trian' (did you mean 'train'?)" 1 "$bin" trian
  run "$tag no verb" 2 "" 1 "$bin"
  run "$tag plan without deck" 2 "usage: ftllm plan DECK" 1 "$bin" plan
  # every verb that reads a deck wants it first: an override or an option in its place is a
  # usage error, not a deck file named "model.layers=2" (random mutant R02 of seed 11)
  for v in train plan "plan --predict" optimize simulate; do
    for a in model.layers=2 --nope; do
      # shellcheck disable=SC2086
      run "$tag $v $a instead of a deck" 2 "usage: ftllm $v DECK" 1 "$bin" $v $a
    done
  done
  run "$tag --version" 0 "" 1 "$bin" --version
  echo "$LAST_OUT" | grep -q '^ftllm [0-9]' && ok "$tag version text" || bad "$tag version text" "$LAST_OUT"
  run "$tag --help" 0 "" 1 "$bin" --help
  echo "$LAST_OUT" | grep -q 'usage: mpiexec' && ok "$tag help text" || bad "$tag help text" "$LAST_OUT"
  run "$tag help bad topic" 2 "no such topic 'nope'" 1 "$bin" help nope
  run "$tag help deck: extra argument" 2 "ftllm help deck: unexpected argument (only --markdown is accepted)" 1 "$bin" help deck --markdown extra
  for v in train inspect tokenize; do # the verbs of the table, first and last included
    run "$tag help $v" 0 "" 1 "$bin" help "$v"
    has "$tag help $v: its usage" "^usage: ftllm $v "
  done
  # "did you mean": a shared prefix of 3 letters, or the same letters in another order; not
  # any word of a verb's length
  run "$tag unknown verb, prefix" 2 "unknown verb 'sim' (did you mean 'simulate'?)" 1 "$bin" sim
  run "$tag unknown verb, no likeness" 2 "unknown verb 'zzzzz'; see ftllm --help" 1 "$bin" zzzzz
  run "$tag default deck" 0 "" 1 "$bin" train inputs/default.ini
  echo "$LAST_OUT" | grep -q 'verdict: OK' && ok "$tag default deck verdict" || bad "$tag default deck verdict" "$LAST_OUT"
  run "$tag default deck on 2 ranks" 0 "" 2 "$bin" train inputs/default.ini parallel.dp=2 checkpoint.dir="$E2E_TMP/echo"
  # the echo (the keys that differ from the defaults) is itself a deck that, with the defaults,
  # resolves to every value of the run (the full resolved deck it wrote beside its outputs) and
  # trains the same losses
  echo "$LAST_OUT" | sed -n '/^; resolved configuration of .*: the keys that differ from the defaults$/,/^; end of the keys that differ/p' > "$E2E_TMP/echo.ini"
  grep -q '^dp = 2 ' "$E2E_TMP/echo.ini" && ! grep -q '^heads = ' "$E2E_TMP/echo.ini" && ok "$tag echo: only the changed keys" \
    || bad "$tag echo: only the changed keys" "$(cat "$E2E_TMP/echo.ini")"
  has "$tag echo: says where the full deck is" "^deck: every key of the resolved configuration is in $E2E_TMP/echo/default.deck.ini$"
  losses() { grep -E '^step +[0-9]+/' "$E2E_TMP/out" | sed -n 's/.*| loss \([0-9.]*\) |.*/\1/p' | tr '\n' ' '; }
  values() { sed -e '/^; resolved/d' -e 's/ *;.*//' "$1"; }
  l1=$(losses) && values "$E2E_TMP/echo/default.deck.ini" > "$E2E_TMP/full1"
  run "$tag echo reparses" 0 "" 2 "$bin" train "$E2E_TMP/echo.ini"
  values "$E2E_TMP/echo/default.deck.ini" > "$E2E_TMP/full2"
  if [ -s "$E2E_TMP/full1" ] && cmp -s "$E2E_TMP/full1" "$E2E_TMP/full2"; then ok "$tag echo + defaults = the run's resolved deck"
  else bad "$tag echo + defaults = the run's resolved deck" "$(diff "$E2E_TMP/full1" "$E2E_TMP/full2" | head -5)"; fi
  [ -n "$l1" ] && [ "$(losses)" = "$l1" ] && ok "$tag echo: the same losses" || bad "$tag echo: the same losses" "'$l1' vs '$(losses)'"
  # at log_level = debug the echo is every key
  run "$tag debug echo" 0 "" 1 "$bin" train inputs/default.ini train.steps=2 train.sample_tokens=0 train.val_batches=0 run.log_level=debug checkpoint.dir="$E2E_TMP/echo"
  has "$tag debug echo: every key" '^top_k = 1 +; default$'
  has "$tag debug echo: every section" '^\[cluster\]$'
  for d in inputs/*.ini; do
    # a deck made for several ranks says so ("; np: N"; inputs/system.ini, whose spares and
    # fault schedule need its layout) and is checked by its own e2e script (spare.sh)
    grep -q '^; np: ' "$d" && continue
    # a deck made for another verb says so in its header: "; verb: plan --predict"
    verb=$(sed -n 's/^; verb: //p' "$d" | head -1)
    if [ -n "$verb" ]; then
      # shellcheck disable=SC2086
      run "$tag example deck $d" 0 "" 1 "$bin" $verb "$d"
      continue
    fi
    run "$tag example deck $d" 0 "" 1 "$bin" train "$d" parallel.dp=1 parallel.tp=1 parallel.pp=1 parallel.ep=1
  done
done

# the deck documentation is generated from the key table and must be current
if "$FTLLM" help deck --markdown | cmp -s - inputs/README.md; then ok "inputs/README.md is current"
else bad "inputs/README.md is current" "run 'make inputs-doc' and commit it"; fi

e2e_finish
