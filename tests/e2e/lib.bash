# tests/e2e/lib.bash: what every e2e script shares (source it first). Each script checks bin/ftllm
# as a user meets it and ends with e2e_finish, whose "[  PASSED  ] N test(s)." lines tests/run.sh
# counts.
#   FTLLM, FTLLM_SAN   the binary and (optional) a sanitizer build; e2e_bins lists those present
#   E2E_TMP            a scratch folder removed at exit
#   run NAME WANT_RC WANT_STDERR NP CMD...
#                      one check: CMD under `mpiexec -n NP` and timeout ($E2E_TIMEOUT s, default
#                      300) exits WANT_RC; when WANT_STDERR is given, stderr contains it, and
#                      for a failing exit (WANT_RC != 0) it is exactly one line (a user error is
#                      one line); never a sanitizer report. Leaves stdout and stderr in
#                      $LAST_OUT / $LAST_ERR and in the files $E2E_TMP/out, $E2E_TMP/err.
#   has NAME REGEX     the last run's stdout matches REGEX (grep -E)
#   ok NAME / bad NAME WHY   record a check done by hand
#   e2e_need_emu       the CUDA emulator's ftllm ($FTLLM_CUDA_EMU, from make test) in $emu, or
#                      the script ends here with SKIP
FTLLM=${FTLLM:-bin/ftllm}
pass=0 fail=0
E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ft_e2e_XXXXXX")
trap 'rm -rf "$E2E_TMP"' EXIT
e2e_bins=("$FTLLM")
[ -n "${FTLLM_SAN:-}" ] && [ -x "$FTLLM_SAN" ] && e2e_bins+=("$FTLLM_SAN")

ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

run() {
  local name=$1 want_rc=$2 want=$3 np=$4; shift 4
  local out=$E2E_TMP/out err=$E2E_TMP/err rc lines
  timeout "${E2E_TIMEOUT:-300}" mpiexec -n "$np" "$@" > "$out" 2> "$err"
  rc=$?
  lines=$(wc -l < "$err")
  LAST_OUT=$(tr -d '\0' < "$out") LAST_ERR=$(tr -d '\0' < "$err") # (Open MPI's help boxes can hold NULs)
  if [ "$rc" -ne "$want_rc" ]; then bad "$name" "exit code $rc, want $want_rc; stderr: $(head -c 600 "$err")"
  elif [ -n "$want" ] && ! grep -qF -- "$want" "$err"; then bad "$name" "stderr lacks '$want': $(head -c 600 "$err")"
  elif [ -n "$want" ] && [ "$want_rc" -ne 0 ] && [ "$lines" -ne 1 ]; then bad "$name" "stderr has $lines lines, want 1: $(head -c 600 "$err")"
  elif grep -q 'Sanitizer\|runtime error' "$err"; then bad "$name" "sanitizer report: $(head -c 600 "$err")"
  else ok "$name"; fi
}

has() {
  if grep -qE -- "$2" "$E2E_TMP/out"; then ok "$1"; else bad "$1" "no '$2' in: $(head -c 600 "$E2E_TMP/out")"; fi
}

# the name of a binary's build variant, to label checks ("release", "san-address")
e2e_tag() { basename "$(dirname "$1")"; }

e2e_finish() {
  echo "[  PASSED  ] $pass test(s)."
  [ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s), listed above."
  [ "$fail" -eq 0 ]
}

# e2e_need_openmpi NAME: the Open MPI (ULFM) build: OMPI (its prefix) and FTLLM (its binary)
# set, OPAL_PREFIX, mpirun as root and the sanitizer build's leak suppressions exported; where
# it is not there, e2e/NAME skips with one line saying why
e2e_need_openmpi() {
  OMPI=${FTLLM_OPENMPI_DIR:-$PWD/.deps/openmpi}
  FTLLM=${FTLLM_OPENMPI:-build/openmpi/ftllm}
  if [ ! -x "$OMPI/bin/mpirun" ] || [ ! -x "$FTLLM" ]; then
    echo "SKIP e2e/$1: no Open MPI build ($OMPI/bin/mpirun, $FTLLM): make MPI=openmpi deps && make MPI=openmpi"
    echo "[  SKIPPED ] 1 test(s)."
    e2e_finish
    exit
  fi
  export OPAL_PREFIX=$OMPI OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export LSAN_OPTIONS=suppressions=$PWD/tests/e2e/openmpi.lsan.supp:print_suppressions=0
}

e2e_need_emu() {
  emu=${FTLLM_CUDA_EMU:-}
  [ -n "$emu" ] && [ -x "$emu" ] && return
  echo "SKIP: no CUDA emulator build (FTLLM_CUDA_EMU is empty: run outside make test?)"
  e2e_finish
  exit
}
