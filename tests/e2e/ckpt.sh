#!/bin/bash
# e2e/ckpt.sh: checkpoints as a user and a crash meet them, through bin/ftllm.
#  - synthetic checkpoints (ftllm inspect --write-test, sync and async, 1 and 2 ranks) inspect OK;
#  - a write killed with SIGKILL half-way (1 rank and 2 ranks) leaves the previous checkpoint
#    usable: `ftllm inspect DIR` (what a resume picks) finds it and reports the leftover
#    temporary, and the next write removes the temporary;
#  - flipped bytes, a truncated file and a file of another format each give a one-line error
#    naming the file (and the dataset), exit code 2, and the folder falls back to the previous one;
#  - a changed first or last element of a tensor (found in the file with h5dump) is refused;
#  - a folder with checkpoints of two runs: the runs named, --run picks one, its misuses refused;
#  - the testing aid's command line (STEP, --mb, --keep, --delay-ms, unknown arguments) refused in
#    one line each, nothing written.
set -u
source "$(dirname "$0")/lib.bash"
D=$E2E_TMP
has() { # has NAME TEXT: the last stdout contains TEXT
  if grep -qF -- "$2" <<< "$LAST_OUT"; then ok "$1"; else bad "$1" "stdout lacks '$2': $(head -c 600 <<< "$LAST_OUT")"; fi
}
hasre() { # hasre NAME REGEX: the last stdout matches the extended regular expression
  if grep -qE -- "$2" <<< "$LAST_OUT"; then ok "$1"; else bad "$1" "stdout lacks /$2/: $(head -c 600 <<< "$LAST_OUT")"; fi
}
name() { printf '%s/%s.step-%08d.h5' "$1" "$2" "$3"; }

# flip BYTE OFFSET of FILE (xor 0x10)
flip() {
  local b; b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "\\$(printf %03o $((b ^ 16)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# h5_span FILE DATASET: "OFFSET SIZE" of a contiguous dataset's data in the file (h5dump -p)
h5_span() { h5dump -p -H -d "$2" "$1" | awk '$1 == "OFFSET" {o = $2} $1 == "SIZE" {s = $2} END {print o, s}'; }

# kill_write TAG NP STEP DIR: starts a slow write and SIGKILLs its ranks once the temporary exists
kill_write() {
  local tag=$1 np=$2 step=$3 dir=$4 tmp
  tmp="$(name "$dir" run "$step").tmp"
  if [ "$np" -eq 1 ]; then # a singleton MPI process: its pid is ours
    "$FTLLM" inspect --write-test "$dir" "$step" --run run --mb 4 --delay-ms 300 > /dev/null 2>&1 &
  else
    mpiexec -n "$np" "$FTLLM" inspect --write-test "$dir" "$step" --run run --mb 4 --delay-ms 300 > /dev/null 2>&1 &
  fi
  local launcher=$! i
  for i in $(seq 1 200); do [ -e "$tmp" ] && break; sleep 0.1; done
  sleep 0.7 # some datasets written, not all
  if [ ! -e "$tmp" ]; then bad "$tag kill: temporary appeared" "$tmp missing"; kill -9 "$launcher"; return; fi
  # the ranks are the processes whose command line names this unique folder
  local pids; pids=$(pgrep -f -- "--write-test $dir $step")
  kill -9 $pids 2> /dev/null
  wait "$launcher" 2> /dev/null
  [ -e "$tmp" ] && ok "$tag kill: temporary left behind" || bad "$tag kill: temporary left behind" "$tmp missing"
  [ -e "$(name "$dir" run "$step")" ] && bad "$tag kill: no final file" "$(name "$dir" run "$step") exists" || ok "$tag kill: no final file"
}

bins=("$FTLLM")
[ -n "${FTLLM_SAN:-}" ] && [ -x "$FTLLM_SAN" ] && bins+=("$FTLLM_SAN")
for bin in "${bins[@]}"; do
  tag=$(basename "$(dirname "$bin")")
  d="$D/$tag"
  run "$tag write step 1 (np 2)" 0 "" 2 "$bin" inspect --write-test "$d" 1 --run run --mb 1
  run "$tag write step 2 async (np 2)" 0 "" 2 "$bin" inspect --write-test "$d" 2 --run run --mb 1 --async
  run "$tag inspect file (np 1)" 0 "" 1 "$bin" inspect "$(name "$d" run 2)"
  hasre "$tag inspect table" "params/w7 +f32 +\[[0-9]+, 1024\] +1 +OK"
  hasre "$tag inspect table: scalar" "state/step +i64 +\[\] +steps +OK"
  # 8 tensors of 31 x 1024 f32 (1 MB over 8 parts, rounded up to whole rows) are 1.0 MB
  has "$tag inspect verdict" "verdict: checkpoint OK (10 datasets, 1.0 MB, every checksum verified)"
  has "$tag inspect config" "; synthetic checkpoint written by ftllm inspect --write-test"
  chars=$(printf '; synthetic checkpoint written by ftllm inspect --write-test\n' | wc -c)
  hasre "$tag inspect table: text" "config/resolved +text +$chars chars +OK"
  run "$tag inspect folder (np 2)" 0 "" 2 "$bin" inspect "$d"
  has "$tag folder picks the newest" "step 2"
done

# SIGKILL in the middle of a write, on 1 and on 2 ranks
d="$D/kill"
run "write step 1" 0 "" 2 "$FTLLM" inspect --write-test "$d" 1 --run run --mb 4
for np in 1 2; do
  step=$((np + 1))
  kill_write "np $np" "$np" "$step" "$d"
  run "np $np resume picks the previous checkpoint" 0 "ignoring $(name "$d" run "$step").tmp, left by an interrupted write" 2 "$FTLLM" inspect "$d"
  has "np $np resume picks step 1" "$(name "$d" run 1) (step 1)"
done
run "next write after the kills" 0 "removing $(name "$d" run 3).tmp" 2 "$FTLLM" inspect --write-test "$d" 4 --run run --mb 1 --keep 2
[ ! -e "$(name "$d" run 2).tmp" ] && [ ! -e "$(name "$d" run 3).tmp" ] && ok "temporaries removed" || bad "temporaries removed" "$(ls "$d")"

# bad files: each its own message, and the folder falls back
d="$D/bad"
for s in 1 2 3 4; do run "write step $s" 0 "" 1 "$FTLLM" inspect --write-test "$d" "$s" --run run --mb 1 --keep 10; done
f4=$(name "$d" run 4) f3=$(name "$d" run 3) f2=$(name "$d" run 2)
flip "$f4" $(($(stat -c %s "$f4") / 2))
run "flipped byte" 2 "$f4: dataset 'params/w" 2 "$FTLLM" inspect "$f4"
grep -qF "checksum mismatch" <<< "$LAST_ERR" && ok "flipped byte: checksum mismatch" || bad "flipped byte: checksum mismatch" "$LAST_ERR"
has "flipped byte: table marks it" "BAD"
truncate -s $(($(stat -c %s "$f3") / 3)) "$f3"
run "truncated file" 2 "$f3: truncated or damaged HDF5 file" 1 "$FTLLM" inspect "$f3"
echo "step,loss" > "$f2"
run "another format" 2 "$f2: not an HDF5 file" 1 "$FTLLM" inspect "$f2"
run "folder falls back to step 1" 0 "skipping $f4: dataset 'params/w" 2 "$FTLLM" inspect "$d"
has "folder falls back to step 1" "$(name "$d" run 1) (step 1)"
# the first and the last element of a tensor (the last written by rank 1's slab): a flipped bit
# in the first byte of the first element, or in the last byte (sign and exponent) of the last
d="$D/ends"
run "ends: write (np 2)" 0 "" 2 "$FTLLM" inspect --write-test "$d" 1 --run run --mb 1
f=$(name "$d" run 1)
read -r off size <<< "$(h5_span "$f" params/w7)"
if [ -n "$off" ] && [ -n "$size" ] && [ "$size" -gt 0 ]; then ok "ends: params/w7 found in the file"
else bad "ends: params/w7 found in the file" "h5dump gave offset '$off', size '$size'"; fi
for at in first last; do
  cp "$f" "$d/$at.h5"
  [ $at = first ] && flip "$d/$at.h5" "$off" || flip "$d/$at.h5" $((off + size - 1))
  run "ends: $at element changed" 2 "$d/$at.h5: dataset 'params/w7': checksum mismatch" 1 "$FTLLM" inspect "$d/$at.h5"
done
run "ends: the unchanged file verifies" 0 "" 1 "$FTLLM" inspect "$f"

run "missing file" 2 "nope.h5: cannot open the checkpoint: No such file or directory" 1 "$FTLLM" inspect "$D/nope.h5"
run "inspect without file" 2 "usage: ftllm inspect FILE | DIR" 1 "$FTLLM" inspect
run "empty folder" 2 "no checkpoint files in this folder" 1 "$FTLLM" inspect "$D/kill/.."
run "empty folder (np 2)" 2 "no checkpoint files in this folder" 2 "$FTLLM" inspect "$D/kill/.."

# a folder with two runs: inspect names each run once and asks for one; --run picks that run's
# newest; a run that is not there, --run without a name and --run with a file are errors
d="$D/runs"
for rs in a:1 b:1 a:2 b:3; do
  run "two runs: write ${rs%:*} step ${rs#*:}" 0 "" 1 "$FTLLM" inspect --write-test "$d" "${rs#*:}" --run "${rs%:*}" --mb 1 --keep 10
done
run "two runs: the folder alone" 2 "$d: checkpoints of several runs (" 1 "$FTLLM" inspect "$d"
grep -qF "choose one with --run NAME" <<< "$LAST_ERR" && [ "$(grep -o "'a'" <<< "$LAST_ERR" | wc -l)" -eq 1 ] \
  && [ "$(grep -o "'b'" <<< "$LAST_ERR" | wc -l)" -eq 1 ] && ok "two runs: each named once" || bad "two runs: each named once" "$LAST_ERR"
run "two runs: --run a (np 2)" 0 "" 2 "$FTLLM" inspect "$d" --run a
has "two runs: run a's newest" "run a, step 2,"
run "two runs: --run b" 0 "" 1 "$FTLLM" inspect "$d" --run b
has "two runs: run b's newest" "run b, step 3,"
run "two runs: --run of no run" 2 "$d: no checkpoint of run 'nope'" 1 "$FTLLM" inspect "$d" --run nope
run "--run without a name" 2 "usage: ftllm inspect FILE | DIR [--run NAME]" 1 "$FTLLM" inspect "$d" --run
run "--run with a file" 2 "ftllm inspect: --run applies to a folder, not to a file" 1 "$FTLLM" inspect "$(name "$d" a 2)" --run a

# the testing aid's own command line: every misuse refused in one line, nothing written
d="$D/aid"
W="ftllm inspect --write-test"
while IFS='|' read -r -u 3 args want; do # fd 3: mpiexec reads stdin
  # shellcheck disable=SC2086
  run "$W $args refused" 2 "$W: $want" 2 "$FTLLM" inspect --write-test "$d" $args
done 3<<'CASES'
x|STEP 'x': expected an integer >= 0
-1|STEP '-1': expected an integer >= 0
1 --bogus|unknown argument '--bogus'
1 --bogus 5|unknown argument '--bogus'
1 --mb 1 --keep|--keep needs a value
1 --keep 0|--keep '0': expected an integer in [1, 1000000]
1 --mb -3|--mb '-3': expected a number > 0
1 --mb 2x|--mb '2x': expected a number > 0
1 --delay-ms abc|--delay-ms 'abc': expected an integer in [0, 3600000]
CASES
[ ! -e "$d" ] || [ -z "$(ls -A "$d")" ] && ok "$W misuses: nothing written" ||
  bad "$W misuses: nothing written" "$(ls "$d")"

e2e_finish
