#!/usr/bin/env bash
# Summary: submit time of a 1,000-line configs file with 3 resource blocks ('#hpc:' lines:
# three arrays in one submission), against today's one-array submit of the same 1,000 lines
# and raw `sbatch --parsable` of the three arrays' batch scripts, in one run on the local
# cluster. Prints medians and ratios. Jobs are submitted held and cancelled.
#
# Usage: bash tests/bench/blocks.sh [REPEATS]    (default 15)
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-15}
bench_setup blocks
cd "$BENCH_PROJECT"
# The same 1,000 commands: as one block, and as three (lines 1-400 with the command line's
# options, 401-700 with 2 GPUs and 4 hours, 701-1000 on 2 nodes with Lightning).
line() { printf 'python examples/train.py --lr 0.%03d --name "run %d"\n' "$1" "$1"; }
for i in $(seq 0 999); do line "$i"; done >thousand.txt
{
  for i in $(seq 0 399); do line "$i"; done
  echo '#hpc: --gpus 2 --time 04:00:00 --mem 8G'
  for i in $(seq 400 699); do line "$i"; done
  echo '#hpc: --which-distributed lightning --num-nodes 2 --gpus 2'
  for i in $(seq 700 999); do line "$i"; done
} >blocks.txt
hold=(--sbatch-option=--hold -e hpc_bench --cluster local --cpus 2) # -e names the job (scancel -n)

# raw_three SCRIPT...: the three arrays by hand, one sbatch each.
raw_three() {
  local s
  for s in "$@"; do sbatch --parsable --hold "$s"; done
}

# The batch scripts job_submitter.sh wrote for the three blocks, for raw sbatch.
bash hpc_files/job_submitter.sh --configs blocks.txt "${hold[@]}" >/dev/null
mapfile -t scripts < <(find "$SCRATCH/project/hpc_outputs/jobs" -name "job-part[123].sbatch" | sort)
((${#scripts[@]} == 3)) || { echo "expected 3 batch scripts, found ${#scripts[@]}" >&2; exit 1; }
scancel -n hpc_bench 2>/dev/null || true
raw=() one=() blocks=()
for ((i = 0; i < repeats; i++)); do
  raw+=("$(time_ms raw_three "${scripts[@]}")")
  one+=("$(time_ms bash hpc_files/job_submitter.sh --configs thousand.txt "${hold[@]}")")
  blocks+=("$(time_ms bash hpc_files/job_submitter.sh --configs blocks.txt "${hold[@]}")")
  scancel -n hpc_bench 2>/dev/null || true
done

m_raw=$(median "${raw[@]}") m_one=$(median "${one[@]}") m_blocks=$(median "${blocks[@]}")
printf 'resource blocks benchmark (%d repeats, medians, local cluster)\n' "$repeats"
printf '  1,000 lines, 3 blocks: job_submitter.sh %5s ms (target: under 200 ms)\n' "$m_blocks"
printf '  vs today'"'"'s one array of the same 1,000 lines: %5s ms | ratio %sx\n' "$m_one" "$(ratio "$m_blocks" "$m_one")"
printf '  vs raw sbatch of the 3 batch scripts:         %5s ms | ratio %sx | overhead %s ms\n' \
  "$m_raw" "$(ratio "$m_blocks" "$m_raw")" "$(awk -v a="$m_blocks" -v b="$m_raw" 'BEGIN{print a-b}')"
