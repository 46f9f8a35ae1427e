#!/bin/bash
# e2e/guide.sh: the user's guide cannot rot. Every command in a ```console block of
# docs/*.md and README.md (a line "$ CMD") is run, in order, in one scratch folder per page with
# bin/, inputs/, data/, jobscripts/ and scripts/ linked in; the lines under a command (up to the
# next "$ " line or the end of the block) must each appear in what it printed (stdout + stderr,
# fixed strings). A command exits 0 unless it ends with "# exit N". Commands starting "make"
# run at the repository root, and only when the build under test is the release one (else
# they would rebuild bin/ftllm in the middle of a sanitizer run). Skipped, each tested
# elsewhere: `make test` (this test's caller), `make studies` (tests/e2e/studies.sh runs it in
# quick mode), and commands that need a Slurm cluster (sbatch, srun, squeue, scontrol:
# tests/e2e/slurm.sh runs the job scripts under a real one-node Slurm), and the Open MPI (ULFM)
# build's commands (`make MPI=openmpi ...`, bin/ftllm-openmpi) where that MPI is not installed
# (make test goes on without it, and e2e/ulfm.sh skips too) or, in a run of another build than
# the release one, where bin/ftllm-openmpi was not built (and with them the rest of their
# console block, whose commands read what they would have made). .deps/ (that MPI) is linked
# in as well, and mpirun is allowed to run as root (the test machines' user).
# Also: the commands in the decks' header comments run (below), and every deck in inputs/ is
# named in the guide's tour. python3 is Debian's (/usr/bin first
# on PATH): the guide reads checkpoints with Debian's python3-h5py.
set -u
source "$(dirname "$0")/lib.bash"
root=$(pwd)
export PATH=/usr/bin:$PATH OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

run_page() { # run_page FILE
  local page=$1 dir n=0 in_block=0 line cmd="" want=() lineno=0 cmd_line=0 skip_rest=""
  dir=$(mktemp -d "$E2E_TMP/page_XXXX")
  for l in bin inputs data jobscripts scripts .deps; do
    [ -e "$root/$l" ] && ln -s "$root/$l" "$dir/$l"
  done
  flush() {
    [ -n "$cmd" ] || return 0
    local rc want_rc=0 out=$E2E_TMP/guide_out name w missing=""
    name="$(basename "$page"):$cmd_line: ${cmd:0:70}"
    [[ $cmd =~ \#\ exit\ ([0-9]+)$ ]] && want_rc=${BASH_REMATCH[1]}
    case $cmd in
      "make test"*) echo "SKIP $name (this test's caller)"; cmd=""; want=(); return 0 ;;
      "make studies"*) echo "SKIP $name (tests/e2e/studies.sh runs the studies in quick mode)"
        cmd=""; want=(); return 0 ;;
      sbatch*|srun*|squeue*|scontrol*) echo "SKIP $name (needs Slurm: tests/e2e/slurm.sh)"
        cmd=""; want=(); return 0 ;;
    esac
    if [ -n "$skip_rest" ]; then # the block's later commands read what a skipped one made
      echo "SKIP $name (after a skipped command: $skip_rest)"; cmd=""; want=(); return 0
    fi
    if [[ $cmd == *MPI=openmpi* || $cmd == *ftllm-openmpi* ]]; then
      if [ ! -x "$root/.deps/openmpi/bin/mpirun" ]; then
        skip_rest="Open MPI is not installed in .deps/: e2e/ulfm skips too"
      elif [[ $cmd != make* ]] && [ ! -x "$root/bin/ftllm-openmpi" ] \
        && [ "${FTLLM_BUILD:-build/release}" != build/release ]; then
        skip_rest="bin/ftllm-openmpi is not built: make MPI=openmpi"
      fi
      if [ -n "$skip_rest" ]; then
        echo "SKIP $name ($skip_rest)"; cmd=""; want=(); return 0
      fi
    fi
    if [[ $cmd == make* ]] && [ "${FTLLM_BUILD:-build/release}" != build/release ]; then
      echo "SKIP $name (make builds the release variant: run only when testing that one)"
      cmd=""; want=(); return 0
    fi
    if [[ $cmd == make* ]]; then
      (cd "$root" && timeout "${E2E_TIMEOUT:-300}" bash -c "$cmd") < /dev/null > "$out" 2>&1
    else
      (cd "$dir" && timeout "${E2E_TIMEOUT:-300}" bash -c "$cmd") < /dev/null > "$out" 2>&1
    fi
    rc=$?
    for w in "${want[@]}"; do grep -qF -- "$w" "$out" || missing+="'$w' "; done
    if [ "$rc" -ne "$want_rc" ]; then bad "$name" "exit code $rc, want $want_rc: $(tail -c 600 "$out")"
    elif [ -n "$missing" ]; then bad "$name" "output lacks $missing: $(tail -c 600 "$out")"
    elif grep -q 'Sanitizer\|runtime error' "$out"; then bad "$name" "sanitizer report"
    else ok "$name"; fi
    n=$((n + 1)); cmd=""; want=()
  }
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    if [ "$in_block" -eq 0 ]; then
      [[ $line == '```console' ]] && in_block=1 && skip_rest=""
      continue
    fi
    if [[ $line == '```' ]]; then flush; in_block=0; continue; fi
    if [[ $line == '$ '* ]]; then flush; cmd=${line:2}; cmd_line=$lineno
    elif [ -n "$cmd" ] && [ -n "$line" ]; then want+=("$line"); fi
  done < "$page"
  flush
  [ "$in_block" -eq 0 ] || bad "$(basename "$page")" "a console block is not closed"
  echo "$page: $n commands run"
}

for page in docs/*.md README.md; do
  [ -f "$page" ] && run_page "$page"
done

# The commands in the decks' header comments (";   [mpiexec -n N ]bin/ftllm ...", a line ending
# in "\" continued on the next) run too, in order, one scratch folder per deck, and exit 0.
# Left out: more than 4 ranks (layout-tp2-pp2-dp2.ini's 8: test_parallel runs that layout), and
# the full 600k-GPU simulation (over a minute on 2 cores; e2e/cluster.sh simulates that deck at
# smaller sizes).
slow="mpiexec -n 2 bin/ftllm simulate inputs/cluster-spare600k.ini"
for deck in inputs/*.ini; do
  dir=$(mktemp -d "$E2E_TMP/deck_XXXX")
  for l in bin inputs data; do ln -s "$root/$l" "$dir/$l"; done
  base=$(basename "$deck") cmd=""
  while IFS= read -r line; do
    [[ $line == ';'* ]] || break
    body=${line#;}
    if [ -n "$cmd" ]; then cmd+=" ${body#"${body%%[! ]*}"}"
    elif [[ $line =~ ^\;\ \ \ (mpiexec\ -n\ [0-9]+\ )?bin/ftllm\  ]]; then cmd=${body#   }
    else continue; fi
    [[ $cmd == *\\ ]] && { cmd=${cmd%\\}; continue; }
    np=1
    [[ $cmd =~ ^mpiexec\ -n\ ([0-9]+) ]] && np=${BASH_REMATCH[1]}
    name="$base header: ${cmd:0:70}"
    if [ "$np" -gt 4 ]; then echo "SKIP $name (needs $np ranks)"
    elif [[ $cmd == "$slow"* ]]; then echo "SKIP $name (the full 600k-GPU simulation)"
    elif (cd "$dir" && timeout "${E2E_TIMEOUT:-300}" bash -c "$cmd") < /dev/null \
      > "$E2E_TMP/deck_out" 2>&1; then ok "$name"
    else bad "$name" "exit code $?: $(tail -c 600 "$E2E_TMP/deck_out")"; fi
    cmd=""
  done < "$deck"
done

for deck in inputs/*.ini; do
  if grep -qF "\`$deck\`" docs/guide.md; then ok "guide tours $deck"
  else bad "guide tours $deck" "docs/guide.md's table of decks does not name it"; fi
done
e2e_finish
