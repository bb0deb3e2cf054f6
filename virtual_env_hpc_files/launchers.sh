# shellcheck shell=bash
# Job-side launchers: how a task's command starts on the allocation. One function per
# launcher (hpc_launch_NAME), called by hpc_run_command from the project folder with
# HPC_COMMAND set. Sourced by job_runtime.sh. Each returns the command's exit code.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

HPC_TASK_WRAPPER=${BASH_SOURCE[0]%/*}/task_wrapper.sh

# hpc_first_node_addr: NodeAddr of the job's first node as Slurm knows it (node names
# need not resolve; `hostname` can be the same on several nodes).
hpc_first_node_addr() {
  local first info field
  first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
  info=$(scontrol show node -o "$first") || hpc_fail "scontrol show node $first failed"
  for field in $info; do
    if [[ $field == NodeAddr=* ]]; then
      printf '%s\n' "${field#NodeAddr=}"
      return 0
    fi
  done
  printf '%s\n' "$first"
}

# hpc_job_port: a port derived from the job id (20000-29999), so two jobs sharing a first
# node do not collide; moves on while something already listens there. The batch script
# runs on the first node, so the probe looks at the right machine.
hpc_job_port() {
  local base=$((${SLURM_JOB_ID:-0} % 10000)) i port
  for ((i = 0; i < 100; i++)); do
    port=$((20000 + (base + i * 101) % 10000))
    if ! (exec 3<>"/dev/tcp/$MASTER_ADDR/$port") 2>/dev/null; then
      printf '%s\n' "$port"
      return 0
    fi
  done
  printf '%s\n' "$((20000 + base))"
}

# hpc_distributed_env: what every distributed launcher hands to the program.
hpc_distributed_env() {
  MASTER_ADDR=$(hpc_first_node_addr)
  export MASTER_ADDR
  MASTER_PORT=$(hpc_job_port)
  export MASTER_PORT
  # What other frameworks read instead (README: Recipes): JAX's jax.distributed.initialize()
  # with no arguments builds its coordinator from the first node's name, which need not
  # resolve; it takes this instead (process count and id it reads from srun's SLURM_*).
  export JAX_COORDINATOR_ADDRESS=$MASTER_ADDR:$MASTER_PORT
  # Slurm 22.05+ steps do not inherit --cpus-per-task; srun reads this instead.
  export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-$HPC_CPUS_PER_TASK}
  if ((HPC_GPUS_PER_NODE > 0)); then
    export HPC_ACCELERATOR=gpu
  else
    export HPC_ACCELERATOR=cpu
  fi
  hpc_log "$HPC_LAUNCHER: $HPC_NUM_NODES node(s) x $HPC_DEVICES_PER_NODE process(es) ($HPC_ACCELERATOR), MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT"
}

# hpc_srun_tasks TASKS_PER_NODE MODE COMMAND: one srun step over every node; a task that
# fails kills the step (--kill-on-bad-exit), so the job ends at once, with the exit code
# of the rank that failed first (the others were stopped by a signal).
hpc_srun_tasks() {
  local per_node=$1 mode=$2 cmd=$3 rc=0 first
  export HPC_RANK_STATUS_DIR=$HPC_EXP_DIR/.hpc_ranks/${SLURM_JOB_ID:-0}
  rm -rf -- "$HPC_RANK_STATUS_DIR"
  # (Once more when another job's end removed the empty parent between the two mkdirs.)
  mkdir -p -- "$HPC_RANK_STATUS_DIR" 2>/dev/null || mkdir -p -- "$HPC_RANK_STATUS_DIR"
  srun --kill-on-bad-exit=1 --nodes="$HPC_NUM_NODES" --ntasks-per-node="$per_node" \
    bash "$HPC_TASK_WRAPPER" "$mode" "$cmd" </dev/null &
  HPC_CHILD_PID=$!
  hpc_wait_child "$HPC_CHILD_PID" || rc=$?
  if ((rc != 0)); then
    first=$(cat -- "$HPC_RANK_STATUS_DIR"/rank_* 2>/dev/null | sort -n | head -n 1)
    if [[ -n $first ]]; then
      local when node rank code
      read -r when node rank code <<<"$first"
      if [[ -n ${HPC_SIGNALLED:-} ]]; then
        # Warned or cancelled: ranks that stop now stop by design (a program that saves and
        # exits non-zero on the warning, torchrun's own exit 1); requeue.sh judges it next.
        local why="the wall-time warning"
        [[ $HPC_SIGNALLED != preempt ]] || why="the preemption notice"
        [[ $HPC_SIGNALLED != stall ]] || why="the stall"
        [[ $HPC_SIGNALLED != cancel ]] || why="the job was cancelled"
        local next="whether the job resumes is decided next"
        [[ $HPC_SIGNALLED != cancel ]] || next="the job stops"
        hpc_log "the ranks stopped after $why (rank $rank on $node ended first, exit code $code); $next"
      else
        hpc_log "rank $rank on $node failed first, with exit code $code; the other ranks were stopped (srun exit $rc)"
      fi
      rc=$code
    elif [[ -n ${HPC_SIGNALLED:-} ]]; then
      hpc_log "srun step ended with exit code $rc after the job was signalled ($HPC_SIGNALLED)"
    else
      hpc_log "srun step ended with exit code $rc (srun's lines above name the node and task)"
    fi
  fi
  rm -rf -- "$HPC_RANK_STATUS_DIR"
  rmdir -- "$HPC_EXP_DIR/.hpc_ranks" 2>/dev/null # (when no other job of the experiment runs)
  return "$rc"
}

# hpc_python_hook: the start-up hook (python_hooks/sitecustomize.py) on PYTHONPATH for the
# distributed launchers: a torch.distributed world or a Lightning Trainer that does not fit
# the job stops at once (instead of separate runs), a Trainer left at its defaults gets
# the job's nodes and devices. HPC_LIGHTNING_HOOK=no (the plan's) leaves Python alone.
hpc_python_hook() {
  [[ ${HPC_LIGHTNING_HOOK:-yes} != no ]] || return 0
  export PYTHONPATH=$HPC_RUNTIME_DIR/python_hooks${PYTHONPATH:+:$PYTHONPATH}
}

# hpc_lightning_requeue_hook: in a job that may requeue, Lightning's own SLURM
# auto-requeue is replaced by hpc_toolkit's SlurmRequeue through the start-up hook
# (HPC_LIGHTNING_REQUEUE=yes): it hangs in multi-process DDP. HPC_LIGHTNING_HOOK=no (the
# plan's, from the submitting environment) leaves Lightning as it is.
hpc_lightning_requeue_hook() {
  local procs=$((HPC_NUM_NODES * HPC_DEVICES_PER_NODE))
  if [[ ${HPC_REQUEUE:-yes} != yes ]]; then
    return 0
  elif [[ ${HPC_LIGHTNING_HOOK:-yes} == no ]]; then
    ((procs < 2)) || hpc_log "note: HPC_LIGHTNING_HOOK=no: Lightning's built-in SLURM auto-requeue can hang in DDP ($procs processes); add hpc_toolkit's SlurmRequeue callback to the Trainer, or submit with --no-requeue"
    return 0
  fi
  export HPC_LIGHTNING_REQUEUE=yes
  hpc_log "Lightning: its built-in SLURM auto-requeue can hang in DDP; this job turns it off and adds hpc_toolkit's SlurmRequeue (checkpoint at a step boundary on every rank, then requeue) unless the script has one (HPC_LIGHTNING_HOOK=no: leave Lightning as it is)"
}

# lightning, script, torchrun: one srun step of HPC_TASKS_PER_NODE tasks per node, each
# running the task's command as the plan wrote it (torchrun's line already rewritten at
# submission: hpc_files/lib/count_args.sh), in HPC_SRUN_MODE (task_wrapper.sh): the shape
# comes from HPC_LAUNCHER_TABLE (hpc_files/lib/resources.sh), through the batch script.
hpc_launch_lightning() {
  hpc_distributed_env
  hpc_python_hook
  hpc_lightning_requeue_hook
  hpc_srun_tasks "$HPC_TASKS_PER_NODE" "$HPC_SRUN_MODE" "$HPC_COMMAND"
}

hpc_launch_script() {
  hpc_distributed_env
  hpc_python_hook
  hpc_srun_tasks "$HPC_TASKS_PER_NODE" "$HPC_SRUN_MODE" "$HPC_COMMAND"
}

hpc_launch_torchrun() {
  hpc_distributed_env
  hpc_python_hook
  hpc_srun_tasks "$HPC_TASKS_PER_NODE" "$HPC_SRUN_MODE" "$HPC_COMMAND"
}

# dask: a scheduler here (first node), one worker per node (threads = CPUs), then the
# command once with DASK_SCHEDULER_FILE and DASK_SCHEDULER_ADDRESS (what Client() with no
# arguments reads); scheduler and workers stop when it ends.
hpc_launch_dask() {
  hpc_distributed_env
  local ctr # scheduler, workers and command in the container with --singularity-container
  hpc_container_prefix_to ctr
  "${ctr[@]}" sh -c 'command -v dask' >/dev/null ||
    hpc_fail "the dask launcher needs dask.distributed in the venv (or the container image): pip install 'dask[distributed]'"
  local dir=$HPC_EXP_DIR/dask file sched_pid workers_pid cmd_pid rc=0
  file=$dir/scheduler-${SLURM_JOB_ID:-0}.json
  mkdir -p -- "$dir" && rm -f -- "$file"
  "${ctr[@]}" dask scheduler --scheduler-file "$file" --host "$MASTER_ADDR" --port 0 \
    --dashboard-address :0 </dev/null >"$dir/scheduler-${SLURM_JOB_ID:-0}.log" 2>&1 &
  sched_pid=$!
  # Through container.sh with or without an image: it sets each node's own $SLURM_TMPDIR.
  # shellcheck disable=SC2016 # expanded by the task's bash, on each node
  srun --kill-on-bad-exit=1 --nodes="$HPC_NUM_NODES" --ntasks-per-node="$HPC_TASKS_PER_NODE" bash "$HPC_CONTAINER_SH" bash -c \
    'exec dask worker --scheduler-file "$1" --nthreads "$2" --nworkers 1 --name "$SLURMD_NODENAME" --local-directory "${SLURM_TMPDIR:-/tmp}"' \
    _ "$file" "$HPC_CPUS_PER_TASK" </dev/null >"$dir/workers-${SLURM_JOB_ID:-0}.log" 2>&1 &
  workers_pid=$!
  if ! "${ctr[@]}" python -c 'import sys; from distributed import Client
c = Client(scheduler_file=sys.argv[1], timeout=120); c.wait_for_workers(int(sys.argv[2]), timeout=120); c.close()' \
    "$file" "$HPC_NUM_NODES" >/dev/null 2>"$dir/connect-${SLURM_JOB_ID:-0}.log"; then
    kill "$workers_pid" "$sched_pid" 2>/dev/null
    hpc_fail "the Dask cluster did not come up with $HPC_NUM_NODES workers: see $dir/*-${SLURM_JOB_ID:-0}.log"
  fi
  # Client() with no address (laptop code) reads DASK_SCHEDULER_ADDRESS (dask's config
  # scheduler-address): without it, it starts a LocalCluster on this node alone.
  local address="" text
  text=$(<"$file")
  [[ $text =~ \"address\":\ *\"([^\"]+)\" ]] && address=${BASH_REMATCH[1]}
  [[ -n $address ]] || hpc_fail "the Dask scheduler file $file names no address: see $dir/scheduler-${SLURM_JOB_ID:-0}.log"
  hpc_log "dask: scheduler and $HPC_NUM_NODES worker(s) ready, DASK_SCHEDULER_FILE=$file DASK_SCHEDULER_ADDRESS=$address (Client() with no arguments connects to them)"
  export DASK_SCHEDULER_FILE=$file DASK_SCHEDULER_ADDRESS=$address
  hpc_spawn_command "$HPC_COMMAND"
  cmd_pid=$HPC_CHILD_PID
  # Whichever ends first: the command (normal), or the workers (a node failed). A trapped
  # signal interrupts wait without a finished pid: wait again.
  local finished=""
  while [[ -z $finished ]]; do
    rc=0
    wait -n -p finished "$cmd_pid" "$workers_pid" 2>/dev/null || rc=$?
  done
  if [[ $finished == "$workers_pid" ]]; then
    hpc_log "dask workers ended (exit $rc) before the command: stopping it (see $dir/workers-${SLURM_JOB_ID:-0}.log)"
    kill -- "-$cmd_pid" 2>/dev/null
    wait "$cmd_pid" 2>/dev/null
    ((rc != 0)) || rc=1
  fi
  kill "$workers_pid" 2>/dev/null
  kill "$sched_pid" 2>/dev/null
  wait "$workers_pid" "$sched_pid" 2>/dev/null
  return "$rc"
}
