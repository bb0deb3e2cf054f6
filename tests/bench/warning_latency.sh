#!/usr/bin/env bash
# Summary: wall-time warning latency, from the SIGUSR1 the batch shell gets to the handler
# of the program running: through the toolkit (job_runtime.sh, launcher none, run_line.sh,
# proc_tree.sh choosing whom to signal) vs the same signal sent straight to the program
# (raw `kill -USR1`, the floor). For a bash `trap ... USR1` loop and a Python
# `signal.signal` program; and the cost of the /proc walk that finds a program with no
# handler (it then gets nothing). On this node, no Slurm needed. Medians of N runs.
#
# Usage: bash tests/bench/warning_latency.sh [N]   (default 7)
set -euo pipefail

root=$(cd -- "${BASH_SOURCE[0]%/*}/../.." && pwd -P)
n=${1:-7}
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
trap 'exit 1' INT TERM # the EXIT trap runs then too

# shellcheck disable=SC2016 # the programs' lines are expanded by the shell that runs them
bash_prog='trap "echo \$EPOCHREALTIME >\"$OUT\"; exit 0" USR1; : >"$OUT.ready"; while :; do sleep 0.05 & wait $!; done'
py_prog='python3 -c "import os,signal,time; signal.signal(signal.SIGUSR1, lambda *a: (open(os.environ[\"OUT\"],\"w\").write(repr(time.time())), os._exit(0))); open(os.environ[\"OUT\"]+\".ready\",\"w\"); time.sleep(60)"'

# wait_ready: until the program under test is running with its handler.
wait_ready() {
  local start=$SECONDS
  until [[ -e $OUT.ready ]]; do
    ((SECONDS - start < 60)) || { echo "the program did not start (see $tmp/job.log)" >&2 && exit 1; }
    sleep 0.02
  done
  sleep 0.2
}

# one_raw LINE: ms from `kill -USR1` on the program itself to its handler.
one_raw() {
  export OUT=$tmp/out.$RANDOM
  bash -c "$1" &
  local pid=$! t0
  wait_ready
  t0=$EPOCHREALTIME
  kill -USR1 "$pid"
  wait "$pid" || true
  python3 -c 'import sys; print(f"{(float(open(sys.argv[1]).read()) - float(sys.argv[2])) * 1000:.1f}")' "$OUT" "$t0"
}

# one_toolkit LINE: ms from `kill -USR1` on a batch shell running LINE (launcher none).
one_toolkit() {
  export OUT=$tmp/out.$RANDOM
  printf '%s\n' "$1" >"$tmp/commands"
  (
    unset SLURM_JOB_ID SLURM_ARRAY_TASK_ID
    export source_dir=$tmp scratch_dir=$tmp/scratch exp_name=bench HPC_COMMANDS_FILE=$tmp/commands
    export HPC_LAUNCHER=none HPC_SIGNAL_GRACE=30 HPC_MAX_RESTARTS=1 HPC_REQUEUE=no HPC_PREEMPT_WATCH=no
    exec bash -c 'source "$1/virtual_env_hpc_files/job_runtime.sh"; hpc_job_begin; hpc_run_command' _ "$root"
  ) >"$tmp/job.log" 2>&1 &
  local pid=$! t0
  wait_ready
  t0=$EPOCHREALTIME
  kill -USR1 "$pid"
  wait "$pid" || true
  python3 -c 'import sys; print(f"{(float(open(sys.argv[1]).read()) - float(sys.argv[2])) * 1000:.1f}")' "$OUT" "$t0"
}

# one_walk: ms for proc_tree.sh to find that a program handles neither signal.
one_walk() {
  python3 -c 'import time; time.sleep(30)' &
  local pid=$!
  sleep 0.3
  walk_once "$pid"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

walk_once() {
  # shellcheck source=virtual_env_hpc_files/proc_tree.sh
  (source "$root/virtual_env_hpc_files/proc_tree.sh"
    t0=$EPOCHREALTIME
    hpc_proc_warn_to sent "$1" || true
    t1=$EPOCHREALTIME
    python3 -c 'import sys; print(f"{(float(sys.argv[2]) - float(sys.argv[1])) * 1000:.1f}")' "$t0" "$t1")
}

# median FN ARGS...: the median of N runs of FN, and all of them.
median() {
  local i
  local -a xs=()
  for ((i = 0; i < n; i++)); do
    xs+=("$("$@")")
  done
  printf '%s\n' "${xs[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%s ms", a[int((NR+1)/2)]}'
  printf ' (%s)' "${xs[*]}"
}

printf 'warning latency, median of %d (all runs in brackets), on %s (load %s)\n' "$n" "$(hostname)" "$(cut -d' ' -f1 /proc/loadavg)"
raw_b=$(median one_raw "$bash_prog")
tk_b=$(median one_toolkit "$bash_prog")
raw_p=$(median one_raw "$py_prog")
tk_p=$(median one_toolkit "$py_prog")
walk=$(median one_walk)
ratio() { python3 -c 'import sys; print(f"{float(sys.argv[2]) / max(float(sys.argv[1]), 0.1):.1f}x")' "${1%% ms*}" "${2%% ms*}"; }
printf '  bash trap USR1:    raw kill %s\n                     toolkit  %s  (%s)\n' "$raw_b" "$tk_b" "$(ratio "$raw_b" "$tk_b")"
printf '  python handler:    raw kill %s\n                     toolkit  %s  (%s)\n' "$raw_p" "$tk_p" "$(ratio "$raw_p" "$tk_p")"
printf '  no handler: the /proc walk that finds it (then nothing is sent): %s\n' "$walk"
