#!/bin/bash
# Runs as every srun task of a distributed launcher:
#   task_wrapper.sh plain|ranks COMMAND_LINE
# "ranks" exports torch.distributed's variables from Slurm's (for hand-written
# torch.distributed code); "plain" leaves them to the program (Lightning reads Slurm's).
# Then runs COMMAND_LINE with bash, as on a laptop.
mode=${1:?usage: task_wrapper.sh plain|ranks COMMAND_LINE}
line=${2:?usage: task_wrapper.sh plain|ranks COMMAND_LINE}
if [[ $mode == ranks ]]; then
  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID
  export NODE_RANK=$SLURM_NODEID GROUP_RANK=$SLURM_NODEID
  export LOCAL_WORLD_SIZE=${HPC_TASKS_PER_NODE:-1}
fi
exec bash -c "$line"
