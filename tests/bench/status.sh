#!/usr/bin/env bash
# Summary: `hpc status` over 1,000 submissions (one call to sacct for all of them), against
# the raw `sacct` call it makes, on the local cluster. Prints medians and the ratio.
# The jobs are submitted held (900 single jobs, 100 arrays of 4) and cancelled at the end.
#
# Usage: bash tests/bench/status.sh [REPEATS]    (default 7)
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-7}
bench_setup status
ledger=$SCRATCH/project/hpc_outputs/jobs/submissions.tsv
mkdir -p "${ledger%/*}"
ids=()
for ((i = 0; i < 1000; i++)); do
  if ((i % 10 == 9)); then
    id=$(sbatch --parsable --hold -J hpc_bench --array=0-3 -o /dev/null --wrap true)
    n=4 log=$SCRATCH/project/hpc_outputs/b$i-%A_%a.out
  else
    id=$(sbatch --parsable --hold -J hpc_bench -o /dev/null --wrap true)
    n=1 log=$SCRATCH/project/hpc_outputs/b$i-%j.out
  fi
  ids+=("${id%%;*}")
  printf '%(%Y-%m-%dT%H:%M:%S%z)T\t%s\tb%d\t%d\t%s\tb%d-s\tjob\t0\t%s\n' -1 "${id%%;*}" "$i" "$n" \
    "$SCRATCH/project/hpc_outputs/jobs/b$i.sbatch" "$i" "$log"
done >"$ledger"
list=$(IFS=,; echo "${ids[*]}")

raw=() tool=()
for ((r = 0; r < repeats; r++)); do
  raw+=("$(time_ms sacct -X -P -n -o JobID,State,ExitCode,Elapsed,NodeList -j "$list")")
  tool+=("$(time_ms "$BENCH_VENV/bin/hpc" status --last 1000 --scratch-dir "$SCRATCH/project")")
done
rows=$("$BENCH_VENV/bin/hpc" status --last 1000 --scratch-dir "$SCRATCH/project" | awk '$3 == "PENDING"' | wc -l)
scancel -n hpc_bench 2>/dev/null || true
r=$(median "${raw[@]}") t=$(median "${tool[@]}")
printf 'hpc status, 1,000 submissions (%d task rows, all PENDING): %s ms (median of %d)\n' "$rows" "$t" "$repeats"
printf 'raw sacct for the same jobs:                                   %s ms\n' "$r"
printf 'ratio hpc status / sacct: %s\n' "$(ratio "$t" "$r")"
