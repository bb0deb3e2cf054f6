#!/usr/bin/env bash
# Summary: submit time of job_submitter.sh, side by side in one run on the local cluster
# with raw `sbatch --parsable` of the same batch script and with submitit (Python start-up
# included, as a researcher runs it): one job (a new experiment each time; an experiment
# submitted again, which asks squeue whether its earlier job still runs; the same asking
# Slurm's settings too); a 1,000-line configs file (dry run and real)
# against `sbatch --array=0-999` and submitit's map_array over 1,000 items; a 20,000-line
# file (dry run and real) against raw sbatch of the same arrays (MaxArraySize splits it).
# Every job is submitted held and cancelled. Prints medians and ratios; asserts nothing.
#
# Usage: bash tests/bench/submit.sh [REPEATS]    (default 15; the 20,000-line rows: REPEATS/3)
#
# From a fresh clone: as root, bash tests/setup/install_deps.sh (the venv, with submitit) and
# bash tests/cluster/local_cluster.sh start; then run it as a normal user, as researchers
# are (the clone must be readable by that user):
#   runuser -u hpcalice -- bash tests/bench/submit.sh
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-15}
big_repeats=$((repeats / 3 > 3 ? repeats / 3 : 3))
bench_setup submit
cd "$BENCH_PROJECT"
printf 'python examples/train.py --lr 0.1\n' >one.txt
for i in $(seq 0 999); do printf 'python examples/train.py --lr 0.%03d --name "run %d"\n' "$i" "$i"; done >thousand.txt
for i in $(seq 0 19999); do printf 'python examples/train.py --lr 0.%05d --name "run %d"\n' "$i" "$i"; done >twenty.txt
# Each case its own experiment (a queued submission of an experiment refuses the next one);
# the job name is the experiment's, so scancel -n finds them.
names=(hpc_bench hpc_bench_one hpc_bench_k hpc_bench_20k)
hold=(--sbatch-option=--hold --cluster local)
tool() { bash hpc_files/job_submitter.sh "${hold[@]}" "$@"; }
cancel() {
  local n
  for n in "${names[@]}"; do scancel -n "$n" 2>/dev/null || true; done
}

# The same batch scripts, for raw sbatch: the ones job_submitter.sh wrote.
tool --configs one.txt -e hpc_bench_one >/dev/null
tool --configs twenty.txt -e hpc_bench_20k >/dev/null
cancel
jobs=$SCRATCH/project/hpc_outputs/jobs
script=$(find "$jobs" -path '*/hpc_bench_one-*/job*.sbatch' -print -quit)
mapfile -t big_scripts < <(find "$jobs" -path '*/hpc_bench_20k-*/job*.sbatch' | sort)
raw_big() {
  local s
  for s in "${big_scripts[@]}"; do sbatch --parsable --hold "$s"; done
}

raw=() one=() one_asked=() one_new=() raw_k=() k_dry=() k=()
for ((i = 0; i < repeats; i++)); do
  raw+=("$(time_ms sbatch --parsable --hold "$script")")
  one+=("$(time_ms tool --configs one.txt -e hpc_bench_one)")
  cancel
  # The same, asking Slurm every time (the first submission from a login node: cluster.sh).
  one_asked+=("$(HPC_CLUSTER_CACHE_TTL=0 time_ms tool --configs one.txt -e hpc_bench_one)")
  cancel
  # A new experiment each time: no earlier job of it to look for in the queue (runs.sh).
  one_new+=("$(time_ms tool --configs one.txt -e "hpc_bench_new$i")")
  scancel -n "hpc_bench_new$i" 2>/dev/null || true
  raw_k+=("$(time_ms sbatch --parsable --hold --array=0-999 "$script")")
  k_dry+=("$(time_ms tool --configs thousand.txt -e hpc_bench_k --dry-run)")
  k+=("$(time_ms tool --configs thousand.txt -e hpc_bench_k)")
  cancel
done
raw_20k=() big_dry=() big=()
for ((i = 0; i < big_repeats; i++)); do
  raw_20k+=("$(time_ms raw_big)")
  big_dry+=("$(time_ms tool --configs twenty.txt -e hpc_bench_20k --dry-run)")
  big+=("$(time_ms tool --configs twenty.txt -e hpc_bench_20k)")
  cancel
done

# submitit as a researcher runs it: a Python process that submits (start-up included).
submitit_one=() submitit_k=()
if "$BENCH_VENV/bin/python" -c 'import submitit' 2>/dev/null; then
  cat >"$BENCH_TMP/submitit_bench.py" <<'PY'
import subprocess, sys, submitit
ex = submitit.AutoExecutor(folder=sys.argv[1])
ex.update_parameters(slurm_partition="tmpdir", timeout_min=10, name="hpc_bench",
                     slurm_additional_parameters={"hold": True})
jobs = [ex.submit(print, "x")] if sys.argv[2] == "one" else ex.map_array(print, range(1000))
subprocess.run(["scancel", jobs[0].job_id.split("_")[0]], check=False)
PY
  for ((i = 0; i < repeats; i++)); do
    submitit_one+=("$(time_ms "$BENCH_VENV/bin/python" "$BENCH_TMP/submitit_bench.py" "$BENCH_TMP/submitit" one)")
    submitit_k+=("$(time_ms "$BENCH_VENV/bin/python" "$BENCH_TMP/submitit_bench.py" "$BENCH_TMP/submitit" array)")
  done
fi

m_raw=$(median "${raw[@]}") m_one=$(median "${one[@]}") m_one_asked=$(median "${one_asked[@]}")
m_one_new=$(median "${one_new[@]}")
m_raw_k=$(median "${raw_k[@]}") m_k_dry=$(median "${k_dry[@]}") m_k=$(median "${k[@]}")
m_raw_20k=$(median "${raw_20k[@]}") m_big_dry=$(median "${big_dry[@]}") m_big=$(median "${big[@]}")
printf 'submit benchmark as %s (medians of %d; 20,000 lines: of %d), load %s\n' \
  "$(id -un)" "$repeats" "$big_repeats" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  one job:      raw sbatch %4s ms | job_submitter.sh %4s ms (a new experiment) | %sx, sbatch + %s ms (target: sbatch + 40 ms)\n' \
  "$m_raw" "$m_one_new" "$(ratio "$m_one_new" "$m_raw")" "$(awk -v a="$m_one_new" -v b="$m_raw" 'BEGIN{print a-b}')"
printf '                the same experiment again (plus the squeue that finds whether its earlier job still runs) %4s ms, sbatch + %s ms\n' \
  "$m_one" "$(awk -v a="$m_one" -v b="$m_raw" 'BEGIN{print a-b}')"
printf '                that, asking Slurm too (HPC_CLUSTER_CACHE_TTL=0: a first submission) %4s ms, sbatch + %s ms\n' \
  "$m_one_asked" "$(awk -v a="$m_one_asked" -v b="$m_raw" 'BEGIN{print a-b}')"
printf '  1,000 lines:  raw sbatch --array %4s ms | job_submitter.sh --dry-run %4s ms, real %4s ms (target: 100 ms)\n' \
  "$m_raw_k" "$m_k_dry" "$m_k"
printf '  20,000 lines: raw sbatch of its %d arrays %4s ms | job_submitter.sh --dry-run %4s ms, real %4s ms (target: 1,000 ms)\n' \
  "${#big_scripts[@]}" "$m_raw_20k" "$m_big_dry" "$m_big"
if ((${#submitit_one[@]})); then
  s_one=$(median "${submitit_one[@]}") s_k=$(median "${submitit_k[@]}")
  printf '  submitit:     submit %s ms (job_submitter.sh: %sx of it) | map_array(1000) %s ms (job_submitter.sh: %sx of it)\n' \
    "$s_one" "$(ratio "$m_one_new" "$s_one")" "$s_k" "$(ratio "$m_k" "$s_k")"
else
  printf '  submitit:     not in %s (pip install submitit to compare)\n' "$BENCH_VENV"
fi
