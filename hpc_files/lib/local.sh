# shellcheck shell=bash
# --local and --interactive (job_submitter.sh): the plan run here without Slurm, or in an
# interactive allocation, for debugging before waiting in a queue. One judge for both
# (hpc_debug_settle); the job side is the same job_runtime.sh that the batch job runs.
#   hpc_local_run        the batch script run by bash on this machine, each task in turn
#   hpc_interactive_run  salloc with the plan's resources, then a shell on the first node
#                        (srun --pty) that job_runtime.sh's hpc_interactive_begin prepares

# hpc_debug_settle: refuse what makes no sense with --local/--interactive (exit 2, before
# anything is written); sets J_DEBUG_TASKS, the task indexes to run.
hpc_debug_settle() {
  J_DEBUG_TASKS=()
  local mode="" n=${#J_COMMANDS[@]}
  ((OPT_LOCAL == 0)) || mode=--local
  ((OPT_INTERACTIVE == 0)) || mode=--interactive
  if [[ -z $mode ]]; then
    [[ -z $OPT_TASK ]] || die "--task runs one line of the configs file with --local or --interactive; a submission runs every line (an array): add --local or --interactive, or drop --task"
    [[ -z $OPT_PORT ]] || die "--port N prints the ssh tunnel to an --interactive session's node: add --interactive, or drop --port"
    return 0
  fi
  ((OPT_LOCAL == 0 || OPT_INTERACTIVE == 0)) ||
    die "--local runs the job here without Slurm; --interactive opens a session on a compute node: choose one"
  ((OPT_DRY_RUN == 0)) || die "--dry-run prints the plan and runs nothing; $mode runs it: choose one"
  ! hpc_sweep_requested ||
    die "$mode runs the lines of a configs file; W&B sweeps (--wandb-sweepid, --sweep, --resume-sweep) are not supported: put one run's command line in a file and pass --configs FILE"
  ((OPT_SETUP_VENV == 0)) ||
    die "--setup-venv builds the venv in a queued job; with $mode build it first (python3 -m venv .venv && .venv/bin/pip install -r requirements.txt) or submit once with --setup-venv"
  ((OPT_SNAPSHOT == 0)) || die "--snapshot protects a queued job from later edits; $mode runs the project as it is now: drop --snapshot"
  ((OPT_MAIL == 0)) || die "--mail is for queued jobs; $mode runs while you watch: drop --mail"
  [[ -z $OPT_PORT || $mode == --interactive ]] || die "--port N is for --interactive (the ssh tunnel to the session's node): drop --port"
  if ((OPT_LOCAL)) && ((J_NODES > 1)) && ! hpc_blocks_several; then
    die "--local runs on this machine, which is one node; --num-nodes $J_NODES cannot run here: use --num-nodes 1 (the launcher still starts --procs-per-node processes here, and $J_LAUNCHER runs the same code path), or --interactive for a session on $J_NODES nodes"
  fi
  if [[ -n $OPT_PORT ]]; then
    if [[ ! $OPT_PORT =~ ^[0-9]{1,5}$ ]] || ((10#$OPT_PORT < 1 || 10#$OPT_PORT > 65535)); then
      die "--port '$OPT_PORT' is not a port number (1-65535), e.g. --port 6006 for TensorBoard"
    fi
  fi
  if [[ -n $OPT_TASK ]]; then
    [[ $OPT_TASK =~ ^[0-9]{1,9}$ ]] || die "--task '$OPT_TASK' is not a task number: give the array task index, 0 for the first line"
    ((10#$OPT_TASK < n)) ||
      die "--task $OPT_TASK: the configs file has $n command(s), tasks 0-$((n - 1)) (task i runs line i+1)"
    J_DEBUG_TASKS=($((10#$OPT_TASK)))
  elif [[ -n ${J_PACK:-} ]]; then
    J_DEBUG_TASKS=(0) # --local --pack N: one packed job runs every line (pack.sh)
  elif ((OPT_INTERACTIVE && n > 1)); then
    die "--interactive opens one session, but the configs file has $n commands: choose the one to debug with --task i (0-$((n - 1)); task i runs line i+1)"
  else
    local i
    for ((i = 0; i < n; i++)); do J_DEBUG_TASKS+=("$i"); done
  fi
}

# hpc_debug_check_plan: --local runs each task with its chunk's job (resource blocks:
# blocks.sh); a task whose block needs several nodes cannot run on this machine.
hpc_debug_check_plan() {
  ((OPT_LOCAL)) || return 0
  local i k
  for i in "${J_DEBUG_TASKS[@]}"; do
    hpc_plan_chunk_of_to k "$i"
    hpc_plan_with_chunk "$k" _hpc_debug_one_node "$i"
  done
}

_hpc_debug_one_node() {
  ((J_NODES == 1)) ||
    die "--local runs on this machine, which is one node; task $1 (line ${J_COMMAND_LINES[$1]} of the configs file) is in a resource block of --num-nodes $J_NODES: choose the tasks of one-node blocks with --task I, or use --interactive --task $1"
}

# _hpc_local_task I TMP SCRIPT STUBS HOST: (in a subshell, with task I's chunk in force) run
# SCRIPT as array task I of a one-node Slurm job on HOST.
_hpc_local_task() {
  local i=$1 tmp=$2 v
  local -a f
  hpc_plan_chunk_to f "$HPC_PLAN_CHUNK"
  # Nothing of an enclosing Slurm job (or the user's shell) leaks into the local one.
  hpc_forget_enclosing_job
  while IFS= read -r v; do unset "$v"; done < <(compgen -e SBATCH_)
  export SLURM_JOB_ID=local-$$ SLURM_JOBID=local-$$ SLURM_JOB_NAME=$J_EXP_NAME
  export SLURM_NNODES=1 SLURM_JOB_NUM_NODES=1 SLURM_JOB_NODELIST=$5 SLURM_NODELIST=$5
  export SLURMD_NODENAME=$5 SLURM_NODEID=0 SLURM_PROCID=0 SLURM_LOCALID=0
  export SLURM_CPUS_PER_TASK=$J_CPUS_PER_TASK SLURM_NTASKS_PER_NODE=$J_TASKS_PER_NODE
  export SLURM_NTASKS=$J_TASKS_PER_NODE SLURM_JOB_CPUS_PER_NODE=$J_CPUS SLURM_CPUS_ON_NODE=$J_CPUS
  export SLURM_SUBMIT_DIR=$PWD SLURM_SUBMIT_HOST=$5 SLURM_CLUSTER_NAME=local
  export SLURM_TMPDIR=$tmp # HPC_LOCAL_RUN and HPC_PREEMPT_WATCH=no: the plan's (plan.sh)
  if [[ -n ${J_PACK:-} ]] && ((J_GPUS > 0)) && [[ -z ${CUDA_VISIBLE_DEVICES:-} ]]; then
    # The job's GPUs, as Slurm would list them (an allocation's own list is kept): the
    # packed lines split them (virtual_env_hpc_files/pack.sh).
    local g gpus=0
    for ((g = 1; g < J_GPUS; g++)); do gpus+=,$g; done
    export CUDA_VISIBLE_DEVICES=$gpus
  fi
  if hpc_plan_is_array; then
    # The task's own array (its chunk: a split at MaxArraySize, a resource block) as Slurm
    # numbers it: its indices less HPC_TASK_OFFSET, which its script adds back.
    local spec count
    hpc_plan_ranges_shift_to spec "${f[0]}" "${f[1]}"
    hpc_plan_ranges_count_to count "${f[0]}"
    export SLURM_ARRAY_JOB_ID=local-$$ SLURM_ARRAY_TASK_ID=$((i - f[1])) SLURM_ARRAY_TASK_COUNT=$count
    export SLURM_ARRAY_TASK_MIN=${spec%%[-,]*} SLURM_ARRAY_TASK_MAX=${spec##*[-,]}
    # --local --pack: one packed job (array task 0 of 1) runs every line.
    [[ -z ${J_PACK:-} ]] || export SLURM_ARRAY_TASK_COUNT=1 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=0
  fi
  export PATH=$4:$PATH
  cd -- "$J_SOURCE_DIR" && exec bash "$3" </dev/null
}

# hpc_local_run: run the batch script here, each chosen task in the foreground, with the
# variables a one-node Slurm job has and stand-ins for srun/scontrol/squeue (local_slurm/).
# Returns the first failing task's exit code, else 0.
hpc_local_run() {
  local run_dir stubs=$J_SOURCE_DIR/virtual_env_hpc_files/local_slurm host n=${#J_COMMANDS[@]}
  local i k script rc first_rc=0 tmp t0 failed=0 interrupted=0
  [[ -x $stubs/srun ]] || die "$stubs/srun is missing: reinstall the toolkit (bash hpc_files/install_into_project.sh .)"
  host=$(hostname 2>/dev/null || uname -n)
  run_dir=$(mktemp -d "${TMPDIR:-/tmp}/hpc_local.XXXXXX") || die "cannot make a folder under ${TMPDIR:-/tmp}"
  # The plan's files, in this run's folder as its home: a local over the plan's, the plan
  # unchanged.
  local J_HOME=$run_dir commands_text commands lines
  hpc_home_path_to commands "$J_HOME" commands
  printf -v commands_text '%s\n' "${J_COMMANDS[@]}"
  _write_atomic "$commands" "$commands_text"
  local scripts="the batch script as --dry-run prints it"
  # Several arrays (MaxArraySize, resource blocks): each task runs its own array's script.
  ((${#J_CHUNKS[@]} == 1)) || scripts="each task with its own array's batch script, one of the ${#J_CHUNKS[@]} a submission would write"
  if [[ -n ${J_PACK:-} ]]; then
    local share="this machine's CPUs"
    ((J_GPUS == 0)) || share+=" and of the job's $J_GPUS GPU(s)"
    local outputs
    hpc_outputs_dir_to outputs "$J_SCRATCH_DIR"
    say "local run (no Slurm): $n line(s), $J_PACK at once on $host, each on 1/$J_PACK of $share; each line's log: $outputs/$J_EXP_NAME-local-<id>-line<I>.out"
  else
    say "local run (no Slurm): ${#J_DEBUG_TASKS[@]} of $n task(s) on $host, launcher $J_LAUNCHER ($scripts)"
  fi
  trap 'interrupted=1' INT
  for i in "${J_DEBUG_TASKS[@]}"; do
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpc_local_tmpdir.XXXXXX") || die "cannot make a local scratch folder under ${TMPDIR:-/tmp}"
    # The task's chunk (a resource block's has its own job: blocks.sh), its batch script.
    hpc_plan_chunk_of_to k "$i"
    hpc_plan_script_path_to script "$k"
    [[ -e $script ]] || _write_atomic "$script" "$(hpc_plan_script "$k")"$'\n'
    local label="task $i (line $((i + 1)))"
    [[ -z ${J_PACK:-} ]] || label="lines 0-$((n - 1)), $J_PACK at once"
    [[ -n ${J_PACK:-} ]] || say "---- $label: ${J_COMMANDS[i]}"
    t0=$SECONDS rc=0
    (hpc_plan_with_chunk "$k" _hpc_local_task "$i" "$tmp" "$script" "$stubs" "$host") || rc=$?
    rm -rf -- "$tmp"
    say "---- $label: exit code $rc after $((SECONDS - t0)) s"
    if ((rc != 0)); then
      ((failed++)) || true
      ((first_rc != 0)) || first_rc=$rc
    fi
    ((interrupted == 0)) || break
  done
  trap - INT
  local summary=""
  hpc_home_path_to lines "$J_HOME" lines
  [[ -z ${J_PACK:-} ]] || _hpc_local_pack_summary_to summary "$lines" "$n"
  rm -rf -- "$run_dir"
  if [[ -n $summary ]]; then
    ((interrupted == 0)) || summary="local run interrupted (Ctrl-C); $summary"
    say "$summary"
  elif ((interrupted)); then
    say "local run interrupted (Ctrl-C)"
    ((first_rc != 0)) || first_rc=130
  elif ((${#J_DEBUG_TASKS[@]} > 1)); then
    local summary="local run: $((${#J_DEBUG_TASKS[@]} - failed)) of ${#J_DEBUG_TASKS[@]} task(s) succeeded"
    ((failed == 0)) || summary+="; the first failure's exit code: $first_rc"
    say "$summary"
  fi
  return "$first_rc"
}

# sbatch's options that salloc refuses ("unrecognized option", Slurm 22.05), less those
# the toolkit manages itself (validate.sh refuses them everywhere).
HPC_SBATCH_ONLY_OPTIONS=(kill-on-invalid-dep input export-file ignore-pbs parsable propagate test-only batch)

# _hpc_sbatch_only OPTION: true when OPTION (--name or --name=value) is one of them, or an
# unambiguous prefix of one (sbatch takes --kill-on for --kill-on-invalid-dep).
_hpc_sbatch_only() {
  local name=${1#--} only
  name=${name%%=*}
  for only in "${HPC_SBATCH_ONLY_OPTIONS[@]}"; do
    [[ ${#name} -lt 3 || $only != "$name"* ]] || return 0
  done
  return 1
}

# _hpc_local_pack_summary_to VAR DIR N: "local run: 3 of 4 line(s) succeeded; failed: line
# 1 (exit 3)" from the per-line outcome files (virtual_env_hpc_files/pack.sh) in DIR.
_hpc_local_pack_summary_to() {
  local -n _sum=$1
  local i text ok=0 failed="" re='^state=([a-z]+) exit=([0-9-]+) '
  for ((i = 0; i < $3; i++)); do
    text=""
    [[ ! -r $2/$i ]] || IFS= read -r text <"$2/$i" || true
    if [[ $text =~ $re ]]; then
      if [[ ${BASH_REMATCH[1]} == "done" ]]; then
        ((++ok))
      else
        local how="${BASH_REMATCH[1]}, "
        [[ $how != "failed, " ]] || how=""
        failed+=" line $i (${how}exit ${BASH_REMATCH[2]}),"
      fi
    else
      failed+=" line $i (not run),"
    fi
  done
  _sum="local run: $ok of $3 line(s) succeeded"
  [[ -z $failed ]] || _sum+="; failed:${failed%,}"
}

# hpc_interactive_argv_to ARRAY RCFILE: salloc with the plan's resources, running a shell on
# the first node (srun --interactive: the shell's step takes none of the allocation's CPUs,
# so the launchers' srun steps still get them; --pty: a terminal).
hpc_interactive_argv_to() {
  local -n _ia=$1
  local gpu extra
  hpc_gpu_directive_to gpu
  _ia=(salloc "--job-name=$J_EXP_NAME" "--nodes=$J_NODES" "--ntasks-per-node=$J_TASKS_PER_NODE"
    "--cpus-per-task=$J_CPUS_PER_TASK" "--time=$J_TIME")
  [[ -z $J_ACCOUNT ]] || _ia+=("--account=$J_ACCOUNT")
  [[ -z $J_PARTITION ]] || _ia+=("--partition=$J_PARTITION")
  [[ -z $gpu ]] || _ia+=("$gpu")
  [[ -z $J_MEM ]] || _ia+=("--mem=$J_MEM")
  [[ -z $J_MEM_PER_GPU ]] || _ia+=("--mem-per-gpu=$J_MEM_PER_GPU")
  for extra in "${J_SBATCH_OPTIONS[@]}"; do
    if _hpc_sbatch_only "$extra"; then
      warn "--sbatch-option '$extra' is for batch jobs only: not given to salloc (it would refuse it)"
      continue
    fi
    _ia+=("--${extra#--}")
  done
  _ia+=(srun --interactive --preserve-env --pty --nodes=1 --ntasks=1 bash --rcfile "$2" -i)
}

# hpc_interactive_run: write the commands file and the session's rcfile beside the
# logs, then salloc; returns the session's exit status. The allocation ends with the shell.
# The session is the task's chunk's job (a resource block's: blocks.sh).
hpc_interactive_run() {
  local k
  hpc_plan_chunk_of_to k "${J_DEBUG_TASKS[0]}"
  hpc_plan_with_chunk "$k" _hpc_interactive_session
}

_hpc_interactive_session() {
  local rc_file argv rc=0 q_runtime login line
  [[ -t 0 && -t 1 ]] ||
    die "--interactive opens a shell on a compute node and needs a terminal: run it from your ssh session, not from a pipe or a batch job (use --local to run the plan here without one)"
  command -v salloc >/dev/null || HPC_DIE_STATUS=1 die "salloc not found on PATH: run --interactive on the cluster's login node"
  command -v srun >/dev/null ||
    HPC_DIE_STATUS=1 die "srun not found on PATH: run --interactive on the cluster's login node"
  HPC_DIE_STATUS=1
  hpc_submission_home_make
  hpc_submission_home_keep # the session's files, as a submission's
  hpc_home_path_to rc_file "$J_HOME" interactive_rc
  local commands_text commands
  hpc_home_path_to commands "$J_HOME" commands
  printf -v commands_text '%s\n' "${J_COMMANDS[@]}"
  _write_atomic "$commands" "$commands_text"
  hpc_staging_build
  hpc_venv_local_build # --venv-to-local: the archive the session unpacks
  login=$(hostname -f 2>/dev/null || hostname)
  quote_to q_runtime "$J_SOURCE_DIR/virtual_env_hpc_files/job_runtime.sh"
  {
    printf '# The shell of an --interactive session (job_submitter.sh): the job'"'"'s environment.\n'
    printf '[[ ! -r ~/.bashrc ]] || source ~/.bashrc\n'
    hpc_plan_exports "$HPC_PLAN_CHUNK" "$rc_file"
    # The task's index in its array (its chunk), as SLURM_ARRAY_TASK_ID would be: the job
    # side adds the chunk's HPC_TASK_OFFSET back (split at MaxArraySize).
    local -a f
    hpc_plan_chunk_to f "$HPC_PLAN_CHUNK"
    hpc_plan_shell_export HPC_INTERACTIVE_TASK "$((J_DEBUG_TASKS[0] - f[1]))"
    [[ -z $OPT_PORT ]] || hpc_plan_shell_export HPC_INTERACTIVE_PORT "$((10#$OPT_PORT))"
    hpc_plan_shell_export HPC_LOGIN_HOST "${USER:-$(id -un)}@$login"
    hpc_plan_shell_export HPC_PREEMPT_WATCH no
    printf 'source %s || exit 1\nhpc_interactive_begin\n' "$q_runtime"
  } >"$rc_file.tmp.$$" || { rm -f -- "$rc_file.tmp.$$"; die "cannot write $rc_file"; }
  mv -f -- "$rc_file.tmp.$$" "$rc_file" || die "cannot write $rc_file"
  hpc_interactive_argv_to argv "$rc_file"
  printf -v line '%q ' "${argv[@]}"
  say "interactive session: ${line% }"
  say "(waiting for the allocation; Ctrl-C gives up)"
  # The session is a job of its own, also when asked for from inside another (sbatch.sh).
  (
    hpc_forget_enclosing_job
    exec "${argv[@]}"
  ) || rc=$?
  say "interactive session ended (exit code $rc); its allocation is released"
  return "$rc"
}
