# shellcheck shell=bash
# Step 4 of job_submitter.sh: the batch script, made by a pure function of the J_*
# variables (same inputs, same script; no clock, no pid, no files read). --dry-run prints
# it; submit.sh writes it beside the logs.

# _directive NAME [VALUE]: one "#SBATCH --name=VALUE" line. sbatch reads directive lines
# like a shell would (quotes removed, a backslash escapes the next character, even inside
# quotes, nothing expanded), so the value is double-quoted with \ and " escaped. Newlines
# never reach here (validate.sh refuses them).
_directive() {
  if (($# == 1)); then
    printf '#SBATCH --%s\n' "$1"
  else
    local value=${2//\\/\\\\}
    value=${value//\"/\\\"}
    printf '#SBATCH --%s="%s"\n' "$1" "$value"
  fi
}

# _export NAME VALUE: "export NAME='VALUE'" with VALUE as one shell word.
_export() {
  local q
  quote_to q "$2"
  printf 'export %s=%s\n' "$1" "$q"
}

# hpc_plan_log_pattern_to VAR [sbatch]: the log path with %j (or %A_%a for arrays) for the
# job's number; with "sbatch", as given to --output: a '%' of the folder's path doubled,
# so that Slurm does not take it for a replacement (validate.sh refuses a backslash).
hpc_plan_log_pattern_to() {
  local -n _out=$1
  local dir=$J_SCRATCH_DIR/hpc_outputs
  [[ ${2:-} != sbatch ]] || sbatch_filename_to dir "$dir"
  if ((${#J_COMMANDS[@]} > 1)); then
    _out=$dir/$J_EXP_NAME-%A_%a.out
  else
    _out=$dir/$J_EXP_NAME-%j.out
  fi
}

# hpc_plan_array_to VAR: "" for one command, else "0-(n-1)" (or J_ARRAY_SPEC, one of
# several arrays: arrays.sh) with the %N cap.
hpc_plan_array_to() {
  local -n _arr=$1
  _arr=""
  local n=${#J_COMMANDS[@]}
  ((n > 1)) || return 0
  _arr=${J_ARRAY_SPEC:-0-$((n - 1))}
  [[ -z $J_MAX_PARALLEL ]] || _arr+="%$J_MAX_PARALLEL"
}

# hpc_plan_exports: the job's variables, as the batch script sets them before it sources
# job_runtime.sh (also the start of an --interactive session's shell: local.sh).
hpc_plan_exports() {
  _export source_dir "$J_SOURCE_DIR"
  _export project_name "$J_PROJECT_NAME"
  _export scratch_dir "$J_SCRATCH_DIR"
  _export exp_name "$J_EXP_NAME"
  _export HPC_COMMANDS_FILE "$J_COMMANDS_PATH"
  # One of several arrays (arrays.sh): its task i runs line HPC_TASK_OFFSET+i+1.
  ((${J_TASK_OFFSET:-0} == 0)) || _export HPC_TASK_OFFSET "$J_TASK_OFFSET"
  _export HPC_JOB_SCRIPT "$J_SCRIPT_PATH"
  # The cluster's Slurm, read once at submission (cluster.sh); not known in a dry run.
  [[ -z ${J_SLURM_VERSION:-} ]] || _export HPC_SLURM_VERSION "$J_SLURM_VERSION"
  # The code it runs (coderecord.sh); absent outside git.
  [[ -z ${J_GIT_COMMIT:-} ]] || _export HPC_GIT_COMMIT "$J_GIT_COMMIT"
  _export HPC_LAUNCHER "$J_LAUNCHER"
  _export HPC_NUM_NODES "$J_NODES"
  _export HPC_GPUS_PER_NODE "$J_GPUS"
  _export HPC_CPUS_PER_NODE "$J_CPUS"
  _export HPC_TASKS_PER_NODE "$J_TASKS_PER_NODE"
  _export HPC_CPUS_PER_TASK "$J_CPUS_PER_TASK"
  _export HPC_PROCS_PER_NODE "$J_PROCS_PER_NODE"
  _export HPC_SIGNAL_GRACE "$J_SIGNAL_GRACE"
  _export HPC_MAX_RESTARTS "$J_MAX_RESTARTS"
  _export HPC_REQUEUE "$J_REQUEUE"
  _export HPC_VENV "$J_VENV"
  [[ -z ${J_WANDB_KEY_FILE:-} ]] || _export HPC_WANDB_KEY_FILE "$J_WANDB_KEY_FILE"
  _export HPC_MODULES "$J_MODULES"
  _export HPC_PROVIDES_TMPDIR "$J_PROVIDES_TMPDIR"
  _export HPC_LOCAL_SCRATCH "$J_LOCAL_SCRATCH"
  # --data, --results-dir, --sync-every (staging.sh); absent when not used.
  if [[ -n ${J_DATA_ARCHIVE:-} ]]; then
    _export HPC_DATA_ARCHIVE "$J_DATA_ARCHIVE"
    _export HPC_DATA_BYTES "$J_DATA_BYTES"
    _export HPC_DATA_ENTRIES "$J_DATA_ENTRIES"
    _export HPC_DATA_SHA "$J_DATA_SHA"
  fi
  [[ ${J_RESULTS_FOLDER:-results} == results ]] || _export HPC_RESULTS_FOLDER "$J_RESULTS_FOLDER"
  [[ ${J_SYNC_EVERY_S:-0} == 0 ]] || _export HPC_SYNC_EVERY_S "$J_SYNC_EVERY_S"
  if [[ -n ${J_CONTAINER:-} ]]; then
    _export HPC_CONTAINER "$J_CONTAINER"
    _export HPC_CONTAINER_TO_LOCAL "$J_CONTAINER_TO_LOCAL"
  fi
}

# hpc_plan_script: print the whole batch script on stdout.
hpc_plan_script() {
  local gpu array log q_script q_runtime
  hpc_gpu_directive_to gpu
  hpc_plan_array_to array
  hpc_plan_log_pattern_to log sbatch
  quote_to q_script "$J_SCRIPT_PATH"
  quote_to q_runtime "$J_SOURCE_DIR/virtual_env_hpc_files/job_runtime.sh"

  printf '#!/bin/bash\n'
  _directive job-name "$J_EXP_NAME"
  [[ -z $J_ACCOUNT ]] || _directive account "$J_ACCOUNT"
  [[ -z $J_PARTITION ]] || _directive partition "$J_PARTITION"
  _directive nodes "$J_NODES"
  _directive ntasks-per-node "$J_TASKS_PER_NODE"
  _directive cpus-per-task "$J_CPUS_PER_TASK"
  if [[ -n $gpu ]]; then
    gpu=${gpu#--}
    _directive "${gpu%%=*}" "${gpu#*=}"
  fi
  [[ -z $J_MEM ]] || _directive mem "$J_MEM"
  [[ -z $J_MEM_PER_GPU ]] || _directive mem-per-gpu "$J_MEM_PER_GPU"
  _directive time "$J_TIME"
  [[ -z $array ]] || _directive array "$array"
  _directive output "$log"
  _directive open-mode append
  # The wall-time warning goes to this batch shell (B:), which passes it on to the program.
  _directive signal "B:USR1@$J_SIGNAL_GRACE"
  if [[ $J_REQUEUE == yes ]]; then
    _directive requeue
  else
    _directive no-requeue
  fi
  local extra
  for extra in "${J_SBATCH_OPTIONS[@]}"; do
    extra=${extra#--}
    if [[ $extra == *=* ]]; then
      _directive "${extra%%=*}" "${extra#*=}"
    else
      _directive "$extra"
    fi
  done
  cat <<EOF
#
# Made by hpc_files/job_submitter.sh (cluster profile: $HPC_PROFILE_NAME). Everything the
# job needs is here; to run it again by hand: sbatch $q_script
# The commands are the lines of \$HPC_COMMANDS_FILE; array task i runs line i+1.

EOF
  hpc_plan_exports
  # With a container the image, not a venv, provides Python (singularity_hpc_files/).
  # shellcheck disable=SC2016 # the script's text
  local env_step='hpc_activate_venv  # $HPC_VENV; a missing venv fails the job here'
  if [[ -n ${J_CONTAINER:-} ]]; then
    # shellcheck disable=SC2016
    env_step='hpc_container_prepare  # the runtime and $HPC_CONTAINER; the commands run inside it'
  fi
  cat <<EOF

# shellcheck source=/dev/null
source $q_runtime || exit 1

hpc_job_begin      # log header, the job's folders, this task's command
hpc_prepare_tmpdir # \$SLURM_TMPDIR on every node; \$HPC_RESULTS_DIR, copied back at the end
hpc_stage_data     # --data: the archive extracted into \$SLURM_TMPDIR, once per node
hpc_load_modules   # \$HPC_MODULES, when the cluster has modules
$env_step
hpc_run_command    # the command, through \$HPC_LAUNCHER, in \$source_dir
exit "\$?"
EOF
}
