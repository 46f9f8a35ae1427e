# shellcheck shell=bash
# jobscripts/job-env.sh: what every ftllm jobscript prints before it runs (sourced by them from
# $SLURM_SUBMIT_DIR, the repository root they are submitted from), so a job's output file says
# what ran where: the git revision of the checkout, the binary's version, the job's nodes and
# Slurm variables, the loaded environment modules (if the site has any), the MPI library and
# the OpenMP settings. The resolved deck follows from ftllm's own startup echo (the keys that
# differ from the defaults; every key in <checkpoint.dir>/<run.name>.deck.ini). It runs under the
# jobscripts' `set -euo pipefail`: nothing it prints may end the job.
#   job_env_print [TITLE]   the block above, each line starting with "job: "
#   job_need_deck USAGE ARGS...
#                           exits 2 with one line unless ARGS start with a deck file that exists
#   job_need_int NAME VALUE exits 2 with one line unless VALUE is a whole number >= 0
#   job_srun_mpi            the srun MPI plugin: $FTLLM_SRUN_MPI, else pmi2 (MPICH, as Debian
#                           builds it, speaks PMI-1/PMI-2, which Slurm's mpi/pmi2 serves; an MPICH
#                           or Open MPI built against PMIx wants FTLLM_SRUN_MPI=pmix)
job_env_print() {
  local root=${SLURM_SUBMIT_DIR:-$PWD} rev dirty mods mpi
  echo "job: ${1:-ftllm} $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  rev=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo "unknown (not a git checkout)")
  dirty=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | head -1 || true)
  echo "job: git $rev${dirty:+ (with uncommitted changes)} in $root"
  echo "job: binary $root/bin/ftllm: $("$root/bin/ftllm" --version 2>&1 | head -1)"
  echo "job: id ${SLURM_JOB_ID:-none}${SLURM_ARRAY_TASK_ID:+ (array ${SLURM_ARRAY_JOB_ID} task $SLURM_ARRAY_TASK_ID)}," \
       "attempt $(( ${SLURM_RESTART_COUNT:-0} + 1 )), ${SLURM_NTASKS:-?} tasks on ${SLURM_JOB_NUM_NODES:-?} node(s)"
  echo "job: hosts $( (scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null || hostname) | tr '\n' ' ')(batch host $(hostname))"
  if command -v module > /dev/null 2>&1 || declare -F module > /dev/null; then
    mods=$(module -t list 2>&1 | grep -v ':$' | tr '\n' ' ' || true)
  fi
  echo "job: modules ${mods:-none loaded (or no environment modules here)}"
  mpi=$(mpichversion 2>/dev/null | sed -n "s/^MPICH Version:[[:space:]]*//p" | head -1 || true)
  if [ -n "$mpi" ]; then mpi="MPICH $mpi"
  elif command -v mpirun > /dev/null; then mpi=$(mpirun --version 2>&1 | head -1 || true); fi
  echo "job: mpi ${mpi:-unknown}; srun --mpi=$(job_srun_mpi)"
  echo "job: threads OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} OMP_PROC_BIND=${OMP_PROC_BIND:-unset} OMP_PLACES=${OMP_PLACES:-unset}"
  env | grep -E '^(SLURM|CUDA_VISIBLE|FTLLM)_' | sort | sed 's/^/job: env /' || true
}

job_srun_mpi() { echo "${FTLLM_SRUN_MPI:-pmi2}"; }

job_need_deck() {
  local usage=$1 name; shift
  name=$(grep -o 'jobscripts/[^ ]*' <<< "$usage")
  if [ $# -lt 1 ] || [ -z "$1" ]; then echo "usage: $usage" >&2; exit 2; fi
  if [ ! -f "$1" ]; then echo "${name#jobscripts/}: deck '$1' not found (from $PWD)" >&2; exit 2; fi
}

job_need_int() {
  case $2 in
    '' | *[!0-9]*) echo "$1 = '$2': expected a whole number >= 0" >&2; exit 2 ;;
  esac
}
