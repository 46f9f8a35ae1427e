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
  run "$tag --version" 0 "" 1 "$bin" --version
  echo "$LAST_OUT" | grep -q '^ftllm [0-9]' && ok "$tag version text" || bad "$tag version text" "$LAST_OUT"
  run "$tag --help" 0 "" 1 "$bin" --help
  echo "$LAST_OUT" | grep -q 'usage: mpiexec' && ok "$tag help text" || bad "$tag help text" "$LAST_OUT"
  run "$tag help bad topic" 2 "no such topic 'nope'" 1 "$bin" help nope
  run "$tag default deck" 0 "" 1 "$bin" train inputs/default.ini
  echo "$LAST_OUT" | grep -q 'verdict: OK' && ok "$tag default deck verdict" || bad "$tag default deck verdict" "$LAST_OUT"
  run "$tag default deck on 2 ranks" 0 "" 2 "$bin" train inputs/default.ini parallel.dp=2
  # the echoed configuration is itself a valid deck that gives the same echo
  echo "$LAST_OUT" | sed -n '/^; resolved/,/^\[perf\]/p;/^papi_events/p' > "$E2E_TMP/echo.ini"
  run "$tag echo reparses" 0 "" 2 "$bin" train "$E2E_TMP/echo.ini"
  for d in inputs/*.ini; do
    run "$tag example deck $d" 0 "" 1 "$bin" train "$d" parallel.dp=1 parallel.tp=1 parallel.pp=1 parallel.ep=1
  done
done

# the deck documentation is generated from the key table and must be current
if "$FTLLM" help deck --markdown | cmp -s - inputs/README.md; then ok "inputs/README.md is current"
else bad "inputs/README.md is current" "run 'make inputs-doc' and commit it"; fi

e2e_finish
