#!/usr/bin/env bats
# --local and --interactive (lib/local.sh) for real: --local with no Slurm command on PATH
# at all (torchrun with 2 ranks, --data staged to a local folder), and --interactive on
# the local cluster, driven through a terminal made by `script`, checked from inside the
# session and after it (the allocation released).

# shellcheck disable=SC2016 # the lines of configs files, expanded by the job
load ../helpers/cluster

# The venv with torch (read before hermetic_env unsets HPC_*).
TORCH_VENV=$TEST_VENV

setup() {
  integration_setup proj
  export TMPDIR=$BATS_TEST_TMPDIR/tmp
  mkdir -p "$TMPDIR" "$SCRATCH/proj/ds/sub"
  printf 'hello data\n' >"$SCRATCH/proj/ds/sub/a.txt"
}

# json FILE EXPR: a value from a JSON file (python expression on d).
json() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

@test "--local without Slurm on PATH: torchrun --procs-per-node 2 gives 2 ranks a world of 2; --data staged locally" {
  rm -rf "$PROJECT/.venv"
  [ -x "$TORCH_VENV/bin/torchrun" ] || { echo "no torchrun in $TORCH_VENV: set HPC_TEST_VENV" >&2; return 1; }
  ln -s "$TORCH_VENV" "$PROJECT/.venv"
  printf '%s\n' 'python examples/ddp_allreduce.py --tag loc' >"$PROJECT/experiment_configurations.txt"
  local slurm_path=$PATH
  no_sbatch_on_path
  ! type -P sbatch || false # (sbatch the function, cluster.bash, runs the user's: none)
  run --separate-stderr submitter --local -d torchrun --procs-per-node 2 --exp-name loc
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"torchrun --standalone --nproc-per-node=2"* ]]
  local r
  for r in 0 1; do
    [ "$(json "$SCRATCH/proj/loc/checkpoints/loc/rank_$r.json" 'd["world_size"]')" = 2 ]
    [ "$(json "$SCRATCH/proj/loc/checkpoints/loc/rank_$r.json" 'd["sum"]')" = 3.0 ]
  done
  [[ $stderr == *"---- task 0 (line 1): exit code 0"* ]]

  printf '%s\n' 'cat "$SLURM_TMPDIR/ds/sub/a.txt"; echo "tmp=$SLURM_TMPDIR"' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local --data ds --exp-name data
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"hello data"* ]]
  local tmp
  tmp=$(sed -n 's/^tmp=//p' <<<"$output")
  [[ $tmp == "$TMPDIR"/hpc_local_tmpdir.* ]]
  [ ! -e "$tmp" ] # removed afterwards
  # Nothing reached Slurm: no job in the queue or the accounting of this cluster by that name.
  PATH=$slurm_path
  [ -z "$(squeue -h -n loc,data -o %i)" ]
}

@test "--local --pack 2 --gpus 2: 4 lines, 2 at once (their own timestamps overlap, never 3), each on its own CPU and GPU, with its own log and exit code" {
  # Each line records its start and end, the CPUs it may run on and the GPUs it sees.
  cat >"$PROJECT/line.sh" <<'LINE'
s=$(date +%s.%N)
sleep 2
printf 'line=%s start=%s end=%s cpus=%s gpus=%s\n' "$HPC_TASK_INDEX" "$s" "$(date +%s.%N)" \
  "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)" "$CUDA_VISIBLE_DEVICES"
exit "$1"
LINE
  printf '%s\n' 'bash line.sh 0' 'bash line.sh 0' 'bash line.sh 7' 'bash line.sh 0' >"$PROJECT/experiment_configurations.txt"
  no_sbatch_on_path
  unset CUDA_VISIBLE_DEVICES
  run --separate-stderr submitter --local --pack 2 --gpus 2 --exp-name lp
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 7 ]
  [[ $stderr == *"local run: 3 of 4 line(s) succeeded; failed: line 2 (exit 7)"* ]]
  local i log rec
  local -a start end cpus gpus
  for i in 0 1 2 3; do
    log=$(find "$SCRATCH/proj/hpc_outputs" -name "lp-local-*-line$i.out")
    [ -n "$log" ]
    rec=$(grep "^line=$i " "$log")
    [[ $rec =~ start=([0-9.]+)\ end=([0-9.]+)\ cpus=([0-9,-]+)\ gpus=([0-9,]*)$ ]]
    start[i]=${BASH_REMATCH[1]} end[i]=${BASH_REMATCH[2]} cpus[i]=${BASH_REMATCH[3]} gpus[i]=${BASH_REMATCH[4]}
  done
  [[ $output == *"line 2 ended with exit code 7"* ]]
  [[ $output == *"line 3 ended with exit code 0"* ]]
  # Lines 0 and 1 start together and run side by side; at no line's start do 3 run at once.
  python3 - "${start[@]}" "${end[@]}" <<'PY'
import sys
v = [float(x) for x in sys.argv[1:]]
s, e = v[:4], v[4:]
assert s[1] < e[0] and s[0] < e[1], ("lines 0 and 1 did not overlap", s, e)
for t in s:
    running = sum(1 for i in range(4) if s[i] <= t < e[i])
    assert running <= 2, ("more than 2 lines at once", t, s, e)
PY
  # The two lines that ran together had distinct shares of this machine's CPUs and the GPUs.
  [ -n "${cpus[0]}" ]
  [ "${cpus[0]}" != "${cpus[1]}" ]
  [ "${gpus[0]}" != "${gpus[1]}" ]
  [[ ${gpus[0]} =~ ^[01]$ && ${gpus[1]} =~ ^[01]$ ]]
}

# in_session ARGS... <<< COMMANDS: job_submitter.sh --interactive ARGS in a terminal
# (`script`), COMMANDS typed into the session's shell. Sets status and output.
in_session() {
  local cmd
  printf -v cmd '%q ' bash hpc_files/job_submitter.sh --interactive "$@"
  run researcher bash -c 'cd "$1" && exec timeout 180 script -qec "$2" /dev/null' _ "$PROJECT" "$cmd"
}

# wait_queue_empty: every job of this test's user has left squeue (the allocation is
# released); fails after a generous wait.
wait_queue_empty() {
  local i
  for ((i = 0; i < 120; i++)); do
    [[ -z $(squeue -h -u "$HPC_TEST_USER" -n "$1" -o %i) ]] && return 0
    sleep 1
  done
  squeue
  return 1
}

@test "--interactive: a shell on a node with SLURM_JOB_ID, the venv's python, --data in \$SLURM_TMPDIR, the command and the tunnel; released at exit" {
  printf '%s\n' 'python argv_dump.py first' 'python argv_dump.py --second "two words"' >"$PROJECT/experiment_configurations.txt"
  in_session --task 1 --data ds --port 6006 --exp-name inter --time 5 <<'EOF2'
echo "INSIDE job=$SLURM_JOB_ID node=$SLURMD_NODENAME"
echo "PY=$(command -v python)"
cat "$SLURM_TMPDIR/ds/sub/a.txt"
echo "TASK=$HPC_TASK_INDEX CMD=$HPC_COMMAND"
exit 4
EOF2
  echo "$output"
  [ "$status" -eq 4 ] # the session's exit code
  [[ $output =~ INSIDE\ job=([0-9]+)\ node=node[1-4] ]]
  local job=${BASH_REMATCH[1]}
  [[ $output == *"PY=$PROJECT/.venv/bin/python"* ]]
  [[ $output == *"hello data"* ]]
  [[ $output == *'TASK=1 CMD=python argv_dump.py --second "two words"'* ]]
  [[ $output == *'The command of task 1 (line 2 of '*$'\n    python argv_dump.py --second "two words"'* ]]
  [[ $output == *"start tmux (or screen) on the login node first"* ]]
  [[ $output =~ ssh\ -L\ 6006:node[1-4]:6006\ [^@]+@ ]]
  [[ $output == *"interactive session ended (exit code 4); its allocation is released"* ]]
  wait_queue_empty inter
  # It was an allocation with the plan's name, not a batch job.
  [[ $(scontrol show job "$job" 2>/dev/null || true) != *"BatchFlag=1"* ]]
}

@test "--interactive: hpc_run_command runs the line as the job would; an array without --task is refused" {
  printf '%s\n' 'python argv_dump.py a' 'python argv_dump.py b' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --interactive
  [ "$status" -eq 2 ]
  [[ $stderr == *"choose the one to debug with --task i (0-1"* ]]
  in_session --task 0 --exp-name run2 --time 5 <<'EOF2'
hpc_run_command; echo "RC=$?"
exit
EOF2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"command ended with exit code 0"* ]]
  [[ $output == *"RC=0"* ]]
  wait_queue_empty run2
}

@test "--interactive --task 2 of lines split at MaxArraySize 2 (the second array, HPC_TASK_OFFSET 2): the session is line 3's" {
  printf '%s\n' 'echo zero' 'echo one' 'echo two' >"$PROJECT/experiment_configurations.txt"
  HPC_MAX_ARRAY_SIZE=2 in_session --task 2 --exp-name split --time 5 <<'EOF2'
echo "TASK=$HPC_TASK_INDEX OF=$HPC_NUM_TASKS CMD=$HPC_COMMAND"
exit
EOF2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"TASK=2 OF=3 CMD=echo two"* ]]
  [[ $output == *$'The command of task 2 (line 3 of '*$'\n    echo two'* ]]
  wait_queue_empty split
}

@test "--interactive on 2 nodes without Slurm's SLURM_TMPDIR: --data on both nodes, hpc_run_command's ranks on both, folders removed at exit" {
  printf '%s\n' 'echo "RANK $RANK of $WORLD_SIZE on $SLURMD_NODENAME: $(cat "$SLURM_TMPDIR/ds/sub/a.txt")"' \
    >"$PROJECT/experiment_configurations.txt"
  in_session --data ds -N 2 -d script --partition notmpdir --exp-name two --time 5 <<'EOF2'
echo "TMP=$SLURM_TMPDIR"
hpc_run_command; echo "RC=$?"
exit
EOF2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output =~ RANK\ 0\ of\ 2\ on\ (node[1-4]):\ hello\ data ]]
  local n0=${BASH_REMATCH[1]}
  [[ $output =~ RANK\ 1\ of\ 2\ on\ (node[1-4]):\ hello\ data ]]
  [ "${BASH_REMATCH[1]}" != "$n0" ]
  [[ $output == *"RC=0"* ]]
  [[ $output == *"local scratch: removed the job's folder on 2 node(s)"* ]]
  local tmp
  tmp=$(grep -o 'TMP=/[^[:space:]]*' <<<"$output" | tr -d '\r' | head -1)
  tmp=${tmp#TMP=}
  [ -n "$tmp" ]
  [ ! -e "$tmp" ]
  wait_queue_empty two
}

@test "--interactive without a terminal: refused with what to do, nothing allocated" {
  printf '%s\n' 'true' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --interactive --exp-name noterm </dev/null
  [ "$status" -eq 2 ]
  [[ $stderr == *"needs a terminal"* ]]
  [ -z "$(squeue -h -n noterm -o %i)" ]
}
