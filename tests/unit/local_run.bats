#!/usr/bin/env bats
# --local (lib/local.sh): the batch script run here by bash with a one-node job's SLURM_*
# variables and the stand-ins of virtual_env_hpc_files/local_slurm/; the recording sbatch
# is never called. Refusals of --local, --interactive, --task and --port.

# shellcheck disable=SC2016 # the lines of configs files, expanded by the job
load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj
  python3 -m venv --without-pip "$PROJECT/.venv"
  export TMPDIR=$BATS_TEST_TMPDIR/tmp
  mkdir -p "$TMPDIR"
}

# no_local_leftovers: the run's folders under $TMPDIR are gone.
no_local_leftovers() {
  [ -z "$(find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'hpc_local*' -print -quit)" ]
}

@test "--local: a bash line, a python line (the venv's) and a failing line, in order; the first failure's code is the command's" {
  cat >"$PROJECT/experiment_configurations.txt" <<'LINES'
echo "bash line: job=$SLURM_JOB_ID task=$SLURM_ARRAY_TASK_ID nodes=$SLURM_NNODES list=$SLURM_JOB_NODELIST cpus=$SLURM_CPUS_PER_TASK tmp=$SLURM_TMPDIR"; touch "$SLURM_TMPDIR/made"; ls "$SLURM_TMPDIR"
python -c 'import sys, os; print("python:", sys.executable, os.environ["SLURM_ARRAY_TASK_ID"])'
python -c 'import sys; print("failing line"); sys.exit(3)'
LINES
  run --separate-stderr submitter --local --cpus 3 --exp-name dbg
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 3 ]
  [ "$(sbatch_calls)" -eq 0 ]
  local host
  host=$(hostname)
  [[ $output =~ bash\ line:\ job=local-[0-9]+\ task=0\ nodes=1\ list=$host\ cpus=3\ tmp=$TMPDIR/hpc_local_tmpdir\. ]]
  [[ $output == *$'\nmade\n'* || $output == *$'\nmade' || $output == *$'made\n'* ]]
  [[ $output == *"python: $PROJECT/.venv/bin/python 1"* ]]
  [[ $output == *"failing line"* ]]
  [[ $stderr == *"---- task 0 (line 1): exit code 0"* ]]
  [[ $stderr == *"---- task 1 (line 2): exit code 0"* ]]
  [[ $stderr == *"---- task 2 (line 3): exit code 3"* ]]
  [[ $stderr == *"local run: 2 of 3 task(s) succeeded; the first failure's exit code: 3"* ]]
  no_local_leftovers
  # Nothing was queued, so nothing went to the ledger hpc status reads.
  [ ! -e "$SCRATCH/proj/hpc_outputs/jobs/.ledger" ]
  [ -z "$(find "$SCRATCH" -name '*.sbatch')" ]
}

@test "--local --task 1 of a 3-line file runs line 2 only, as array task 1" {
  printf 'echo line-%s task=$SLURM_ARRAY_TASK_ID count=$SLURM_ARRAY_TASK_COUNT\n' one two three \
    >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local --task 1
  [ "$status" -eq 0 ]
  [[ $output == *"line-two task=1 count=3"* ]]
  [[ $output != *line-one* && $output != *line-three* ]]
  [[ $stderr == *"---- task 1 (line 2): exit code 0"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  no_local_leftovers
}

@test "--local of a split array and of resource blocks: each task sees its own array as Slurm numbers it, its header says its line, and no file named is missing" {
  printf 'echo "line=$HPC_TASK_INDEX of=$HPC_NUM_TASKS task=$SLURM_ARRAY_TASK_ID count=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX"; test -s "$HPC_JOB_SCRIPT" && echo "script there"\n%.0s' 1 2 3 4 5 \
    >"$PROJECT/experiment_configurations.txt"
  # Two arrays: lines 0-2 (indices 0-2), lines 3-4 (indices 0-1, HPC_TASK_OFFSET 3).
  HPC_MAX_ARRAY_SIZE=3 run --separate-stderr submitter --local
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"line=1 of=5 task=1 count=3 min=0 max=2"* ]]
  [[ $output == *"line=3 of=5 task=0 count=2 min=0 max=1"* ]]
  [[ $output == *"line=4 of=5 task=1 count=2 min=0 max=1"* ]]
  [ "$(grep -cx 'script there' <<<"$output")" -eq 5 ]
  [[ $stderr == *"(each task with its own array's batch script, one of the 2 a submission would write)"* ]]
  # (The job's log is the run's stdout.)
  [[ $output =~ job\ local-[0-9]+_1\ \(array\ index\ 1\ of\ an\ array\ of\ 2\ task\(s\)\):\ line\ index\ 4\ of\ 5, ]]
  [[ $output != *"of 5 task(s))"* ]]
  # Resource blocks: lines 0 and 2 one array (indices 0,2), line 1 another (index 1).
  printf '%s\n' "$(head -1 "$PROJECT/experiment_configurations.txt")" '#hpc: --cpus 2' \
    "$(head -1 "$PROJECT/experiment_configurations.txt")" '#hpc:' \
    "$(head -1 "$PROJECT/experiment_configurations.txt")" >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"line=1 of=3 task=1 count=1 min=1 max=1"* ]]
  [[ $output == *"line=2 of=3 task=2 count=2 min=0 max=2"* ]]
  [[ $output == *"_2 (array index 2 of an array of 2 task(s)): line index 2 of 3,"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  no_local_leftovers
}

@test "--local in a git project: the log names no code record, which only a submission writes" {
  git -C "$PROJECT" init -q
  git -C "$PROJECT" add -A
  git -C "$PROJECT" -c user.email=t@t -c user.name=t commit -qm init
  echo 'echo ran' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"code: git commit "*", run from $PROJECT"* ]]
  [[ $output != *"(record: "* ]]
  # A submission writes its record, and its job's log names it (tests/integration/code_record.bats).
}

@test "--local -d script --procs-per-node 3: the srun stand-in starts 3 ranks here" {
  printf '%s\n' 'echo "rank $RANK of $WORLD_SIZE local $LOCAL_RANK master $MASTER_ADDR"' \
    >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local -d script --procs-per-node 3 --cpus 3
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  local r
  for r in 0 1 2; do
    [[ $output == *"rank $r of 3 local $r master 127.0.0.1"* ]]
  done
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "--local: a failing rank's exit code is the command's; the other ranks are stopped" {
  printf '%s\n' '[ "$RANK" = 1 ] && exit 5; sleep 30' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local -d script --procs-per-node 2 --cpus 2
  echo "$stderr"
  [ "$status" -eq 5 ]
  [[ $output == *"rank 1 on "*" failed first, with exit code 5"* ]]
  [[ $stderr == *"---- task 0 (line 1): exit code 5 after"* ]]
  [[ $stderr != *"no such job"* ]]
}

@test "--local on a project without Slurm's commands: the job side's scontrol/squeue/srun calls answer" {
  no_sbatch_on_path
  printf '%s\n' 'scontrol show hostnames "$SLURM_JOB_NODELIST"; squeue -j "$SLURM_JOB_ID"; echo squeue=$?' \
    >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local
  [ "$status" -eq 0 ]
  [[ $output == *"$(hostname)"*"squeue=0"* ]]
  # sbatch from inside a local run submits nothing.
  printf '%s\n' 'sbatch --wrap true' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local
  [ "$status" -eq 1 ]
  [[ $stderr == *"a --local run submits nothing to Slurm"* ]]
}

@test "--local --pack 2: 3 lines, 2 at once, each with its own CPU share, log and exit code; the run fails naming the failed line" {
  # (tests/integration/debug_runs.bats checks 4 lines overlapping, with GPU shares.)
  printf '%s\n' 'echo "line=$HPC_TASK_INDEX cpus=$(taskset -cp $$ | sed "s/.*: //")"' \
    'echo "line=$HPC_TASK_INDEX"; exit 3' 'echo "line=$HPC_TASK_INDEX"' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --local --pack 2 --exp-name lp
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 3 ]
  [ "$(sbatch_calls)" -eq 0 ]
  [[ $stderr == *"local run (no Slurm): 3 line(s), 2 at once"* ]]
  [[ $stderr == *"local run: 2 of 3 line(s) succeeded; failed: line 1 (exit 3)"* ]]
  # Each line's own log, beside a submission's line logs.
  local i log
  for i in 0 1 2; do
    log=$(find "$SCRATCH/proj/hpc_outputs" -name "lp-local-*-line$i.out")
    [ -n "$log" ]
    grep -qx "line=$i.*" "$log"
  done
  # The line as it ran, with its own HPC_TASK_INDEX, in its own log.
  grep -q '^\[hpc .*\] line 2 runs as: echo line=2$' "$log"
  [[ $output == *"line 1 ended with exit code 3"* ]]
  [[ $output == *"line 0 starts (slot 0: CPUs "* ]]
  no_local_leftovers
}

@test "--local --pack: refused with --task, --lines-per-job or a GPU count it does not divide" {
  printf 'echo a\necho b\n' >"$PROJECT/experiment_configurations.txt"
  refused "--local --pack N runs every line, N at once; --task runs one" --local --pack 2 --task 1
  refused "--local --pack N runs every line of the configs file in one go" --local --pack 2 --lines-per-job 2
  refused "--pack 2 must divide the job's 3 GPU(s)" --local --pack 2 --gpus 3
}

@test "--local, --interactive, --task, --port: refused where they make no sense" {
  printf 'echo a\necho b\n' >"$PROJECT/experiment_configurations.txt"
  refused "--local runs on this machine, which is one node; --num-nodes 2 cannot run here" \
    --local --num-nodes 2 -d script
  refused "--interactive opens one session, but the configs file has 2 commands: choose the one to debug with --task i (0-1" \
    --interactive
  refused "--task 2: the configs file has 2 command(s), tasks 0-1" --local --task 2
  refused "--task 'x' is not a task number" --local --task x
  refused "--task runs one line of the configs file with --local or --interactive" --task 1
  refused "--port N prints the ssh tunnel" --port 6006
  refused "--port N is for --interactive" --local --port 6006
  refused "--port '70000' is not a port number" --interactive --task 0 --port 70000
  refused "choose one" --local --interactive
  refused "--dry-run prints the plan and runs nothing" --local --dry-run
  refused "--setup-venv builds the venv in a queued job" --local --setup-venv
  HPC_MAIL_USER=r@example.org refused "--mail is for queued jobs" --local --mail
  refused "W&B sweeps" --local --wandb-sweepid e/p/abc123 --num-agents 2
}

@test "--help names --local, --interactive, --task and --port" {
  run --separate-stderr submitter --help
  [ "$status" -eq 0 ]
  local o
  for o in --local --interactive '--task I' '--port N'; do
    [[ $output == *"$o"* ]]
  done
}

@test "--interactive: sbatch-only options are not given to salloc (it refuses them), and the session says so (issue 23)" {
  printf '%s\n' 'echo a' >"$PROJECT/c.txt"
  salloc_argv() {
    (cd "$PROJECT" && bash -c 'source hpc_files/job_submitter.sh; prepare "$PWD" stamp "$@";
      hpc_plan_chunk_of_to k "${J_DEBUG_TASKS[0]}"
      hpc_plan_with_chunk "$k" hpc_interactive_argv_to argv /rc; printf "%s\n" "${argv[@]}"' _ "$@")
  }
  run --separate-stderr salloc_argv --interactive --configs c.txt --task 0 \
    --sbatch-option=--kill-on-invalid-dep=yes --sbatch-option=--propagate=STACK \
    --sbatch-option=--ignore-pbs --sbatch-option=--qos=high --sbatch-option=--export-file=f \
    --sbatch-option=--batch=x --sbatch-option=--test-only --sbatch-option=--input=in \
    --sbatch-option=--kill-on=yes
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  echo "$output"
  [[ $output == *$'\n--qos=high\n'* ]]
  local o
  for o in --kill-on-invalid-dep --propagate --ignore-pbs --export-file --batch --test-only --input --kill-on; do
    [[ $output != *$'\n'"$o"* ]] || { echo "$o given to salloc"; return 1; }
    [[ $stderr == *"$o"* ]]
  done
  [[ $stderr == *"for batch jobs only: not given to salloc"* ]]
}
