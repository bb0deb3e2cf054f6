#!/usr/bin/env bash
# Summary: set everything up and run the example job on the local Slurm cluster.
#
# Usage: bash tests/run_demo.sh
# Installs what is missing (tests/setup/install_deps.sh), starts the local cluster
# (tests/cluster/local_cluster.sh), submits experiment_configurations.txt through
# hpc_files/job_submitter.sh with the "local" profile, waits, and shows the logs and the
# job's record in sacct. SCRATCH defaults to /tmp/hpc_demo_scratch here.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
bash tests/setup/install_deps.sh
eval "$(bash tests/cluster/local_cluster.sh start)"
export SCRATCH=${SCRATCH:-/tmp/hpc_demo_scratch}
mkdir -p "$SCRATCH"

echo "+ bash hpc_files/job_submitter.sh --cluster local --cpus 1 --time 00:10:00 --exp-name demo"
out=$(bash hpc_files/job_submitter.sh --cluster local --cpus 1 --time 00:10:00 --exp-name demo)
printf '%s\n' "$out"
job=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out")

printf 'waiting for job %s' "$job"
while [[ -n $(squeue -h -j "$job" -o %i 2>/dev/null) ]]; do
  printf '.'
  sleep 1
done
echo
sleep 1 # slurmdbd records the end a moment after the queue empties
sacct -X -j "$job" -o JobID,JobName,Partition,State,ExitCode,Elapsed,NodeList
for log in "$SCRATCH/${root##*/}/hpc_outputs/demo-$job"*.out; do
  printf '\n==> %s <==\n' "$log"
  cat -- "$log"
done
! sacct -X -n -P -j "$job" -o State | grep -qv COMPLETED
