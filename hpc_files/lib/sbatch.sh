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

# sbatch's input variables (man sbatch, INPUT ENVIRONMENT VARIABLES) that set an option a
# batch script's #SBATCH line can set, each with that option: "VARIABLE option ...". A
# variable wins over the script's line, so SBATCH_TIMELIMIT or SBATCH_JOB_NAME in a
# researcher's environment silently replaced the plan's --time or name (the job then
# unknown to hpc status), SBATCH_ARRAY_INX its array. The memory ones conflict with any of
# the memory options.
HPC_SBATCH_ENV_OPTIONS=(
  "SBATCH_ACCOUNT account" "SBATCH_ARRAY_INX array" "SBATCH_CPUS_PER_GPU mem mem-per-gpu cpus-per-task"
  "SBATCH_ERROR error" "SBATCH_EXPORT export" "SBATCH_GPUS gpus gres" "SBATCH_GPUS_PER_NODE gpus-per-node gres"
  "SBATCH_GPUS_PER_TASK gpus-per-task gres" "SBATCH_GRES gres" "SBATCH_JOB_NAME job-name"
  "SBATCH_MEM_PER_CPU mem mem-per-gpu" "SBATCH_MEM_PER_GPU mem mem-per-gpu" "SBATCH_MEM_PER_NODE mem mem-per-gpu"
  "SBATCH_NO_REQUEUE requeue no-requeue" "SBATCH_OPEN_MODE open-mode" "SBATCH_OUTPUT output"
  "SBATCH_PARTITION partition" "SBATCH_REQUEUE requeue no-requeue" "SBATCH_SIGNAL signal"
  "SBATCH_TIMELIMIT time" "SBATCH_TRES_PER_TASK cpus-per-task gpus-per-task"
)

# hpc_sbatch_env_overridden_to ARRAY TEXT: the SBATCH_* variables of this environment that
# would override an option batch script TEXT sets in its #SBATCH lines (up to its first
# command, as sbatch reads them): the plan's own value is meant, so they are left out of
# sbatch's environment (hpc_sbatch) and a warning names them. The others (SBATCH_QOS,
# SBATCH_HOLD, SBATCH_RESERVATION, ...) stay yours. No process: runs only when some
# SBATCH_* variable is set.
hpc_sbatch_env_overridden_to() {
  local -n _seo=$1
  _seo=()
  local entry var opts opt line head=" "
  [[ -n ${!SBATCH_@} ]] || return 0
  while IFS= read -r line; do
    [[ $line == '#SBATCH --'* ]] && { opt=${line#'#SBATCH --'} && head+="${opt%%[= ]*} "; continue; }
    [[ -z $line || $line == '#'* ]] || break
  done <<<"$2"
  for entry in "${HPC_SBATCH_ENV_OPTIONS[@]}"; do
    var=${entry%% *} opts=${entry#* }
    [[ -n ${!var+x} ]] || continue
    for opt in $opts; do
      if [[ $head == *" $opt "* ]]; then
        _seo+=("$var")
        break
      fi
    done
  done
}

# hpc_sbatch_env_warn NAMES...: say once per submission which SBATCH_* variables the plan's
# own #SBATCH lines replace (not the account or partition the plan took from them).
hpc_sbatch_env_warn() {
  local name said=""
  for name; do
    [[ " ${HPC_SBATCH_ENV_WARNED:-} " == *" $name "* ]] && continue
    # (the plan took your SBATCH_ACCOUNT and SBATCH_PARTITION: validate.sh)
    [[ $name == SBATCH_ACCOUNT && ${!name} == "${J_ACCOUNT:-}" ]] && continue
    [[ $name == SBATCH_PARTITION && ${!name} == "${J_PARTITION:-}" ]] && continue
    HPC_SBATCH_ENV_WARNED+=" $name" said+="${said:+, }$name=${!name}"
  done
  [[ -z $said ]] ||
    warn "not used for this submission: $said (your environment; sbatch would let it override the batch script's own setting of the same option, which the toolkit planned and checked). Give it as the toolkit's option instead (--time, --partition, --account, --gpus, --mem ..., or --sbatch-option for the others)"
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
  # SBATCH_* variables that would override the script's own settings stay out.
  local overridden=() text
  if [[ -n ${!SBATCH_@} && -f ${argv[-1]} ]]; then
    IFS= read -r -d '' text <"${argv[-1]}" || true
    hpc_sbatch_env_overridden_to overridden "$text"
    hpc_sbatch_env_warn "${overridden[@]}"
  fi
  # A job submitted from inside another (a line that submits follow-up work) is planned
  # and run as from a clean shell: nothing of the enclosing job's Slurm variables goes in.
  out=$(
    hpc_forget_enclosing_job
    ((${#overridden[@]} == 0)) || unset -v "${overridden[@]}"
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
