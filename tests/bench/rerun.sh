#!/usr/bin/env bash
# Summary: `job_submitter.sh --rerun` of a 20,000-task submission whose every task ended
# unfinished (held, then cancelled: 20,000 CANCELLED), side by side in one run with the raw
# Slurm floor of the same work by hand (one `sacct` of its jobs, then `sbatch --array` of
# each kept script for the tasks to run again). Times the plan (--dry-run) and the real
# rerun (its jobs held through SBATCH_HOLD, then cancelled; each round reruns the previous
# round's rerun, as a chain of reruns goes). submitit has no rerun of an array's failed
# tasks: nothing to compare there. Prints medians and ratios; asserts nothing.
#
# Usage: bash tests/bench/rerun.sh [REPEATS]    (default 5)
#
# From a fresh clone: as root, bash tests/setup/install_deps.sh and
# bash tests/cluster/local_cluster.sh start; then as a normal user, as researchers are:
#   runuser -u hpcalice -- bash tests/bench/rerun.sh
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-5}
bench_setup rerun
cd "$BENCH_PROJECT"
name=hpc_bench # the experiment, and so every job's name (bench_cleanup cancels them)
for i in $(seq 0 19999); do printf 'python examples/train.py --lr 0.%05d\n' "$i"; done >twenty.txt
ledger=$SCRATCH/project/hpc_outputs/jobs/submissions.tsv
jobs_of() { tail -n "+$1" "$ledger" | cut -f2 | paste -sd, -; }

bash hpc_files/job_submitter.sh --configs twenty.txt -e "$name" --cluster local --venv none \
  --sbatch-option=--hold >/dev/null
ids=$(jobs_of 1)
mapfile -t scripts < <(cut -f5 "$ledger")
scancel -n "$name"
sleep 2 # accounting records the cancel

# The floor: what the same rerun takes by hand.
# (a split array's scripts each run their own lines: their --array from the script)
raw_rerun() {
  local s spec
  sacct -D -X -P -n -o JobID,State,ExitCode -j "$ids" >/dev/null
  for s in "${scripts[@]}"; do
    spec=$(sed -n 's/^#SBATCH --array="\{0,1\}\([0-9,-]*\).*/\1/p' "$s")
    sbatch --parsable --hold --array="$spec" "$s" >/dev/null
  done
  scancel -n "$name"
}

first=${ids%%,*}
raw=() plan=() real=()
for ((r = 0; r < repeats; r++)); do
  raw+=("$(time_ms raw_rerun)")
  plan+=("$(time_ms bash hpc_files/job_submitter.sh --rerun "$first" --dry-run)")
  line=$(($(wc -l <"$ledger") + 1))
  real+=("$(SBATCH_HOLD=1 time_ms bash hpc_files/job_submitter.sh --rerun "$first" --yes)")
  first=$(jobs_of "$line")
  first=${first%%,*}
  scancel -n "$name"
  sleep 2
done
tasks=$(bash hpc_files/job_submitter.sh --rerun "$first" --dry-run 2>/dev/null | grep -c '^  task ')

r=$(median "${raw[@]}") p=$(median "${plan[@]}") t=$(median "${real[@]}")
printf 'rerun benchmark as %s (medians of %d), load %s\n' "$(id -un)" "$repeats" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  --rerun of 20,000 cancelled tasks (%d listed): plan (--dry-run) %s ms, real %s ms | by hand (sacct + sbatch --array) %s ms | %sx (target: plan under 2,000 ms; before this round 18 min 35 s)\n' \
  "$tasks" "$p" "$t" "$r" "$(ratio "$t" "$r")"
