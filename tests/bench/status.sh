#!/usr/bin/env bash
# Summary: `hpc status` side by side in one run with the raw Slurm call it makes, on the
# local cluster: over 1,000 submissions (900 single jobs and 100 arrays of 4, each made by
# job_submitter.sh, held) against the one raw `sacct` call for all their jobs; and of one
# 20,000-task submission, held (20,000 PENDING rows) and then cancelled (20,000 CANCELLED
# rows), against raw `sacct` of its jobs. Every job is cancelled at the end. Prints
# medians and ratios; asserts nothing. (UNKNOWN rows while tasks run: job_side.sh.)
#
# Usage: bash tests/bench/status.sh [REPEATS]    (default 7)
#
# From a fresh clone: as root, bash tests/setup/install_deps.sh and
# bash tests/cluster/local_cluster.sh start; then as a normal user, as researchers are:
#   runuser -u hpcalice -- bash tests/bench/status.sh
# Making the 1,000 submissions takes about a minute.
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-7}
bench_setup status
cd "$BENCH_PROJECT"
ledger=$SCRATCH/project/hpc_outputs/jobs/submissions.tsv
printf 'true\n' >one.txt
printf 'true\ntrue\ntrue\ntrue\n' >four.txt
for i in $(seq 0 19999); do printf 'python examples/train.py --lr 0.%05d\n' "$i"; done >twenty.txt
hold=(--sbatch-option=--hold --cluster local --venv none)
# The ledger's job ids (its second column) since line $1: cancelled by number, in one call.
ids_since() { tail -n "+$1" "$ledger" | cut -f2 | paste -sd, -; }
cancel_since() {
  local -a ids
  IFS=, read -r -a ids <<<"$(ids_since "$1")"
  ((${#ids[@]} == 0)) || scancel "${ids[@]}" 2>/dev/null || true
}
trap 'cancel_since 1; bench_cleanup' EXIT

t0=$(now_ms)
for ((i = 0; i < 1000; i++)); do
  configs=one.txt
  ((i % 10 != 9)) || configs=four.txt
  bash hpc_files/job_submitter.sh --configs "$configs" -e "hpc_bench_$i" "${hold[@]}" >/dev/null
  ((i % 250 != 249)) || echo "  $((i + 1)) submissions made ($((($(now_ms) - t0) / 1000)) s)" >&2
done
list=$(ids_since 1)

raw=() tool=()
for ((r = 0; r < repeats; r++)); do
  raw+=("$(time_ms sacct -D -X -P -n -o JobID,State,ExitCode,Elapsed,NodeList,JobName,Submit -j "$list")")
  tool+=("$(time_ms bench_hpc status --last 1000 --scratch-dir "$SCRATCH/project")")
done
rows=$(bench_hpc status --last 1000 --scratch-dir "$SCRATCH/project" | awk '$3 == "PENDING"' | wc -l)
unknown=$(bench_hpc status --last 1000 --scratch-dir "$SCRATCH/project" | awk '$3 == "UNKNOWN"' | wc -l)
cancel_since 1

# One submission of 20,000 tasks (MaxArraySize splits it into arrays).
first=$(($(wc -l <"$ledger") + 1))
bash hpc_files/job_submitter.sh --configs twenty.txt -e hpc_bench_20k "${hold[@]}" >/dev/null
big=$(ids_since "$first")
pend_raw=() pend=() done_raw=() done_tool=()
for ((r = 0; r < repeats; r++)); do
  pend_raw+=("$(time_ms sacct -D -X -P -n -o JobID,State,ExitCode,Elapsed,NodeList,JobName,Submit -j "$big")")
  pend+=("$(time_ms bench_hpc status hpc_bench_20k --scratch-dir "$SCRATCH/project")")
done
cancel_since "$first"
sleep 2
for ((r = 0; r < repeats; r++)); do
  done_raw+=("$(time_ms sacct -D -X -P -n -o JobID,State,ExitCode,Elapsed,NodeList,JobName,Submit -j "$big")")
  done_tool+=("$(time_ms bench_hpc status hpc_bench_20k --scratch-dir "$SCRATCH/project")")
done
big_rows=$(bench_hpc status hpc_bench_20k --scratch-dir "$SCRATCH/project" | awk '$3 == "CANCELLED"' | wc -l)

r=$(median "${raw[@]}") t=$(median "${tool[@]}")
printf 'hpc status benchmark as %s (medians of %d), load %s\n' "$(id -un)" "$repeats" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  1,000 submissions (%d task rows PENDING, %d UNKNOWN): hpc status %s ms | raw sacct %s ms | %sx (target: under 500 ms)\n' \
  "$rows" "$unknown" "$t" "$r" "$(ratio "$t" "$r")"
r=$(median "${pend_raw[@]}") t=$(median "${pend[@]}")
printf '  one 20,000-task submission, held: hpc status %s ms | raw sacct %s ms | %sx (target: under 1,000 ms)\n' \
  "$t" "$r" "$(ratio "$t" "$r")"
r=$(median "${done_raw[@]}") t=$(median "${done_tool[@]}")
printf '  the same, cancelled (%d rows CANCELLED): hpc status %s ms | raw sacct %s ms | %sx (target: under 1,000 ms)\n' \
  "$big_rows" "$t" "$r" "$(ratio "$t" "$r")"
