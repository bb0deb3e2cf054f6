#!/usr/bin/env bats
# Submitting -d lightning with more than one process in all and requeue on: a plain note
# on stderr about Lightning's own auto-requeue (it hangs in DDP) and what the job does
# instead; the job side puts the hook on PYTHONPATH. On the cluster: requeue_programs.bats.

load ../helpers/common

setup() {
  hermetic_env
  make_project proj 'python examples/lightning_ddp.py'
}

@test "-d lightning, 2 processes: the note names SlurmRequeue and --no-requeue" {
  run --separate-stderr submitter -d lightning --procs-per-node 2 --cluster local --venv none -n
  [ "$status" -eq 0 ]
  [[ $stderr == *"note: Lightning's built-in SLURM auto-requeue can hang in DDP (2 processes)"* ]]
  [[ $stderr == *"SlurmRequeue"* && $stderr == *"--no-requeue"* ]]
  HPC_LIGHTNING_HOOK=no run --separate-stderr submitter -d lightning --num-nodes 2 --cluster local --venv none -n
  [[ $stderr == *"HPC_LIGHTNING_HOOK=no keeps it: add hpc_toolkit's SlurmRequeue callback"* ]]
}

@test "no note for one process, --no-requeue, or another launcher" {
  local args
  for args in "-d lightning" "-d lightning --procs-per-node 2 --no-requeue" "-d script --procs-per-node 2"; do
    # shellcheck disable=SC2086 # the options as words
    run --separate-stderr submitter $args --cluster local --venv none -n
    [ "$status" -eq 0 ]
    [[ $stderr != *"auto-requeue"* ]]
  done
}

@test "job side: the hook goes on PYTHONPATH unless HPC_LIGHTNING_HOOK=no; its requeue part for a requeueable lightning job only" {
  # shellcheck disable=SC2016 # expanded by the inner shell
  run bash -c 'hpc_log() { echo "LOG $*"; }
    source "$1/virtual_env_hpc_files/job_runtime.sh"
    HPC_NUM_NODES=2 HPC_DEVICES_PER_NODE=1 HPC_REQUEUE=yes PYTHONPATH=/mine
    hpc_python_hook; hpc_lightning_requeue_hook; echo "PP=$PYTHONPATH RQ=${HPC_LIGHTNING_REQUEUE:-}"
    unset HPC_LIGHTNING_REQUEUE
    HPC_REQUEUE=no PYTHONPATH=/mine; hpc_python_hook; hpc_lightning_requeue_hook
    echo "PP=$PYTHONPATH RQ=${HPC_LIGHTNING_REQUEUE:-}"
    HPC_LIGHTNING_HOOK=no PYTHONPATH=/mine; hpc_python_hook; echo "PP=$PYTHONPATH"' _ "$REPO_ROOT"
  [ "$status" -eq 0 ]
  [[ $output == *"PP=$REPO_ROOT/virtual_env_hpc_files/python_hooks:/mine RQ=yes"* ]]
  [[ $output == *"PP=$REPO_ROOT/virtual_env_hpc_files/python_hooks:/mine RQ="$'\n'* ]]
  [[ $output == *"PP=/mine"* ]]
  [[ $output == *"SlurmRequeue"* ]]
}
