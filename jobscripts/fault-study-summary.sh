#!/bin/bash
# fault-study-summary.sh STUDY: tabulates a fault study (jobscripts/fault-study.sbatch): the
# `faults:` line, verdict and exit code of each STUDY/seed-*.out, then the totals, and writes the
# table to STUDY/summary.csv. Run it by hand or as a job after the array:
#   sbatch --dependency=afterany:ARRAY_ID jobscripts/fault-study-summary.sh fault-study-ARRAY_ID
# Exit code 0 when every run reported its `faults:` line, 1 when one did not (it crashed or
# is still running: its row says so), 2 for a bad argument.
#SBATCH --job-name=ftllm-faults-summary
#SBATCH --ntasks=1
#SBATCH --time=00:05:00
#SBATCH --output=fault-study-summary-%j.out
set -uo pipefail
cd "${SLURM_SUBMIT_DIR:-.}" || exit 2
study=${1:-}
if [ -z "$study" ] || [ ! -d "$study" ]; then
  echo "fault-study-summary.sh: '${study}' is not a folder (expected a fault study's folder, e.g. fault-study-123)" >&2
  exit 2
fi
shopt -s nullglob
outs=("$study"/seed-*.out)
if [ ${#outs[@]} -eq 0 ]; then
  echo "fault-study-summary.sh: $study: no seed-*.out files (expected the outputs of fault-study.sbatch)" >&2
  exit 2
fi
# one row per run: seed exit injected detected rolled_back missed not_applied verdict
rows=$(for f in "${outs[@]}"; do
  seed=$(basename "$f" .out); seed=${seed#seed-}
  awk -v seed="$seed" '
    /^job: ftllm exit code / { rc = $5 }
    /^faults: sdc injected / {
      line = $0; got = 1
      gsub(/[,;()]/, " ", line); n = split(line, w, " ")
      for (i = 1; i < n; i++) {
        if (w[i] == "injected") inj = w[i + 1]
        if (w[i] == "detected") det = w[i + 1]
        if (w[i] == "back") rb = w[i + 1]
        if (w[i] == "missed") mis = w[i + 1]
        if (w[i] == "flips" && w[i + 1] == "not") na = w[i - 1]
      }
    }
    /^verdict: / { v = $2 }
    END {
      if (!got) { inj = det = rb = mis = na = "-" }
      printf "%s,%s,%s,%s,%s,%s,%s,%s\n", seed, rc == "" ? "-" : rc, inj, det, rb, mis,
             na == "" ? 0 : na, v == "" ? "none" : v
    }' "$f"
done | sort -t, -k1,1n)
{
  echo "seed,exit,injected,detected,rolled_back,missed,not_applied,verdict"
  echo "$rows"
} > "$study/summary.csv"
echo "fault study $study: ${#outs[@]} run(s) (table in $study/summary.csv)"
printf '%6s %5s %9s %9s %12s %7s %12s  %s\n' seed exit injected detected "rolled back" missed \
  "not applied" verdict
echo "$rows" | awk -F, '{ printf "%6s %5s %9s %9s %12s %7s %12s  %s\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
echo "$rows" | awk -F, '
  $3 == "-" { lost++; next }
  { runs++; inj += $3; det += $4; rb += $5; mis += $6; if ($2 == 0) ok++ }
  END {
    printf "total: %d run(s) reported (%d exit 0, %d without a faults: line), injected %d, " \
           "detected %d, rolled back %d, missed %d", runs, ok, lost, inj, det, rb, mis
    if (inj > 0) printf "; detected %.1f%%", 100 * det / inj
    printf "\n"
    exit lost > 0
  }'
