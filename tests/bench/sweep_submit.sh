#!/usr/bin/env bash
# Summary: how long it takes to submit a 1,000-point offline grid sweep with hpc_files,
# against 1,000 separate sbatch calls and submitit's map_array over 1,000 items.
#
# Usage: bash tests/bench/sweep_submit.sh [REPEATS]     (default 5; medians are reported)
#
# Needs a running Slurm cluster (SLURM_CONF set, e.g. eval "$(bash tests/cluster/local_cluster.sh env)")
# and the test venv (HPC_BENCH_VENV, else $HPC_TEST_VENV, else /opt/hpc_files/test-venv: submitit, PyYAML). Every job it submits is held (--hold) and
# cancelled at once: nothing runs. Times are wall-clock times of what a person types (the
# whole command: interpreter start, imports, files, sbatch). Environment: HPC_BENCH_PROFILE
# (cluster profile for hpc_files, default local), HPC_BENCH_PARTITION (default: the
# profile's, else Slurm's). Target: hpc_files under 200 ms.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
repeats=${1:-5}
profile=${HPC_BENCH_PROFILE:-local}
venv=${HPC_BENCH_VENV:-${HPC_TEST_VENV:-/opt/hpc_files/test-venv}}
if [[ -z ${SLURM_CONF:-} ]] || ! command -v sbatch >/dev/null; then
  echo "sweep_submit.sh: no Slurm cluster: eval \"\$(bash tests/cluster/local_cluster.sh env)\" first" >&2
  exit 1
fi
[[ -x $venv/bin/python ]] || { echo "sweep_submit.sh: $venv is missing: bash tests/setup/install_deps.sh" >&2; exit 1; }

work=$(mktemp -d /tmp/hpc_bench_sweep.XXXXXX)
held=()
cleanup() {
  ((${#held[@]} == 0)) || scancel "${held[@]}" 2>/dev/null || true
  rm -rf -- "$work"
}
trap cleanup EXIT

now_ms() { printf '%d' $((${EPOCHREALTIME/./} / 1000)); }

# median VALUES...: the middle value (the lower middle for an even count).
median() {
  printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"
}

partition_args=()
[[ -z ${HPC_BENCH_PARTITION:-} ]] || partition_args=(--partition "$HPC_BENCH_PARTITION")

# The project: hpc_files installed as a researcher would, a 10 x 10 x 10 grid.
mkdir -p "$work/project" "$work/scratch"
bash "$root/hpc_files/install_into_project.sh" "$work/project" >/dev/null
ln -s "$venv" "$work/project/.venv"
cat >"$work/project/grid.yml" <<'EOF'
method: grid
parameters:
  a: {min: 0, max: 9}
  b: {values: [x, y, z, u, v, w, p, q, r, s]}
  c: {distribution: q_uniform, min: 0, max: 10, q: 1}
command: ["${env}", "true", "${args}"]
EOF

toolkit_ms=()
for ((i = 0; i < repeats; i++)); do
  t0=$(now_ms)
  out=$(cd "$work/project" && SCRATCH=$work/scratch HPC_QUIET=1 bash hpc_files/job_submitter.sh \
    --sweep grid.yml --cluster "$profile" "${partition_args[@]}" --sbatch-option=--hold -e bench)
  toolkit_ms+=($(($(now_ms) - t0)))
  id=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out")
  [[ $out == *"(grid, 1000 points)"* && -n $id ]] || { echo "unexpected: $out" >&2; exit 1; }
  held+=("$id")
  scancel "$id"
done

# 1,000 separate sbatch calls (what a loop over configurations does); once, it is slow.
t0=$(now_ms)
for ((i = 0; i < 1000; i++)); do
  held+=("$(sbatch --parsable --hold --output=/dev/null "${partition_args[@]}" --wrap=true)")
done
loop_ms=$(($(now_ms) - t0))
scancel "${held[@]}"

cat >"$work/submitit_bench.py" <<'EOF'
import sys
import submitit


def point(i: int) -> int:
    return i


executor = submitit.AutoExecutor(folder=sys.argv[1], cluster="slurm")
extra = {"hold": True}
if sys.argv[2]:
    extra["partition"] = sys.argv[2]
executor.update_parameters(timeout_min=5, slurm_additional_parameters=extra)
jobs = executor.map_array(point, range(1000))
print(jobs[0].job_id.split("_")[0])
EOF
submitit_ms=()
for ((i = 0; i < repeats; i++)); do
  t0=$(now_ms)
  id=$("$venv/bin/python" "$work/submitit_bench.py" "$work/submitit" "${HPC_BENCH_PARTITION:-}")
  submitit_ms+=($(($(now_ms) - t0)))
  held+=("$id")
  scancel "$id"
done

tk=$(median "${toolkit_ms[@]}")
sm=$(median "${submitit_ms[@]}")
printf 'Submitting a 1,000-point offline grid sweep (median of %d; wall-clock ms)\n' "$repeats"
printf '  %-34s %7d ms   (runs: %s)\n' "hpc_files job_submitter.sh --sweep" "$tk" "${toolkit_ms[*]}"
printf '  %-34s %7d ms   (once)\n' "1,000 separate sbatch calls" "$loop_ms"
printf '  %-34s %7d ms   (runs: %s)\n' "submitit AutoExecutor.map_array" "$sm" "${submitit_ms[*]}"
awk -v tk="$tk" -v loop="$loop_ms" -v sm="$sm" 'BEGIN {
  printf "Ratios: 1,000 sbatch calls / hpc_files = %.1fx; submitit / hpc_files = %.1fx\n", loop / tk, sm / tk
  printf "Target: hpc_files under 200 ms: %s\n", (tk < 200 ? "met" : "NOT met")
}'
