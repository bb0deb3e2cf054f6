# shellcheck shell=bash
# Job-side library, sourced by every batch script that job_submitter.sh writes: the steps
# a job takes on its first node (folders, modules, venv, the command and its launcher).
# The batch script sets source_dir, project_name, scratch_dir, exp_name and HPC_* first.

# The job side's library: hpc_log, hpc_fail, modules, Slurm versions, this node's paths.
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"
# shellcheck source=virtual_env_hpc_files/launchers.sh
source "${BASH_SOURCE[0]%/*}/launchers.sh"
# shellcheck source=virtual_env_hpc_files/requeue.sh
source "${BASH_SOURCE[0]%/*}/requeue.sh"
# shellcheck source=virtual_env_hpc_files/longruns.sh
source "${BASH_SOURCE[0]%/*}/longruns.sh"
# shellcheck source=virtual_env_hpc_files/pack.sh
source "${BASH_SOURCE[0]%/*}/pack.sh"
# shellcheck source=virtual_env_hpc_files/staging.sh
source "${BASH_SOURCE[0]%/*}/staging.sh"
# shellcheck source=virtual_env_hpc_files/project_writes.sh
source "${BASH_SOURCE[0]%/*}/project_writes.sh"
# shellcheck source=virtual_env_hpc_files/venv_local.sh
source "${BASH_SOURCE[0]%/*}/venv_local.sh"
# shellcheck source=singularity_hpc_files/container.sh
source "${BASH_SOURCE[0]%/*}/../singularity_hpc_files/container.sh"

# hpc_read_task_command: HPC_COMMAND = line HPC_TASK_INDEX+1 of HPC_COMMANDS_FILE.
hpc_read_task_command() {
  local i=0 line found=0
  [[ -r $HPC_COMMANDS_FILE ]] ||
    hpc_fail "commands file $HPC_COMMANDS_FILE is missing or unreadable (was hpc_outputs/jobs cleaned up? submit again)"
  while IFS= read -r line; do
    if ((i == HPC_TASK_INDEX)); then
      HPC_COMMAND=$line found=1
      break
    fi
    ((++i))
  done <"$HPC_COMMANDS_FILE"
  ((found)) || hpc_fail "task $HPC_TASK_INDEX has no line in $HPC_COMMANDS_FILE (it holds $i commands)"
}

# Functions run when the batch script exits, whatever the reason (features append to it:
# HPC_EXIT_HOOKS+=(my_cleanup)). They run in order; a failing hook does not stop the rest.
# HPC_LAST_EXIT_HOOKS run after all of them (removing the job's $SLURM_TMPDIR). A hook may
# set HPC_EXIT_CODE to fail a job that would otherwise succeed.
HPC_EXIT_HOOKS=()
HPC_LAST_EXIT_HOOKS=()

hpc_run_exit_hooks() {
  local rc=$?
  trap - EXIT
  HPC_EXIT_CODE=$rc
  hpc_run_exit_hooks_now "$rc"
  # Not requeued: the job is over; a requeue request Slurm still holds must not run it again.
  ((${HPC_REQUEUED:-0})) || [[ ${HPC_FINISHED_MARKER:-} == no ]] || hpc_slurm_job_finished "$HPC_EXIT_CODE"
  exit "$HPC_EXIT_CODE"
}

# hpc_run_exit_hooks_now RC: run the hooks now (before a requeue) and only once.
hpc_run_exit_hooks_now() {
  local hook hooks=("${HPC_EXIT_HOOKS[@]}" "${HPC_LAST_EXIT_HOOKS[@]}")
  HPC_EXIT_HOOKS=() HPC_LAST_EXIT_HOOKS=()
  for hook in "${hooks[@]}"; do
    "$hook" "$1" || hpc_log "exit step $hook failed"
  done
}

# hpc_task_dirs: this task's checkpoint folder (and HPC_TASK_SUBDIR, for its results:
# staging.sh), from the plan's HPC_EXP_DIR and HPC_TASK_SUBDIRS (an array's tasks each
# have a task_<i> subfolder).
hpc_task_dirs() {
  HPC_TASK_SUBDIR=""
  [[ $HPC_TASK_SUBDIRS != yes ]] || HPC_TASK_SUBDIR=/task_$HPC_TASK_INDEX
  export HPC_CHECKPOINT_DIR=$HPC_EXP_DIR/checkpoints$HPC_TASK_SUBDIR
}

# hpc_num_tasks: HPC_NUM_TASKS, the submission's number of lines (tasks), which
# HPC_TASK_INDEX counts in: the same in every array of a submission (split at
# MaxArraySize, resource blocks, a --rerun of some lines, an --interactive session), unlike
# SLURM_ARRAY_TASK_COUNT, which counts this array's tasks only.
hpc_num_tasks() {
  local n
  if [[ -n ${HPC_PACK:-} ]]; then
    n=$HPC_PACK_TOTAL
  elif [[ ${HPC_NUM_LINES:-} =~ ^[0-9]+$ ]]; then
    n=$HPC_NUM_LINES # the plan's (plan.sh)
  else
    # A script kept from an older toolkit: one command per line; an unreadable file is
    # hpc_read_task_command's to report.
    n=$(wc -l <"$HPC_COMMANDS_FILE" 2>/dev/null) || n=""
    n=${n//[[:space:]]/}
    [[ $n =~ ^[0-9]+$ ]] || n=${SLURM_ARRAY_TASK_COUNT:-1}
  fi
  export HPC_NUM_TASKS=$n
}

# hpc_task_title_to VAR: how the log's first line names this task: the Slurm job (JOBID,
# or ARRAYID_INDEX with its own job id), its place in its array, and the line(s) of the
# submission it runs. Array indices are not line numbers in a --rerun (the original
# indices, fewer tasks), resource blocks (one array per block) and split arrays
# (HPC_TASK_OFFSET); packed, a job runs several lines (pack.sh's HPC_PACK_ORDER).
hpc_task_title_to() {
  local -n _title=$1
  local job=${SLURM_JOB_ID:-?} lines=""
  if [[ -n ${HPC_PACK:-} ]]; then
    local first=${HPC_PACK_ORDER[0]} last=${HPC_PACK_ORDER[${#HPC_PACK_ORDER[@]} - 1]}
    if ((first == last)); then
      lines="packed line $first of $HPC_NUM_TASKS"
    else
      lines="packed lines $first-$last of $HPC_NUM_TASKS"
    fi
  elif [[ -n ${SLURM_ARRAY_TASK_ID:-} ]]; then
    lines="line index $HPC_TASK_INDEX of $HPC_NUM_TASKS"
  fi
  if [[ -n ${SLURM_ARRAY_TASK_ID:-} ]]; then
    local own=""
    [[ ${SLURM_ARRAY_JOB_ID:-} == "$job" ]] || own="Slurm job $job, "
    job="${SLURM_ARRAY_JOB_ID:-?}_$SLURM_ARRAY_TASK_ID (${own}array index $SLURM_ARRAY_TASK_ID of an array of ${SLURM_ARRAY_TASK_COUNT:-?} task(s))"
  fi
  _title="job $job${lines:+: $lines}"
}

# hpc_job_begin: the task's identity, folders and command, and a header in the log.
hpc_job_begin() {
  trap hpc_run_exit_hooks EXIT
  hpc_install_signal_traps
  # HPC_TASK_OFFSET: this array is one of several (hpc_files/lib/arrays.sh).
  export HPC_TASK_INDEX=$((${HPC_TASK_OFFSET:-0} + ${SLURM_ARRAY_TASK_ID:-0}))
  hpc_num_tasks
  export HPC_RESTART_COUNT=${SLURM_RESTART_COUNT:-0}
  hpc_task_dirs
  # Threaded libraries default to every core of the node; keep them to the job's share.
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
  mkdir -p -- "$HPC_OUTPUT_DIR" "$HPC_CHECKPOINT_DIR" ||
    hpc_fail "cannot create $HPC_CHECKPOINT_DIR under $scratch_dir (is \$SCRATCH mounted on this node?)"
  hpc_slurm_job_version
  hpc_env_default_signal_settle # for run_line.sh, once per job
  local stale_rc
  if hpc_slurm_stale_attempt_to stale_rc; then
    hpc_log "job ${SLURM_JOB_ID:-?}, attempt $((HPC_RESTART_COUNT + 1)): this job already finished (exit code $stale_rc); Slurm $HPC_SLURM_VERSION started it again for an old requeue request: nothing to do"
    trap - EXIT
    hpc_slurm_job_finished "$stale_rc"
    exit "$stale_rc"
  fi
  hpc_attempt_begin # what this attempt writes to $HPC_CHECKPOINT_DIR (requeue.sh)
  if [[ -n ${HPC_PACK:-} ]]; then
    hpc_pack_begin # this job's lines (pack.sh)
  else
    hpc_read_task_command
  fi
  [[ -z ${HPC_WANDB_KEY_FILE:-} ]] || hpc_load_wandb_key "$HPC_WANDB_KEY_FILE"
  local title
  hpc_task_title_to title
  hpc_log "$title, attempt $((HPC_RESTART_COUNT + 1)), nodes ${SLURM_JOB_NODELIST:-?}, Slurm ${HPC_SLURM_VERSION:-unknown}"
  local shown
  hpc_shown_line_to shown "$HPC_COMMAND" "line $((HPC_TASK_INDEX + 1)) of $HPC_COMMANDS_FILE"
  hpc_log "command: $shown"
  hpc_longruns_begin # $HPC_HEARTBEAT, requeues that were for a node (longruns.sh)
  # Whose checkpoints, and whether this attempt resumes them (runs.sh); a packed job's
  # lines each have their own (pack.sh).
  if [[ -z ${HPC_PACK:-} ]] && ! hpc_run_settle "$HPC_CHECKPOINT_DIR" "$HPC_TASK_INDEX" "$HPC_COMMAND"; then
    HPC_ATTEMPT_OUTCOME=failed
    exit 2
  fi
  if [[ -n ${HPC_GIT_COMMIT:-} ]]; then
    # The record is written at submission (coderecord.sh); a --local run writes none.
    local record
    hpc_job_path_to record code
    [[ -e $record ]] || record=""
    hpc_log "code: git commit $HPC_GIT_COMMIT, run from $source_dir${record:+ (record: $record)}"
  else
    hpc_log "code: not recorded ($source_dir was not in a git repository with a commit at submission)"
  fi
}

# hpc_load_wandb_key FILE: WANDB_API_KEY from FILE (saved there at submission so the key
# never went through Slurm), which only its owner may read. Never printed.
hpc_load_wandb_key() {
  local file=$1 mode key=""
  [[ -f $file && -r $file ]] ||
    hpc_fail "W&B API key file $file is missing or unreadable on this node (is \$HOME mounted here?)"
  mode=$(stat -c %a -- "$file") || hpc_fail "cannot read the permissions of $file"
  ! ((8#$mode & 8#077)) || hpc_fail "W&B API key file $file can be read by others (mode $mode): chmod 600 '$file'"
  IFS= read -r key <"$file" || true
  key=${key//[[:space:]]/}
  [[ -n $key ]] || hpc_fail "W&B API key file $file is empty"
  export WANDB_API_KEY=$key
}

# hpc_activate_venv: the project's venv, or none when HPC_VENV=none; with --venv-to-local
# (HPC_VENV_LOCAL_ARCHIVE) its copy on every node's local disk (venv_local.sh).
hpc_activate_venv() {
  if [[ ${HPC_VENV:-none} == none ]]; then
    hpc_log "venv: none (python is $(command -v python3 || echo missing))"
    return 0
  fi
  if [[ -n ${HPC_VENV_LOCAL_ARCHIVE:-} ]]; then
    local copy nounset=$-
    hpc_venv_to_local_to copy
    set +u
    # shellcheck source=/dev/null
    source "$copy/bin/activate" || hpc_fail "could not activate $copy"
    [[ $nounset != *u* ]] || set -u
    hpc_log "venv: $copy (node-local copy of $HPC_VENV; python is $(command -v python))"
    return 0
  fi
  [[ -f $HPC_VENV/bin/activate ]] ||
    hpc_fail "virtual environment not found at $HPC_VENV: create it (python3 -m venv '$HPC_VENV' and pip install your requirements), submit with --setup-venv to build it in a job first, or pass --venv PATH|none"
  local nounset=$-
  set +u # activate scripts read variables that may be unset
  # shellcheck source=/dev/null
  source "$HPC_VENV/bin/activate" || hpc_fail "could not activate $HPC_VENV"
  [[ $nounset != *u* ]] || set -u
  hpc_log "venv: $HPC_VENV"
}

# hpc_wait_child PID: wait for PID through any trapped signal; returns its exit code.
hpc_wait_child() {
  local pid=$1 rc
  while :; do
    rc=0
    # (2>/dev/null: bash's own "line N: PID Killed ..." notice for a program killed by a
    # signal is shell noise in the job's log; the toolkit logs the exit code itself.)
    wait "$pid" 2>/dev/null || rc=$?
    kill -0 "$pid" 2>/dev/null || return "$rc"
  done
}

# hpc_launch_none: the command once, on this node, as bash would run it on a laptop.
hpc_launch_none() {
  hpc_spawn_command "$HPC_COMMAND"
  hpc_wait_child "$HPC_CHILD_PID"
}

# hpc_run_command: run the task's command with its launcher from the project folder;
# returns the command's exit code (the job's exit code).
hpc_run_command() {
  local rc=0 started=$SECONDS since=$EPOCHREALTIME
  cd -- "$source_dir" || hpc_fail "project folder $source_dir is not reachable from this node"
  declare -F "hpc_launch_$HPC_LAUNCHER" >/dev/null || hpc_fail "unknown launcher '$HPC_LAUNCHER'"
  hpc_project_writes_begin # what the task writes into the project (project_writes.sh)
  # Python writes what it prints at once, unless the user chose (PYTHONUNBUFFERED set, to
  # anything): to a file (the log) it held 8 KiB back, so the log showed nothing for long
  # and the stall watch stopped healthy programs (docs/requeue.md, "Stalls").
  [[ -n ${PYTHONUNBUFFERED+x} ]] || export PYTHONUNBUFFERED=1
  # One process (a line, or packed lines): a Lightning Trainer gets the toolkit's requeue,
  # not Lightning's own (sitecustomize.py; said by the program when it makes one).
  [[ $HPC_LAUNCHER != none || ${HPC_REQUEUE:-yes} != yes ]] || export HPC_LIGHTNING_REQUEUE=yes
  if [[ -n ${HPC_PACK:-} ]]; then
    hpc_pack_run || rc=$? # several lines, each judged on its own (pack.sh)
    hpc_project_writes_since "$since"
    return "$rc"
  fi
  if [[ -z $HPC_SIGNALLED ]]; then
    hpc_start_preempt_watch
    hpc_start_stall_watch # --stall-timeout (longruns.sh)
    "hpc_launch_$HPC_LAUNCHER" || rc=$?
    hpc_program_ended # (requeue.sh: what escaped it ends, and writes no progress)
    hpc_stop_stall_watch
    # A node lost under the program: its failure is the node's (longruns.sh).
    ((rc == 0)) || [[ -n $HPC_SIGNALLED ]] || ! hpc_after_lost_node "$rc" || rc=$?
    hpc_log "command ended with exit code $rc after $((SECONDS - started)) s"
    hpc_project_writes_since "$since"
  else
    hpc_log "not starting the command: the job was signalled ($HPC_SIGNALLED) before it could"
    hpc_after_unstarted # (requeue.sh: never "finished" with nothing run)
    return
  fi
  hpc_after_command "$rc"
}

# hpc_interactive_begin: the start of an --interactive session's shell (job_submitter.sh
# writes its rcfile): the task's variables and folders, $SLURM_TMPDIR with the --data,
# modules, the venv, then what to run. The exit hooks (results copy, the job's own
# scratch folder) run when the shell exits.
hpc_interactive_begin() {
  export HPC_TASK_INDEX=$((${HPC_TASK_OFFSET:-0} + ${HPC_INTERACTIVE_TASK:-0}))
  export HPC_RESTART_COUNT=0
  hpc_num_tasks
  hpc_task_dirs
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-$HPC_CPUS_PER_TASK}}
  # srun inside the session: the allocation's CPUs per task, not the shell step's.
  export SRUN_CPUS_PER_TASK=$HPC_CPUS_PER_TASK
  mkdir -p -- "$HPC_OUTPUT_DIR" "$HPC_CHECKPOINT_DIR" ||
    hpc_fail "cannot create $HPC_CHECKPOINT_DIR under $scratch_dir (is \$SCRATCH mounted on this node?)"
  hpc_read_task_command
  hpc_run_settle "$HPC_CHECKPOINT_DIR" "$HPC_TASK_INDEX" "$HPC_COMMAND" || exit 2
  [[ -z ${HPC_WANDB_KEY_FILE:-} ]] || hpc_load_wandb_key "$HPC_WANDB_KEY_FILE"
  trap hpc_run_exit_hooks EXIT
  hpc_prepare_tmpdir
  hpc_stage_data
  hpc_load_modules
  if [[ -n ${HPC_CONTAINER:-} ]]; then
    hpc_container_prepare
  else
    hpc_activate_venv
  fi
  cd -- "$source_dir" || hpc_fail "project folder $source_dir is not reachable from this node"
  local node
  hpc_node_name_to node
  hpc_log "interactive session: job $SLURM_JOB_ID on ${SLURM_JOB_NODELIST:-$node} (this shell on $node), in $source_dir"
  hpc_log "python: $(command -v python || command -v python3 || echo none)"
  printf '\nThe command of task %s (line %s of %s):\n    %s\n' "$HPC_TASK_INDEX" "$((HPC_TASK_INDEX + 1))" \
    "$HPC_COMMANDS_FILE" "$HPC_COMMAND"
  if [[ $HPC_LAUNCHER == none && -z ${HPC_CONTAINER:-} ]]; then
    printf 'Type it (or edit it) here, or run it as the job would: hpc_run_command\n'
  else
    printf 'Run it as the job would (launcher %s%s): hpc_run_command\n' "$HPC_LAUNCHER" "${HPC_CONTAINER:+, inside $HPC_CONTAINER}"
  fi
  # shellcheck disable=SC2016 # the variables' names, printed
  printf '$SLURM_TMPDIR=%s (--data is there); results: $HPC_RESULTS_DIR=%s\n' "$SLURM_TMPDIR" "${HPC_RESULTS_DIR:-none}"
  printf 'The allocation ends when this shell exits (exit, Ctrl-D) or at its wall time. To survive a dropped\n'
  printf 'connection, start tmux (or screen) on the login node first and run --interactive inside it.\n'
  if [[ -n ${HPC_INTERACTIVE_PORT:-} ]]; then
    printf 'To reach port %s of this node (TensorBoard, Jupyter) from your laptop:\n    ssh -L %s:%s:%s %s\n' \
      "$HPC_INTERACTIVE_PORT" "$HPC_INTERACTIVE_PORT" "$node" "$HPC_INTERACTIVE_PORT" "${HPC_LOGIN_HOST:-LOGIN}"
  fi
  printf '\n'
}
