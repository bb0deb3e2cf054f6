# shellcheck shell=bash
# The one place that calls sbatch: the experiments (submit.sh), the --setup-venv job
# (venv.sh) and the node cleanup (plai_cleanups/submit_cleanup.sh) all go through
# hpc_sbatch, which runs `sbatch --parsable`, checks that it printed a job id and notes the
# job for the submissions ledger (ledger.sh); `sbatch --version` is asked here too. No
# other file runs the sbatch command. Every call runs without an enclosing job's Slurm
# variables (hpc_forget_enclosing_job, hpc_lib.sh).

HPC_LEDGER_PENDING="" # the ledger lines of this submission, written by hpc_ledger_flush

# hpc_sbatch_version_start: run `sbatch --version` in the background now (loading Slurm's
# library takes a few ms, done while the submission reads its configs); its answer waits
# in a pipe for hpc_sbatch_version_to. Nothing when sbatch is missing or already asked.
hpc_sbatch_version_start() {
  [[ -z ${HPC_SBATCH_VERSION_FD:-} ]] && command -v sbatch >/dev/null || return 0
  exec {HPC_SBATCH_VERSION_FD}< <(
    hpc_forget_enclosing_job
    sbatch --version 2>&1
    printf '\n%d\n' "$?"
  )
}

# hpc_sbatch_version_to VAR: what `sbatch --version` prints (cluster.sh reads the version
# from it), from hpc_sbatch_version_start's pipe when it was started; returns its exit
# status.
hpc_sbatch_version_to() {
  local -n _said=$1
  if [[ -n ${HPC_SBATCH_VERSION_FD:-} ]]; then
    local text="" rc
    IFS= read -r -d '' -u "$HPC_SBATCH_VERSION_FD" text || true
    exec {HPC_SBATCH_VERSION_FD}<&-
    HPC_SBATCH_VERSION_FD=""
    text=${text%$'\n'} rc=${text##*$'\n'} text=${text%$'\n'*}
    _said=${text%$'\n'}
    [[ $rc =~ ^[0-9]+$ ]] || rc=1
    return "$rc"
  fi
  _said=$(
    hpc_forget_enclosing_job
    sbatch --version 2>&1
  )
}

# hpc_sbatch_argv_to ARRAY ARG...: the exact command line hpc_sbatch runs for ARG...
# (what --dry-run prints).
hpc_sbatch_argv_to() {
  local -n _argv=$1
  _argv=(sbatch --parsable "${@:2}")
}

# hpc_sbatch ID_VAR [--ledger KIND NUM_TASKS SCRIPT TASK_OFFSET LOG] ARG...: run
# `sbatch --parsable ARG...` and put the job id in ID_VAR. With --ledger, the job's line
# joins HPC_LEDGER_PENDING (hpc_ledger_line_to's fields after the id). Returns 1 when sbatch
# failed or printed no job id, with HPC_SBATCH_SAID ("exit N, said: ...") for the caller's
# message: the caller removes what it wrote and cancels what went in before it dies.
hpc_sbatch() {
  local -n _job_id=$1
  shift
  local ledger=() out rc=0 argv line
  if [[ ${1:-} == --ledger ]]; then
    ledger=("${@:2:5}")
    shift 6
  fi
  hpc_sbatch_argv_to argv "$@"
  _job_id="" HPC_SBATCH_SAID=""
  # A job submitted from inside another (a line that submits follow-up work) is planned
  # and run as from a clean shell: nothing of the enclosing job's Slurm variables goes in.
  out=$(
    hpc_forget_enclosing_job
    "${argv[@]}"
  ) || rc=$?
  if ((rc != 0)) || [[ ! ${out%%;*} =~ ^[0-9]+$ ]]; then
    HPC_SBATCH_SAID="exit $rc${out:+, said: $out}"
    return 1
  fi
  _job_id=${out%%;*}
  if ((${#ledger[@]})); then
    hpc_ledger_line_to line "$_job_id" "${ledger[1]}" "${ledger[2]}" "${ledger[0]}" "${ledger[3]}" "${ledger[4]}"
    HPC_LEDGER_PENDING+=$line
  fi
}

# hpc_ledger_flush: the submission's ledger lines, in one write.
hpc_ledger_flush() {
  [[ -n $HPC_LEDGER_PENDING ]] || return 0
  hpc_ledger_append "$HPC_LEDGER_PENDING"
  HPC_LEDGER_PENDING=""
}
