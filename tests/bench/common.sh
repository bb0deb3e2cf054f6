# shellcheck shell=bash
# Shared by the benchmarks: a throw-away project on the running local cluster, clocks and
# medians. Benchmarks print figures; they assert nothing about time (machines are noisy).

BENCH_ROOT=$(cd -- "${BASH_SOURCE[0]%/*}/../.." && pwd -P)
# The venv the benchmarks' jobs and tools run with: the one tests/setup/install_deps.sh
# makes (torch CPU, Lightning, submitit, hpc_toolkit), unless HPC_BENCH_VENV says another.
BENCH_VENV=${HPC_BENCH_VENV:-${HPC_TEST_VENV:-/opt/hpc_files/test-venv}}

# bench_setup NAME: cluster env, SCRATCH and a project with the toolkit in BENCH_PROJECT,
# its .venv a link to BENCH_VENV. The cluster starts as the tests start it (per-node disks),
# so a running test cluster is reused, not restarted.
bench_setup() {
  [[ -x $BENCH_VENV/bin/python ]] || {
    echo "benchmark: no venv at $BENCH_VENV: run bash tests/setup/install_deps.sh first (or set HPC_BENCH_VENV)" >&2
    exit 2
  }
  # A normal user (what a researcher is: run it with runuser -u USER) uses the running
  # cluster; only root can start it.
  if ((EUID == 0)); then
    eval "$(HPC_LOCAL_NODE_DISKS=${HPC_LOCAL_NODE_DISKS:-pernode} bash "$BENCH_ROOT/tests/cluster/local_cluster.sh" start 2>/dev/null)"
  else
    eval "$(bash "$BENCH_ROOT/tests/cluster/local_cluster.sh" env)"
    sinfo -h >/dev/null 2>&1 || {
      echo "benchmark: no local cluster answers: start it as root (bash tests/cluster/local_cluster.sh start)" >&2
      exit 2
    }
  fi
  BENCH_TMP=$(mktemp -d "/tmp/hpc_bench_$1.XXXXXX")
  export SCRATCH=$BENCH_TMP/scratch
  BENCH_PROJECT=$BENCH_TMP/project
  mkdir -p "$SCRATCH" "$BENCH_PROJECT"
  bash "$BENCH_ROOT/hpc_files/install_into_project.sh" "$BENCH_PROJECT" >/dev/null
  cp -R "$BENCH_ROOT/examples" "$BENCH_PROJECT/"
  ln -s "$BENCH_VENV" "$BENCH_PROJECT/.venv"
  trap 'bench_cleanup' EXIT
}

bench_cleanup() {
  scancel -u "$(id -un)" -n hpc_bench 2>/dev/null || true
  rm -rf -- "$BENCH_TMP"
}

# now_ms: wall clock in milliseconds (bash builtin, no process).
now_ms() {
  local t=${EPOCHREALTIME/./}
  printf '%s\n' $((t / 1000))
}

# median NUMBERS...: the median.
# time_ms CMD...: milliseconds taken by CMD (its output discarded). A failing CMD stops
# the benchmark: the time of a refusal is no figure.
time_ms() {
  local t0 t1
  t0=$(now_ms)
  "$@" >/dev/null || {
    echo "benchmark: failed (exit $?): $*" >&2
    exit 1
  }
  t1=$(now_ms)
  printf '%s\n' $((t1 - t0))
}

# bench_hpc ARGS...: `hpc` as the project's researcher runs it: the project's own python/
# (pip install -e python), with the venv's Python.
bench_hpc() {
  PYTHONPATH=$BENCH_PROJECT/python "$BENCH_VENV/bin/python" -m hpc_toolkit "$@"
}

# bench_wait_gone NAME: until no job of that name is queued or running.
bench_wait_gone() {
  while [[ -n $(squeue -h -n "$1" -o %i 2>/dev/null) ]]; do sleep 0.2; done
}

median() {
  printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}

# ratio A B: A/B with two decimals.
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'
}
