#!/bin/bash
# perf/studies/run.sh BUILD_DIR [STUDY...]: runs the studies (`make studies`): each
# perf/studies/<study>.py (default: all of them) runs benchmarks or bin/ftllm and writes
# <study>.csv and <study>.png into $STUDIES_OUT (default build/studies, git-ignored).
# STUDIES_QUICK=1: tiny sizes, seconds per study (what tests/e2e/studies.sh runs); the default
# full mode takes 10-20 minutes on 2 shared cores. Needs Debian's python3-matplotlib
# (scripts/install-deps).
# Exits 1 if any study failed (each failure is one line naming the study and the command).
set -u
build=${1:?usage: perf/studies/run.sh BUILD_DIR [STUDY...]}
shift
export FTLLM_BUILD=$build FTLLM=${FTLLM:-bin/ftllm} STUDIES_OUT=${STUDIES_OUT:-build/studies}
export STUDIES_QUICK=${STUDIES_QUICK:-0} PYTHONDONTWRITEBYTECODE=1
py=${STUDIES_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import matplotlib' 2>/dev/null; then
  echo "studies: $py cannot import matplotlib;" \
    "HINT: apt-get install python3-matplotlib (make deps)" >&2
  exit 2
fi
if [ $# -eq 0 ]; then
  for f in perf/studies/*.py; do
    b=$(basename "$f" .py)
    [ "$b" = studylib ] || set -- "$@" "$b"
  done
fi
mkdir -p "$STUDIES_OUT"
status=0
for s in "$@"; do
  if [ ! -f "perf/studies/$s.py" ]; then
    echo "studies: no study perf/studies/$s.py" >&2; status=1; continue
  fi
  echo "== $s$([ "$STUDIES_QUICK" != 0 ] && echo ' (quick)')"
  t0=$SECONDS
  "$py" "perf/studies/$s.py" || { echo "studies: $s failed" >&2; status=1; }
  echo "   ($((SECONDS - t0)) s)"
done
exit $status
