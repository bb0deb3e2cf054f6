#!/usr/bin/env bash
# Summary: submit time of job_submitter.sh for one job and for a 1,000-line configs file,
# against raw `sbatch --parsable` of the same batch script and, if installed, submitit, on
# the local cluster. Prints medians and ratios. Jobs are submitted held and cancelled.
#
# Usage: bash tests/bench/submit.sh [REPEATS]    (default 15)
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-15}
bench_setup submit
cd "$BENCH_PROJECT"
printf 'python examples/train.py --lr 0.1\n' >one.txt
for i in $(seq 0 999); do printf 'python examples/train.py --lr 0.%03d --name "run %d"\n' "$i" "$i"; done >thousand.txt
hold=(--sbatch-option=--hold -e hpc_bench --cluster local) # -e names the job (scancel -n)

# The same batch script, for raw sbatch: the one job_submitter.sh wrote.
bash hpc_files/job_submitter.sh --configs one.txt "${hold[@]}" >/dev/null
script=$(find "$SCRATCH/project/hpc_outputs/jobs" -name "*.sbatch" -print -quit)
raw=() tool=() raw_array=() tool_array=()
for ((i = 0; i < repeats; i++)); do
  raw+=("$(time_ms sbatch --parsable --hold "$script")")
  tool+=("$(time_ms bash hpc_files/job_submitter.sh --configs one.txt "${hold[@]}")")
  raw_array+=("$(time_ms sbatch --parsable --hold --array=0-999 "$script")")
  tool_array+=("$(time_ms bash hpc_files/job_submitter.sh --configs thousand.txt "${hold[@]}")")
  scancel -n hpc_bench 2>/dev/null || true
done

# submitit as a researcher runs it: a Python process that submits (start-up included).
submitit_one=() submitit_array=()
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
    submitit_array+=("$(time_ms "$BENCH_VENV/bin/python" "$BENCH_TMP/submitit_bench.py" "$BENCH_TMP/submitit" array)")
  done
fi

m_raw=$(median "${raw[@]}") m_tool=$(median "${tool[@]}")
m_raw_array=$(median "${raw_array[@]}") m_tool_array=$(median "${tool_array[@]}")
printf 'submit benchmark (%d repeats, medians, local cluster)\n' "$repeats"
printf '  one job:     raw sbatch %5s ms | job_submitter.sh %5s ms | ratio %sx | overhead %s ms (target: within 2x + 50 ms)\n' \
  "$m_raw" "$m_tool" "$(ratio "$m_tool" "$m_raw")" "$(awk -v a="$m_tool" -v b="$m_raw" 'BEGIN{print a-b}')"
printf '  1,000 lines: raw sbatch --array %5s ms | job_submitter.sh %5s ms | ratio %sx (target: under 200 ms)\n' \
  "$m_raw_array" "$m_tool_array" "$(ratio "$m_tool_array" "$m_raw_array")"
if ((${#submitit_one[@]})); then
  local_one=$(median "${submitit_one[@]}") local_array=$(median "${submitit_array[@]}")
  printf '  submitit:    submit %s ms (job_submitter.sh takes %sx of that) | map_array(1000) %s ms (%sx)\n' \
    "$local_one" "$(ratio "$m_tool" "$local_one")" "$local_array" "$(ratio "$m_tool_array" "$local_array")"
else
  printf '  submitit:    not installed (pip install submitit to compare)\n'
fi
