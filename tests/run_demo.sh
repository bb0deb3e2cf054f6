#!/usr/bin/env bash
# Summary: set everything up and run the example jobs on the local Slurm cluster.
#
# Usage: bash tests/run_demo.sh
# Installs what is missing (tests/setup/install_deps.sh), starts the local cluster
# (tests/cluster/local_cluster.sh), then submits through hpc_files/job_submitter.sh with
# the "local" profile: experiment_configurations.txt (a 2-task array of examples/train.py),
# and the Lightning DDP example on 2 nodes (examples/lightning_ddp.txt). Waits, and shows
# each job's record in sacct and its logs. SCRATCH defaults to /tmp/hpc_demo_scratch here.
# The jobs run with the venv install_deps.sh made (HPC_TEST_VENV, default
# /opt/hpc_files/test-venv: torch CPU, Lightning, wandb, Dask, hpc_toolkit), passed as
# --venv, whatever the clone's own .venv holds. The cluster starts as the tests start it
# (each node its own disk at /localscratch), so the test command that follows reuses it.
# Run it again at will: each run starts its experiments over (--fresh).
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
venv=${HPC_TEST_VENV:-/opt/hpc_files/test-venv}
export HPC_TEST_VENV=$venv
bash tests/setup/install_deps.sh
eval "$(HPC_LOCAL_NODE_DISKS=${HPC_LOCAL_NODE_DISKS:-pernode} bash tests/cluster/local_cluster.sh start)"
export SCRATCH=${SCRATCH:-/tmp/hpc_demo_scratch}
mkdir -p "$SCRATCH"

# run_and_show EXP ARGS...: submit, wait, show sacct and the logs; fails if a task failed.
run_and_show() {
  local exp=$1 out job log logs found
  shift
  local args=(--cluster local --venv "$venv" --exp-name "$exp" --fresh "$@")
  printf '\n+ bash hpc_files/job_submitter.sh %s\n' "${args[*]}"
  # --fresh: a second demo starts over, the first one's checkpoints kept aside (a run's
  # checkpoints are its own: without it the new submission is refused, docs/requeue.md).
  out=$(bash hpc_files/job_submitter.sh "${args[@]}")
  printf '%s\n' "$out"
  job=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out")
  # the log (or the array's logs: <task> stands for each task) as the submission printed it
  logs=$(sed -n 's/^  logs\{0,1\}: *//p' <<<"$out")
  logs=${logs//<task>/*}
  printf 'waiting for job %s' "$job"
  while [[ -n $(squeue -h -j "$job" -o %i 2>/dev/null) ]]; do
    printf '.'
    sleep 1
  done
  echo
  sleep 4 # slurmdbd records the end a few seconds after the queue empties
  sacct -X -j "$job" -o JobID,JobName,Partition,State,ExitCode,Elapsed,NodeList
  mapfile -t found < <(compgen -G "$logs" || true)
  for log in "${found[@]}"; do
    printf '\n==> %s <==\n' "$log"
    cat -- "$log"
  done
  ! sacct -X -n -P -j "$job" -o State | grep -qv COMPLETED
}

run_and_show demo --cpus 1 --time 00:10:00
run_and_show demo_ddp --configs examples/lightning_ddp.txt --which-distributed lightning \
  --num-nodes 2 --cpus 1 --time 00:10:00
