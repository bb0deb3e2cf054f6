# shellcheck shell=bash
# How gpus, nodes and cpus become Slurm's request for each launcher (the README's
# resource table). --gpus, --cpus and --mem are per node.

# hpc_map_resources: sets J_PROCS_PER_NODE (training processes per node), J_TASKS_PER_NODE
# (Slurm tasks per node), J_CPUS (per node) and J_CPUS_PER_TASK from J_LAUNCHER, J_GPUS,
# OPT_CPUS and OPT_PROCS_PER_NODE.
hpc_map_resources() {
  # One process per GPU; on CPU, --procs-per-node (default 1).
  J_PROCS_PER_NODE=$((J_GPUS > 0 ? J_GPUS : 10#${OPT_PROCS_PER_NODE:-1}))
  case $J_LAUNCHER in
    lightning | script)
      # One Slurm task per process: ranks come from srun.
      J_TASKS_PER_NODE=$J_PROCS_PER_NODE
      ;;
    *)
      # none: the command itself; torchrun and dask: one launcher task per node
      # that starts the node's processes or workers itself.
      J_TASKS_PER_NODE=1
      ;;
  esac
  local per_node_default=$((J_PROCS_PER_NODE * HPC_DEFAULT_CPUS_PER_TASK))
  J_CPUS=$((10#${OPT_CPUS:-$per_node_default}))
  if ((J_CPUS % J_TASKS_PER_NODE != 0)); then
    die "--cpus $J_CPUS cannot be shared evenly by the $J_TASKS_PER_NODE tasks per node of the $J_LAUNCHER launcher (one per GPU or process): use a multiple of $J_TASKS_PER_NODE"
  fi
  J_CPUS_PER_TASK=$((J_CPUS / J_TASKS_PER_NODE))
}

# hpc_gpu_directive: the GPU request as one sbatch option ("" for a CPU job).
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
