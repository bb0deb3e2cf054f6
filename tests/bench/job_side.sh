#!/usr/bin/env bash
# Summary: the job-side cost of a trivial array task, side by side in one run on the local
# cluster (4 nodes x 4 CPUs): 100 tasks of `true`, from submission to the last task gone
# from the queue, for raw `sbatch --array=0-99 --wrap true`, for job_submitter.sh (100
# lines of `true`, --venv none; the default partition cannot preempt, so no watch step),
# the same with HPC_PREEMPT_WATCH=yes (the watch step every task would start on a
# partition that can preempt), and submitit's map_array over 100 items (a Python process
# per task). Then one more untimed round of the toolkit, asking `hpc status` about it again
# and again while its tasks run: the most rows it showed UNKNOWN (it should be 0). Prints medians and
# ratios; asserts nothing.
#
# Usage: bash tests/bench/job_side.sh [REPEATS]    (default 3; about 20 s a round)
#
# From a fresh clone: as root, bash tests/setup/install_deps.sh (the venv, with submitit)
# and bash tests/cluster/local_cluster.sh start; then as a normal user, as researchers are:
#   runuser -u hpcalice -- bash tests/bench/job_side.sh
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-3}
bench_setup job_side
cd "$BENCH_PROJECT"
name=hpc_bench # every job's name (bench_cleanup cancels them)
for i in $(seq 100); do echo true; done >hundred.txt

# since_ms T0: milliseconds from T0 (now_ms) until no job of the benchmark is queued.
since_ms() {
  bench_wait_gone "$name"
  echo $(($(now_ms) - $1))
}

raw_run() {
  local t0
  t0=$(now_ms)
  sbatch --parsable -J "$name" --array=0-99 -o /dev/null --wrap true >/dev/null
  since_ms "$t0"
}

# tool_run [ENV...]: the toolkit's 100 tasks, with the environment ENV (NAME=VALUE).
tool_run() {
  local t0
  t0=$(now_ms)
  env "$@" bash hpc_files/job_submitter.sh --configs hundred.txt -e "$name" --cluster local --venv none >/dev/null
  since_ms "$t0"
}

# unknown_run: the toolkit's 100 tasks once more, untimed, asking hpc status about them
# until they are gone: the most rows it showed UNKNOWN.
unknown_run() {
  local n most=0
  bash hpc_files/job_submitter.sh --configs hundred.txt -e "$name" --cluster local --venv none >/dev/null
  while [[ -n $(squeue -h -n "$name" -o %i 2>/dev/null) ]]; do
    n=$(bench_hpc status "$name" --scratch-dir "$SCRATCH/project" 2>/dev/null | awk '$3 == "UNKNOWN"' | wc -l)
    ((n <= most)) || most=$n
  done
  echo "$most"
}

submitit_run() {
  local t0
  t0=$(now_ms)
  "$BENCH_VENV/bin/python" - "$BENCH_TMP/submitit" "$name" <<'PY'
import sys, submitit
ex = submitit.AutoExecutor(folder=sys.argv[1])
ex.update_parameters(slurm_partition="tmpdir", timeout_min=10, name=sys.argv[2], cpus_per_task=1)
ex.map_array(int, range(100))
PY
  since_ms "$t0"
}

have_submitit=0
"$BENCH_VENV/bin/python" -c 'import submitit' 2>/dev/null && have_submitit=1
raw=() tool=() watch=() sub=()
for ((r = 0; r < repeats; r++)); do
  raw+=("$(raw_run)")
  tool+=("$(tool_run)")
  watch+=("$(tool_run HPC_PREEMPT_WATCH=yes)")
  ((have_submitit == 0)) || sub+=("$(submitit_run)")
done
unknown=$(unknown_run)

m_raw=$(median "${raw[@]}") m_tool=$(median "${tool[@]}") m_watch=$(median "${watch[@]}")
printf 'job-side benchmark as %s: 100 tasks of true on 16 CPU slots (medians of %d), load %s\n' \
  "$(id -un)" "$repeats" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  raw sbatch --array %s ms | job_submitter.sh %s ms (%sx; target: within 2x) | with the preemption watch %s ms (%sx)\n' \
  "$m_raw" "$m_tool" "$(ratio "$m_tool" "$m_raw")" "$m_watch" "$(ratio "$m_watch" "$m_raw")"
if ((${#sub[@]})); then
  m_sub=$(median "${sub[@]}")
  printf '  submitit map_array %s ms (%sx of raw; job_submitter.sh is %sx of it)\n' \
    "$m_sub" "$(ratio "$m_sub" "$m_raw")" "$(ratio "$m_tool" "$m_sub")"
else
  printf '  submitit: not in %s (pip install submitit to compare)\n' "$BENCH_VENV"
fi
printf '  hpc status asked again and again while the tasks ran (another round, untimed): at most %s task row(s) UNKNOWN (target: 0)\n' \
  "$unknown"
