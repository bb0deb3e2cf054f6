#!/usr/bin/env bash
# Summary: LINES lines of a 2-second program (sleep 2) on the local cluster (4 nodes x 4
# CPUs = 16 slots), side by side in one run: one array task per line (--cpus 1), --pack 4
# (--cpus 4: 4 lines at once per job, 4 lines per job) and --pack 4 --lines-per-job K.
# Prints, for each, the time from submission to all done, the Slurm jobs (array tasks)
# it made, and the ratio to the ideal LINES x 2 s / 16 slots and to one task per line.
# Goal: packed within 1.2x of the ideal, well ahead of one task per line.
# Raw Slurm's floor, in the same run: `sbatch --array` of the bare program, one task per
# line and 4 per task (4 CPUs, the 4 in the background).
# Then the same two (one task per line, --pack 4) with --data: a DATA_MIB MiB dataset that
# every job extracts into its node-local $SLURM_TMPDIR, a per-job cost that packing pays
# once for 4 lines (this cluster starts a bare job in well under a second on 2 cores, so
# without such a cost 50 jobs of 4 lines cost what 200 jobs of 1 do).
#
# Usage: bash tests/bench/pack.sh [LINES] [K] [DATA_MIB]
#        (defaults 200, LINES/4: one job per node, and 32; DATA_MIB 0: no --data rows)
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

lines=${1:-200}
per_job=${2:-$(((lines + 3) / 4))} # one job per node: 4 jobs of 4 slots
data_mib=${3:-32}
slots=16 run_s=2
bench_setup pack
cd "$BENCH_PROJECT"
for ((i = 0; i < lines; i++)); do printf 'sleep %d\n' "$run_s"; done >experiment_configurations.txt

# wait_gone ID: until no task of job ID is left in the queue.
wait_gone() {
  while [[ -n $(squeue -h -j "$1" -o %i 2>/dev/null) ]]; do sleep 0.2; done
}

# jobs_made ID EXPECTED: how many Slurm jobs (array tasks) ID made, as sacct counts them
# (its records come a few seconds after the queue empties: waits up to 30 s for EXPECTED).
jobs_made() {
  local n=0 i
  for ((i = 0; i < 60; i++)); do
    n=$(sacct -X -n -P -j "$1" -o JobID,State 2>/dev/null | grep -cvE '\|(PENDING|RUNNING|REQUEUED)$|\[' || true)
    ((n < $2)) || break
    sleep 0.5
  done
  printf '%s\n' "$n"
}

# measure NAME ARGS...: submit with ARGS, wait for every task; sets SECONDS_<NAME>, JOBS_<NAME>.
measure() {
  local name=$1 t0 t1 out id
  shift
  t0=$(now_ms)
  out=$(bash hpc_files/job_submitter.sh --exp-name hpc_bench --cluster local --venv none \
    --no-requeue --time 30 "$@" 2>&1) || { echo "$out" >&2; return 1; }
  id=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out" | tail -n 1)
  wait_gone "$id"
  t1=$(now_ms)
  printf -v "SECONDS_$name" '%s' "$(awk -v a="$t1" -v b="$t0" 'BEGIN {printf "%.1f", (a - b) / 1000}')"
  local expected
  expected=$(sed -n 's/^Submitted batch job [0-9]* (array of \([0-9]*\) task.*/\1/p' <<<"$out" | tail -n 1)
  printf -v "JOBS_$name" '%s' "$(jobs_made "$id" "${expected:-1}")"
  local failed
  failed=$(sacct -X -n -P -j "$id" -o State 2>/dev/null | grep -cv COMPLETED || true)
  ((failed == 0)) || echo "warning: $failed task(s) of $name did not complete" >&2
}

# raw NAME SBATCH_ARGS...: a bare array (--wrap), timed like measure (no jobs count).
raw() {
  local name=$1 t0 t1 id
  shift
  t0=$(now_ms)
  id=$(sbatch --parsable -J hpc_bench -o /dev/null --time 1 "$@") || return 1
  wait_gone "${id%%;*}"
  t1=$(now_ms)
  printf -v "SECONDS_$name" '%s' "$(awk -v a="$t1" -v b="$t0" 'BEGIN {printf "%.1f", (a - b) / 1000}')"
}

raw rawsingle -c 1 --array="0-$((lines - 1))" --wrap "sleep $run_s"
raw rawpack -c 4 --array="0-$(((lines + 3) / 4 - 1))" --wrap "for i in 1 2 3 4; do sleep $run_s & done; wait"
measure single --cpus 1
measure pack --pack 4 --cpus 4
measure packk --pack 4 --cpus 4 --lines-per-job "$per_job"
if ((data_mib > 0)); then
  # Incompressible, so that each job really extracts DATA_MIB MiB.
  mkdir -p "$SCRATCH/project/dataset"
  head -c "$((data_mib * 1048576))" /dev/urandom >"$SCRATCH/project/dataset/blob.bin"
  measure dsingle --cpus 1 --data dataset
  measure dpack --pack 4 --cpus 4 --data dataset
fi

ideal=$(awk -v l="$lines" -v r="$run_s" -v s="$slots" 'BEGIN {printf "%.1f", l * r / s}')
printf 'pack benchmark: %d lines of "sleep %d" on %d slots (4 nodes x 4 CPUs); ideal %s s\n' \
  "$lines" "$run_s" "$slots" "$ideal"
printf '  %-36s %8s %6s %9s %12s\n' "" "seconds" "jobs" "vs ideal" "vs per-line"
row() {
  printf '  %-36s %8s %6s %8sx %11sx\n' "$1" "$2" "$3" "$(ratio "$2" "$ideal")" "$(ratio "$2" "$SECONDS_single")"
}
row "raw sbatch --array, 1 per task" "$SECONDS_rawsingle" "$lines"
row "raw sbatch --array, 4 per task" "$SECONDS_rawpack" "$(((lines + 3) / 4))"
row "one array task per line (--cpus 1)" "$SECONDS_single" "$JOBS_single"
row "--pack 4 --cpus 4" "$SECONDS_pack" "$JOBS_pack"
row "--pack 4 --cpus 4 --lines-per-job $per_job" "$SECONDS_packk" "$JOBS_packk"
((data_mib > 0)) || exit 0
# shellcheck disable=SC2016 # the variable's name, printed
printf '  with --data (%d MiB extracted into $SLURM_TMPDIR by every job):\n' "$data_mib"
printf '  %-36s %8s %6s %9s %12s\n' "" "seconds" "jobs" "vs ideal" "vs per-line"
SECONDS_single=$SECONDS_dsingle
row "one array task per line (--cpus 1)" "$SECONDS_dsingle" "$JOBS_dsingle"
row "--pack 4 --cpus 4" "$SECONDS_dpack" "$JOBS_dpack"
