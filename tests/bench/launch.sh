#!/usr/bin/env bash
# Summary: time from job start to the first training step of the 2-node Lightning example
# (CPU, gloo) through job_submitter.sh --which-distributed lightning, against a
# hand-written sbatch + srun of the same script, on the local cluster. Prints medians and
# the ratio (target: under 1.1x). Job start is Slurm's StartTime (whole seconds), the
# first step the example's own clock: each figure is +-1 s, hence the repeats.
#
# Usage: bash tests/bench/launch.sh [REPEATS]    (default 3)
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-3}
bench_setup launch
cd "$BENCH_PROJECT"
printf 'python examples/lightning_ddp.py --max-steps 5\n' >experiment_configurations.txt

cat >handwritten.sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=hpc_bench
#SBATCH --partition=tmpdir
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --time=10
#SBATCH --output=$BENCH_TMP/handwritten-%j.out
source "$BENCH_PROJECT/.venv/bin/activate"
cd "$BENCH_PROJECT"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=\$((20000 + SLURM_JOB_ID % 10000))
# By hand, the node and device counts are given on the command line.
srun python examples/lightning_ddp.py --max-steps 5 --num_nodes 2 --devices 1 --accelerator cpu
EOF

# wait_done ID: until the job has left the queue.
wait_done() {
  while [[ -n $(squeue -h -j "$1" -o %i 2>/dev/null) ]]; do sleep 0.5; done
}

# startup ID LOG: seconds from the job's StartTime to its first training step.
startup() {
  local start first
  start=$(date -d "$(scontrol show job "$1" -o | tr ' ' '\n' | sed -n 's/^StartTime=//p')" +%s)
  first=$(sed -n 's/^\[train\] step 0 at \([0-9.]*\)$/\1/p' "$2" | head -n 1)
  [[ -n $first ]] || { echo "no first step in $2" >&2; cat "$2" >&2; return 1; }
  awk -v a="$first" -v b="$start" 'BEGIN {printf "%.2f", a - b}'
}

tool=() hand=()
for ((i = 0; i < repeats; i++)); do
  out=$(bash hpc_files/job_submitter.sh --which-distributed lightning --num-nodes 2 --cpus 1 \
    --time 10 --exp-name hpc_bench --cluster local)
  id=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out")
  wait_done "$id"
  tool+=("$(startup "$id" "$SCRATCH/project/hpc_outputs/hpc_bench-$id.out")")
  id=$(sbatch --parsable handwritten.sbatch)
  wait_done "$id"
  hand+=("$(startup "$id" "$BENCH_TMP/handwritten-$id.out")")
done
m_tool=$(median "${tool[@]}") m_hand=$(median "${hand[@]}")
printf 'launch benchmark: job start to first training step, 2-node Lightning DDP on CPU (%d repeats, medians)\n' "$repeats"
printf '  hand-written sbatch + srun: %s s (%s)\n' "$m_hand" "${hand[*]}"
printf '  job_submitter.sh lightning: %s s (%s)\n' "$m_tool" "${tool[*]}"
printf '  ratio %sx, toolkit adds %s s (target: under 1.1x)\n' "$(ratio "$m_tool" "$m_hand")" \
  "$(awk -v a="$m_tool" -v b="$m_hand" 'BEGIN {printf "%.2f", a - b}')"
