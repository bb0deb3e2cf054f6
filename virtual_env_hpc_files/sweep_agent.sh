#!/bin/bash
# Job side of hpc_files' W&B sweeps: the command of every array task of a sweep
# (hpc_files/lib/sweep.sh writes these lines; the job runs them from the project folder).
#
#   sweep_agent.sh online ENTITY/PROJECT/ID --count N [--delay S]
#       wait S seconds (agents that start together do not hit the W&B API at once), then
#       `wandb agent --count N ENTITY/PROJECT/ID`
#   sweep_agent.sh online ENTITY/PROJECT/ID --count N --per-gpu --stagger S
#       one agent per GPU of every node of the job (srun), each pinned to its GPU
#   sweep_agent.sh offline SWEEP_FOLDER
#       point $HPC_TASK_INDEX of an offline sweep (python -m hpc_toolkit.sweep.agent)
#
# The W&B API key is in the environment (job_runtime.sh read it from the job's key file);
# it is never printed and never passed on a command line.
set -euo pipefail

HERE=${BASH_SOURCE[0]%/*}
[[ $HERE != "${BASH_SOURCE[0]}" ]] || HERE=.
HERE=$(cd -- "$HERE" && pwd)
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "$HERE/job_lib.sh"

# pin_gpu: this srun task (SLURM_LOCALID) keeps one of the node's GPUs.
pin_gpu() {
  local gpus=${CUDA_VISIBLE_DEVICES:-${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-}}} ids
  IFS=, read -r -a ids <<<"$gpus"
  local i=${SLURM_LOCALID:-0}
  ((i < ${#ids[@]})) || hpc_fail "agent $i of node ${SLURMD_NODENAME:-?} has no GPU of its own (GPUs seen: '${gpus}')" 2
  export CUDA_VISIBLE_DEVICES=${ids[i]}
  # The agents are independent programs, not ranks of one: hide the step's task count,
  # or Lightning would see SLURM_NTASKS and wait for a distributed job that never forms.
  export HPC_AGENT_RANK=${SLURM_PROCID:-0}
  unset SLURM_NTASKS SLURM_NPROCS SLURM_PROCID SLURM_LOCALID SLURM_NODEID \
    SLURM_STEP_NUM_TASKS SLURM_TASKS_PER_NODE SLURM_NTASKS_PER_NODE
}

online() {
  local id=$1 count="" delay=0 stagger=0 per_gpu=0 task=0
  shift
  while (($#)); do
    case $1 in
      --count) count=$2 && shift ;;
      --delay) delay=$2 && shift ;;
      --stagger) stagger=$2 && shift ;;
      --per-gpu) per_gpu=1 ;;
      --agent-task) task=1 ;;
      *) hpc_fail "sweep_agent.sh online: unknown argument $1" 2 ;;
    esac
    shift
  done
  if ((per_gpu && !task)); then
    hpc_log "starting $((HPC_NUM_NODES * HPC_TASKS_PER_NODE)) agent(s): one per GPU on each of $HPC_NUM_NODES node(s)"
    local argv=(online "$id" --count "$count" --per-gpu --stagger "$stagger" --agent-task)
    # No --kill-on-bad-exit: one agent that stops leaves the others working.
    exec srun --nodes="$HPC_NUM_NODES" --ntasks-per-node="$HPC_TASKS_PER_NODE" \
      --cpus-per-task="$HPC_CPUS_PER_TASK" bash "${BASH_SOURCE[0]}" "${argv[@]}"
  fi
  if ((task)); then
    delay=$((${SLURM_PROCID:-0} * stagger))
    pin_gpu
  fi
  if ((delay > 0)); then
    hpc_log "agent waits ${delay} s before starting (stagger: agents do not call W&B all at once)"
    sleep "$delay"
  fi
  command -v wandb >/dev/null || hpc_fail "wandb is not installed in the job's environment: pip install wandb in the venv" 2
  hpc_log "agent for sweep $id, up to $count run(s)${CUDA_VISIBLE_DEVICES:+, GPU $CUDA_VISIBLE_DEVICES}: wandb agent --count $count $id"
  exec wandb agent --count "$count" "$id"
}

offline() {
  local folder=$1 py
  py=$(command -v python || command -v python3) || hpc_fail "no python in the job's environment (the venv?)" 2
  # The toolkit's own python/ (next to this file) goes first for this process only; the
  # run it starts gets the job's environment unchanged.
  exec "$py" -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from hpc_toolkit.sweep.agent import main; sys.exit(main(sys.argv[1:]))' \
    "$HERE/../python" "$folder"
}

case ${1:-} in
  online) shift && (($#)) && online "$@" ;;
  offline) shift && (($# == 1)) && offline "$1" ;;
  *) hpc_fail "usage: sweep_agent.sh online ENTITY/PROJECT/ID --count N ... | offline SWEEP_FOLDER" 2 ;;
esac
hpc_fail "usage: sweep_agent.sh online ENTITY/PROJECT/ID --count N ... | offline SWEEP_FOLDER" 2
