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
  [[ -z ${HPC_SBATCH_VERSION_FD:-} && -z ${HPC_SBATCH_VERSION_RC:-} ]] && command -v sbatch >/dev/null || return 0
  exec {HPC_SBATCH_VERSION_FD}< <(
    hpc_forget_enclosing_job
    sbatch --version 2>&1
    printf '\n%d\n' "$?"
  )
}

# hpc_sbatch_version_to VAR: what `sbatch --version` prints (cluster.sh reads the version
# from it), asked once per submission: from hpc_sbatch_version_start's pipe when it was
# started, from the answers kept between submissions (cluster.sh), else now; returns its
# exit status. Kept in HPC_SBATCH_VERSION_SAID and HPC_SBATCH_VERSION_RC.
hpc_sbatch_version_to() {
  local -n _said=$1
  if [[ -z ${HPC_SBATCH_VERSION_RC:-} ]]; then
    local text="" rc=0
    if [[ -n ${HPC_SBATCH_VERSION_FD:-} ]]; then
      IFS= read -r -d '' -u "$HPC_SBATCH_VERSION_FD" text || true
      exec {HPC_SBATCH_VERSION_FD}<&-
      HPC_SBATCH_VERSION_FD=""
      text=${text%$'\n'} rc=${text##*$'\n'} text=${text%$'\n'*}
      [[ $rc =~ ^[0-9]+$ ]] || rc=1
    else
      text=$(
        hpc_forget_enclosing_job
        sbatch --version 2>&1
      ) || rc=$?
    fi
    HPC_SBATCH_VERSION_SAID=${text%$'\n'} HPC_SBATCH_VERSION_RC=$rc
  fi
  _said=$HPC_SBATCH_VERSION_SAID
  return "$HPC_SBATCH_VERSION_RC"
}

# hpc_sbatch_argv_to ARRAY ARG...: the exact command line hpc_sbatch runs for ARG...
# (what --dry-run prints).
hpc_sbatch_argv_to() {
  local -n _argv=$1
  _argv=(sbatch --parsable "${@:2}")
}

# hpc_sbatch_id_to VAR OUTPUT: the job id in sbatch's --parsable answer ("ID" or
# "ID;CLUSTER" on a line of its own), wherever it stands in OUTPUT: a site's sbatch wrapper
# may print notices before or after it. The last such line; "" when there is none.
hpc_sbatch_id_to() {
  local -n _sid=$1
  local _sid_line
  _sid=""
  while IFS= read -r _sid_line; do
    _sid_line=${_sid_line%$'\r'}
    [[ ! $_sid_line =~ ^([0-9]+)(;[A-Za-z0-9_.-]+)?[[:space:]]*$ ]] || _sid=${BASH_REMATCH[1]}
  done <<<"$2"
}

# hpc_sbatch_queued_to VAR SCRIPT: the id of this user's job that Slurm has queued (or
# running) for batch script SCRIPT, asked by its command (squeue %o; each submission's
# script has a name of its own). Returns 0 with the id, 1 when Slurm answered and has
# none, 2 when squeue could not be asked (VAR ""): then nobody knows.
hpc_sbatch_queued_to() {
  local -n _q=$1
  local out line user
  _q=""
  user=${USER:-$(id -un 2>/dev/null)}
  out=$(
    hpc_forget_enclosing_job
    squeue -h -u "$user" -o '%A %o' 2>/dev/null
  ) || return 2
  while IFS= read -r line; do
    [[ ${line#* } != "$2" || ! ${line%% *} =~ ^[0-9]+$ ]] || _q=${line%% *}
  done <<<"$out"
  [[ -n $_q ]]
}

# hpc_sbatch ID_VAR [--ledger KIND NUM_TASKS SCRIPT TASK_OFFSET LOG] ARG...: run
# `sbatch --parsable ARG...` and put the job id in ID_VAR (hpc_sbatch_id_to). With --ledger,
# the job's line joins HPC_LEDGER_PENDING (hpc_ledger_line_to's fields after the id).
# An id in the answer means the job is queued, whatever the exit status (a warning says so
# when it was not 0). When sbatch exited 0 but its answer holds no job id, it may still have
# queued the job (a wrapper's notices, a lost reply): for a batch SCRIPT of this
# submission's own, Slurm is asked (hpc_sbatch_queued_to) and a job it has for SCRIPT
# counts as submitted (a warning says so). Returns 1 when nothing was queued, 2 when no one can tell (squeue could not be
# asked): the caller may remove its files and cancel what went in before it dies only on
# 1; on 2 it keeps every file, since a queued job reads them. HPC_SBATCH_SAID ("exit N,
# said: ...") is for the caller's message.
hpc_sbatch() {
  local -n _job_id=$1
  shift
  local ledger=() out rc=0 argv line queued
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
  hpc_sbatch_id_to _job_id "$out"
  if ((rc != 0)) || [[ -z $_job_id ]]; then
    HPC_SBATCH_SAID="exit $rc${out:+, said: $out}"
    if [[ -n $_job_id ]]; then
      warn "sbatch exited $rc but answered job id $_job_id: the job is queued; check it with squeue -j $_job_id"
    elif ((rc != 0)) || [[ -z ${ledger[2]:-} ]]; then
      return 1 # sbatch's exit status says it refused (or there is no script to ask by)
    else
      hpc_sbatch_queued_to queued "${ledger[2]}" || return
      _job_id=$queued
      warn "sbatch's answer held no job id ($HPC_SBATCH_SAID), but Slurm has job $_job_id for ${ledger[2]}: taken as submitted"
    fi
  fi
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
