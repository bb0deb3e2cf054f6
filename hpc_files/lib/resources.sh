# shellcheck shell=bash
# How gpus, nodes and cpus become Slurm's request for each launcher (the resource table
# of docs/reference.md). --gpus, --cpus and --mem are per node.

# HPC_LAUNCHER_TABLE: each launcher's shape, the one place both sides take it from (the
# job reads HPC_TASKS_PER_NODE and HPC_SRUN_MODE from its batch script):
#   LAUNCHER  TASKS (Slurm tasks per node: 1, or procs = one per process)  SRUN_MODE
# SRUN_MODE is how virtual_env_hpc_files/launchers.sh starts the command: plain (one srun
# step, each task runs it as it is), ranks (the same with torch.distributed's RANK,
# WORLD_SIZE ... set by task_wrapper.sh), or none (the launcher runs it itself).
HPC_LAUNCHER_TABLE=(
  "none 1 none"            # the command once, in the batch shell
  "lightning procs plain"  # one task per process; Lightning reads its rank from srun
  "script procs ranks"     # one task per process, torch.distributed's variables set
  "torchrun 1 plain"       # one torchrun per node, which starts the node's processes
  "dask 1 none"            # a worker per node (its own srun), the command once
  "agents-per-gpu procs none" # --agents-per-gpu: sweep_agent.sh starts one agent per task
)

# hpc_launcher_shape_to TASKS_VAR MODE_VAR KIND: KIND's row of HPC_LAUNCHER_TABLE.
hpc_launcher_shape_to() {
  local -n _tasks=$1 _mode=$2
  local _row _name _t _m
  for _row in "${HPC_LAUNCHER_TABLE[@]}"; do
    read -r _name _t _m <<<"$_row"
    if [[ $_name == "$3" ]]; then
      _tasks=$_t _mode=$_m
      return 0
    fi
  done
  die "no launcher '$3' in HPC_LAUNCHER_TABLE (resources.sh)"
}

# hpc_map_resources: sets J_PROCS_PER_NODE (training processes per node), J_TASKS_PER_NODE
# (Slurm tasks per node), J_SRUN_MODE, J_CPUS (per node) and J_CPUS_PER_TASK from
# J_LAUNCHER, J_GPUS, OPT_CPUS, OPT_PROCS_PER_NODE and OPT_AGENTS_PER_GPU.
hpc_map_resources() {
  # One process per GPU; on CPU, --procs-per-node (default 1).
  J_PROCS_PER_NODE=$((J_GPUS > 0 ? J_GPUS : 10#${OPT_PROCS_PER_NODE:-1}))
  local kind=$J_LAUNCHER tasks what="tasks per node of the $J_LAUNCHER launcher (one per GPU or process)"
  if ((${OPT_AGENTS_PER_GPU:-0})) && ((J_GPUS > 0)); then
    kind=agents-per-gpu what="agents of a node (--agents-per-gpu: one per GPU)"
  fi
  hpc_launcher_shape_to tasks J_SRUN_MODE "$kind"
  if [[ $tasks == procs ]]; then
    J_TASKS_PER_NODE=$J_PROCS_PER_NODE
  else
    J_TASKS_PER_NODE=1
  fi
  local per_node_default=$((J_PROCS_PER_NODE * HPC_DEFAULT_CPUS_PER_TASK))
  J_CPUS=$((10#${OPT_CPUS:-$per_node_default}))
  if ((J_CPUS % J_TASKS_PER_NODE != 0)); then
    die "--cpus $J_CPUS cannot be shared evenly by the $J_TASKS_PER_NODE $what: use a multiple of $J_TASKS_PER_NODE"
  fi
  J_CPUS_PER_TASK=$((J_CPUS / J_TASKS_PER_NODE))
}

# hpc_gpu_directive_to VAR: the GPU request as one sbatch option ("" for a CPU job).
hpc_gpu_directive_to() {
  local -n out=$1
  out=""
  ((J_GPUS > 0)) || return 0
  local typed=$J_GPUS
  [[ -z $J_GPU_TYPE ]] || typed=$J_GPU_TYPE:$J_GPUS
  case $HPC_GPU_DIRECTIVE in
    gpus-per-node) out="--gpus-per-node=$typed" ;;
    *) out="--gres=gpu:$typed" ;;
  esac
}

# hpc_explain_refusal_to VAR: after sbatch refused the job, which of the per-node requests
# no node of the partition can hold, and what to pass instead ("" when none is found).
# One sinfo call, on this failure path only. The default CPUs grow with --gpus (one
# process per GPU x HPC_DEFAULT_CPUS_PER_TASK), so "--gpus 6" can fail on CPUs first.
hpc_explain_refusal_to() {
  local -n _why=$1
  local line cpus gres gpus max_cpus=0 max_gpus=0 where="the cluster's nodes" args=(-h -o '%c|%G')
  _why=""
  command -v sinfo >/dev/null || return 0
  if [[ -n $J_PARTITION ]]; then
    args+=(-p "$J_PARTITION") where="the nodes of partition $J_PARTITION"
  fi
  while IFS='|' read -r cpus gres; do
    [[ $cpus =~ ^[0-9]+$ ]] && ((cpus > max_cpus)) && max_cpus=$cpus
    # gres "gpu:4", "gpu:a100:4(S:0-1)", several comma-separated, or "(null)"
    gpus=0
    while [[ $gres =~ gpu(:[A-Za-z0-9_.-]+)?:([0-9]+)(.*) ]]; do
      gpus=$((gpus + BASH_REMATCH[2])) gres=${BASH_REMATCH[3]}
    done
    ((gpus <= max_gpus)) || max_gpus=$gpus
  done < <(sinfo "${args[@]}" 2>/dev/null)
  ((max_cpus > 0)) || return 0
  if ((J_GPUS > max_gpus)); then
    _why+=" --gpus $J_GPUS is more than the $max_gpus GPU(s) per node of $where: lower --gpus, or spread the job with --num-nodes and --which-distributed."
  fi
  if ((J_CPUS > max_cpus)); then
    if [[ -z $OPT_CPUS ]]; then
      _why+=" The job asks for $J_CPUS CPUs per node (the default: $J_PROCS_PER_NODE process(es) x $HPC_DEFAULT_CPUS_PER_TASK CPU(s), HPC_DEFAULT_CPUS_PER_TASK of profile '$HPC_PROFILE_NAME'), more than the $max_cpus CPUs per node of $where: pass --cpus $max_cpus (or fewer)."
    else
      _why+=" --cpus $J_CPUS is more than the $max_cpus CPUs per node of $where: pass --cpus $max_cpus or fewer."
    fi
  fi
  _why=${_why# }
}
