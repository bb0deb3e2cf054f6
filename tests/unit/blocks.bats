#!/usr/bin/env bats
# Resource blocks (lib/blocks.sh): '#hpc: OPTIONS' lines of the configs file, grouped into
# one array per distinct job, each keeping its commands' indices; with the recording sbatch.
# Regenerate the golden dry run after an intended change: UPDATE_GOLDEN=1 bats tests/unit/blocks.bats
# The real-Slurm tests are tests/integration/blocks.bats; refusals are rows of
# tests/helpers/hostile_inputs.bash.

# shellcheck disable=SC2016,SC2030,SC2031 # configs lines, expanded by the job; TMPDIR per test
load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  export HPC_MAX_JOB_COUNT=10000 HPC_MAX_ARRAY_SIZE=1001
  STUBS=$BATS_TEST_TMPDIR/stubs
  mkdir -p "$STUBS"
  printf '#!/bin/sh\necho "$@" >>"%s/scancel.log"\n' "$BATS_TEST_TMPDIR" >"$STUBS/scancel"
  chmod +x "$STUBS/scancel"
  export PATH=$STUBS:$PATH
}

# script_of N: the batch script of the Nth sbatch call.
script_of() {
  cat "$SBATCH_STUB_LOG.script.$1"
}

# blocks_file: the issue's example, plus a bare '#hpc:' that goes back to the command line.
blocks_file() {
  cat >"$PROJECT/experiment_configurations.txt" <<'EOF'
python examples/train.py --model small
#hpc: --gpus 2 --time 04:00:00 --mem 32G
python examples/train.py --model big --seed 1
python examples/train.py --model big --seed 2
#hpc: --which-distributed lightning --num-nodes 2 --gpus 4
python examples/train.py --model huge
#hpc:
python examples/train.py --model small --seed 2
EOF
}

@test "three blocks: one array each, of the block's own indices; one commands file; one submission in the ledger" {
  blocks_file
  run --separate-stderr submitter -e blk --cpus 8
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(sbatch_calls)" -eq 3 ]
  [ "${lines[1]}" = "Submitted batch job 4243 (array of 2 task(s): 1-2 as array indices 1-2)" ]
  # Lines 1 and 8 (tasks 0 and 4) have the command line's options: one array.
  grep -qx '#SBATCH --array="0,4"' <(script_of 1)
  grep -qx '#SBATCH --cpus-per-task="8"' <(script_of 1)
  run ! grep -q -- '--gres' <(script_of 1)
  grep -qx '#SBATCH --time="01:00:00"' <(script_of 1)
  grep -qx '#SBATCH --array="1-2"' <(script_of 2)
  grep -qx '#SBATCH --gres="gpu:2"' <(script_of 2)
  grep -qx '#SBATCH --mem="32G"' <(script_of 2)
  grep -qx '#SBATCH --time="04:00:00"' <(script_of 2)
  grep -qx '#SBATCH --array="3"' <(script_of 3)
  grep -qx '#SBATCH --nodes="2"' <(script_of 3)
  grep -qx '#SBATCH --ntasks-per-node="4"' <(script_of 3)
  grep -qx '#SBATCH --cpus-per-task="2"' <(script_of 3)
  grep -qx "export HPC_LAUNCHER='lightning'" <(script_of 3)
  # No offsets: array index i is command i (HPC_TASK_INDEX, logs, results).
  run ! grep -q HPC_TASK_OFFSET <(script_of 1) <(script_of 2) <(script_of 3)
  local jobs=$SCRATCH/proj/hpc_outputs/jobs commands
  [ "$(find "$jobs" -name commands | wc -l)" -eq 1 ]
  commands=$(find "$jobs" -name commands)
  [ "$(sed -n 4p "$commands")" = "python examples/train.py --model huge" ]
  [ "$(wc -l <"$commands")" -eq 5 ]
  grep -qxF "export HPC_COMMANDS_FILE='$commands'" <(script_of 2)
  # One submission: three ledger lines with one submission id.
  [ "$(cut -f2,4 "$jobs/submissions.tsv")" = $'4242\t2\n4243\t2\n4244\t1' ]
  [ "$(cut -f6 "$jobs/submissions.tsv" | sort -u | wc -l)" -eq 1 ]
}

@test "lines whose options settle the same form one array, even apart and spelled otherwise" {
  printf '%s\n' '#hpc: -g 2 --mem 16G' 'echo a' '#hpc: --time 2:00:00' 'echo b' \
    '#hpc: --gpus=2 --mem 16gb' 'echo c' '#hpc: --cpus 1' 'echo d' >"$PROJECT/c.txt"
  run --separate-stderr submitter --configs c.txt --cpus 1
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  # Line 1's and line 5's blocks are one job; --cpus 1 is the command line's own value.
  [ "$(sbatch_calls)" -eq 3 ]
  grep -qx '#SBATCH --array="0,2"' <(script_of 1)
  grep -qx '#SBATCH --array="1"' <(script_of 2)
  grep -qx '#SBATCH --array="3"' <(script_of 3)
  run ! grep -q -- '--gres' <(script_of 3)
}

@test "all lines in one block: one ordinary array with the block's options" {
  printf '%s\n' '#hpc: --gpus 1' 'echo a' 'echo b' >"$PROJECT/c.txt"
  run --separate-stderr submitter --configs c.txt
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  grep -qx '#SBATCH --array="0-1"' <(script_of 1)
  grep -qx '#SBATCH --gres="gpu:1"' <(script_of 1)
  [ "${lines[0]}" = "Submitted batch job 4242 (array of 2 tasks, 0-1)" ]
}

@test "a directive replaces only the options it names; --sbatch-option and --data lists are replaced whole" {
  printf '%s\n' 'echo a' "#hpc: --time 10 --sbatch-option '--comment=a b'" 'echo b' >"$PROJECT/c.txt"
  run --separate-stderr submitter --configs c.txt --mem 2G -p main --sbatch-option=--qos=high
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  grep -qx '#SBATCH --qos' <(script_of 1) || grep -qx '#SBATCH --qos="high"' <(script_of 1)
  grep -qx '#SBATCH --partition="main"' <(script_of 2)
  grep -qx '#SBATCH --mem="2G"' <(script_of 2)
  grep -qx '#SBATCH --time="10"' <(script_of 2)
  grep -qx '#SBATCH --comment="a b"' <(script_of 2)
  run ! grep -q qos <(script_of 2)
}

@test "--nodes-arg/--devices-arg get each block's own counts" {
  printf '%s\n' 'python examples/train.py --x 1' '#hpc: -N 2 --gpus 2' 'python examples/train.py --x 2' \
    >"$PROJECT/c.txt"
  run --separate-stderr submitter --configs c.txt -d lightning --nodes-arg num_nodes --devices-arg devices -e x
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(cat "$SCRATCH"/proj/hpc_outputs/jobs/x-*/commands)" = "$(printf '%s\n' \
    'python examples/train.py --x 1 --num_nodes 1 --devices 1' \
    'python examples/train.py --x 2 --num_nodes 2 --devices 2')" ]
}

@test "--max-parallel holds across the blocks' arrays; with --setup-venv every array waits for the venv job" {
  blocks_file
  printf 'numpy\n' >"$PROJECT/requirements.txt"
  run --separate-stderr submitter --cpus 8 --max-parallel 1 --setup-venv
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(sbatch_calls)" -eq 4 ] # the venv job (4242), then the three arrays
  grep -qx '#SBATCH --array="0,4%1"' <(script_of 2)
  grep -qx -- '--dependency=afterok:4242' "$SBATCH_STUB_LOG"
  grep -qx -- '--dependency=afterok:4242,afterany:4243' "$SBATCH_STUB_LOG"
  grep -qx -- '--dependency=afterok:4242,afterany:4244' "$SBATCH_STUB_LOG"
}

@test "a block longer than MaxArraySize is split within the block; every index kept" {
  {
    echo '#hpc: --cpus 2'
    for i in $(seq 0 11); do echo "echo $i"; done
    echo '#hpc: --cpus 3'
    echo 'echo 12'
  } >"$PROJECT/c.txt"
  HPC_MAX_ARRAY_SIZE=5 run --separate-stderr submitter --configs c.txt
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(sbatch_calls)" -eq 4 ]
  grep -qx '#SBATCH --array="0-4"' <(script_of 1)
  grep -qx '#SBATCH --array="0-4"' <(script_of 2)
  grep -qx "export HPC_TASK_OFFSET='5'" <(script_of 2)
  grep -qx '#SBATCH --array="0-1"' <(script_of 3)
  grep -qx "export HPC_TASK_OFFSET='10'" <(script_of 3)
  grep -qx '#SBATCH --cpus-per-task="2"' <(script_of 3)
  # Command 12 is index 2 of the third slice of five: offset 10.
  grep -qx '#SBATCH --array="2"' <(script_of 4)
  grep -qx "export HPC_TASK_OFFSET='10'" <(script_of 4)
  grep -qx '#SBATCH --cpus-per-task="3"' <(script_of 4)
}

@test "sbatch refusing the second block's array cancels the first and removes every file" {
  blocks_file
  cat >"$STUBS/sbatch" <<EOF
#!/usr/bin/env bash
if [[ \$1 == --version ]]; then echo "slurm 22.05.8"; exit 0; fi
if [[ -s "$SBATCH_STUB_LOG" ]]; then echo "sbatch: error: Invalid generic resource (gres) specification" >&2; exit 1; fi
exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
EOF
  chmod +x "$STUBS/sbatch"
  run --separate-stderr submitter -e x --cpus 8
  [ "$status" -eq 1 ]
  [[ $stderr == *"sbatch did not accept array 2 of 3"* ]]
  [[ $stderr == *"nothing was submitted (jobs 4242 were cancelled)"* ]]
  [ "$(cat "$BATS_TEST_TMPDIR/scancel.log")" = 4242 ]
  [ -z "$(find "$SCRATCH" -type f)" ]
}

@test "golden: --dry-run shows each array's lines, options, sbatch command and #SBATCH lines" {
  blocks_file
  run --separate-stderr submitter --dry-run -e blk --cpus 8
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
  local file=$REPO_ROOT/tests/unit/golden/blocks_dry_run.txt
  sed -e "s|$BATS_TEST_TMPDIR|@TMP@|g" -e 's/blk-[0-9]\{8\}-[0-9]\{6\}-[0-9]*-[0-9a-f]\{4\}/blk-@STAMP@/g' \
    -e "s/^export HPC_SUBMITTED_AT='[0-9T:-]*'$/export HPC_SUBMITTED_AT='@WHEN@'/" \
    <<<"$output" >"$BATS_TEST_TMPDIR/dry.txt"
  [[ -z ${UPDATE_GOLDEN:-} ]] || cp "$BATS_TEST_TMPDIR/dry.txt" "$file"
  diff -u "$file" "$BATS_TEST_TMPDIR/dry.txt"
}

@test "--local runs each task with its block's resources; --task I takes line I's block" {
  printf '%s\n' 'echo "cpus=$SLURM_CPUS_PER_TASK index=$HPC_TASK_INDEX"' '#hpc: --cpus 3' \
    'echo "cpus=$SLURM_CPUS_PER_TASK index=$HPC_TASK_INDEX"' '#hpc: -d lightning -N 2' 'echo far' \
    >"$PROJECT/c.txt"
  export TMPDIR=$BATS_TEST_TMPDIR/tmp
  mkdir -p "$TMPDIR"
  run --separate-stderr submitter --local --configs c.txt --cpus 1 --task 1
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *"cpus=3 index=1"* ]]
  run --separate-stderr submitter --local --configs c.txt --cpus 1 --task 0
  [[ $output == *"cpus=1 index=0"* ]]
  # Task 2's block spans two nodes: --local cannot run it.
  run --separate-stderr submitter --local --configs c.txt --cpus 1
  [ "$status" -eq 2 ]
  [[ $stderr == *"task 2 (line 5 of the configs file) is in a resource block of --num-nodes 2"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "--local without --task: every task in turn, each with its block's script" {
  printf '%s\n' 'echo "cpus=$SLURM_CPUS_PER_TASK index=$HPC_TASK_INDEX"' '#hpc: --cpus 3' \
    'echo "cpus=$SLURM_CPUS_PER_TASK index=$HPC_TASK_INDEX"' '#hpc:' \
    'echo "cpus=$SLURM_CPUS_PER_TASK index=$HPC_TASK_INDEX"' >"$PROJECT/c.txt"
  export TMPDIR=$BATS_TEST_TMPDIR/tmp
  mkdir -p "$TMPDIR"
  run --separate-stderr submitter --local --configs c.txt --cpus 1
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *"cpus=1 index=0"*"cpus=3 index=1"*"cpus=1 index=2"* ]]
}

@test "directive words split as a shell splits them, nothing expanded" {
  # shellcheck disable=SC2030,SC2031
  run bash -c 'source "$1/hpc_files/lib/hpc_lib.sh"; source "$1/hpc_files/lib/blocks.sh"
    _blocks_split_to w "$2"; printf "<%s>" "${w[@]}"' _ "$REPO_ROOT" \
    " --a 'b c' \"d \\\"e\\\" f\" g\\ h '\$HOME' \"\" --x=\"1 2\" # a comment"
  [ "$status" -eq 0 ]
  [ "$output" = '<--a><b c><d "e" f><g h><$HOME><><--x=1 2>' ]
}

@test "an older toolkit's reader takes every directive for a comment" {
  blocks_file
  # The rule every version has kept: a line whose first non-blank is '#' is no command.
  run --separate-stderr bash -c 'grep -v "^[[:space:]]*#" "$1" | grep -c .' _ "$PROJECT/experiment_configurations.txt"
  [ "$output" = 5 ]
  run --separate-stderr submitter --dry-run
  [[ $output == *"# ---- commands (5), one per array task"* ]]
}

@test "sweeps read no configs file, so no directive: a --sweep with a configs file holding one still submits" {
  ln -s "$REPO_ROOT/.venv" "$PROJECT/.venv2"
  blocks_file
  printf 'method: grid\nprogram: examples/sweep_train.py\nparameters:\n  lr:\n    values: [0.1, 0.2]\n' >"$PROJECT/s.yml"
  run --separate-stderr env PATH="$REPO_ROOT/.venv/bin:$PATH" bash -c 'cd "$1" && bash hpc_files/job_submitter.sh --sweep s.yml --dry-run --venv .venv2' _ "$PROJECT"
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output != *"one per set of options"* ]]
}

@test "a block's --data: its own archive, named in its own array's script, its job recorded" {
  mkdir -p "$SCRATCH/proj/ds" "$SCRATCH/proj/ds2"
  echo x >"$SCRATCH/proj/ds/a"
  echo y >"$SCRATCH/proj/ds2/b"
  printf '%s\n' 'echo a' '#hpc: --data ds' 'echo b' '#hpc: --data ds2 --cpus 2' 'echo c' >"$PROJECT/c.txt"
  run --separate-stderr submitter --configs c.txt -e dd
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(sbatch_calls)" -eq 3 ]
  run ! grep -q HPC_DATA_ARCHIVE <(script_of 1)
  local a2 a3
  a2=$(sed -n "s/^export HPC_DATA_ARCHIVE='\(.*\)'$/\1/p" <(script_of 2))
  a3=$(sed -n "s/^export HPC_DATA_ARCHIVE='\(.*\)'$/\1/p" <(script_of 3))
  [ -f "$a2" ]
  [ -f "$a3" ]
  [ "$a2" != "$a3" ]
  tar -tf "$a2" | grep -q 'ds/a$'
  tar -tf "$a3" | grep -q 'ds2/b$'
  [ "$(cat "${a2%%.tar*}.jobs")" = 4243 ]
  [ "$(cat "${a3%%.tar*}.jobs")" = 4244 ]
}

@test "--interactive --task I asks salloc for line I's block" {
  printf '%s\n' 'echo a' '#hpc: --cpus 3 --gpus 1 --time 20' 'echo b' >"$PROJECT/c.txt"
  # salloc's command line as the session would run it (a session needs a terminal).
  salloc_argv() {
    # (the session's job: the chunk that runs the task, its settings in force)
    (cd "$PROJECT" && bash -c 'source hpc_files/job_submitter.sh; prepare "$PWD" stamp "$@";
      hpc_plan_chunk_of_to k "${J_DEBUG_TASKS[0]}"
      hpc_plan_with_chunk "$k" hpc_interactive_argv_to argv /rc; printf "%s\n" "${argv[@]}"' _ "$@")
  }
  run --separate-stderr salloc_argv --interactive --configs c.txt --cpus 2 --task 1
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *$'\n--cpus-per-task=3\n'* && $output == *$'\n--time=20\n'* && $output == *$'\n--gres=gpu:1\n'* ]]
  run --separate-stderr salloc_argv --interactive --configs c.txt --cpus 2 --task 0
  [ "$status" -eq 0 ]
  [[ $output == *$'\n--cpus-per-task=2\n'* && $output != *gres* ]]
}

@test "a line that looks like a misspelt directive is a comment, with a warning naming it" {
  printf '%s\n' 'echo a' '# hpc: --gpus 2' 'echo b' '#HPC: --gpus 2' '#hpc --gpus 2' '# hpc notes: fine' 'echo c' >"$PROJECT/c.txt"
  run --separate-stderr submitter --configs c.txt --dry-run
  [ "$status" -eq 0 ]
  [[ $stderr == *"line 2: '# hpc: --gpus 2' is read as a comment, not as a directive"* ]]
  [[ $stderr == *"line 4: '#HPC: --gpus 2' is read as a comment"* ]]
  [[ $stderr == *"line 5: '#hpc --gpus 2' is read as a comment"* ]]
  [[ $stderr != *"line 6"* ]]
  [[ $output != *"one per set of options"* && $output != *gres* ]]
}

@test "--dry-run with --max-parallel and --setup-venv shows each array's dependencies" {
  blocks_file
  printf 'numpy\n' >"$PROJECT/requirements.txt"
  run --separate-stderr submitter --dry-run --cpus 8 --max-parallel 2 --setup-venv -e x
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *"sbatch --parsable --dependency=afterok:\<venv\ job\ id\> --kill-on-invalid-dep=yes $SCRATCH/proj/hpc_outputs/jobs/x-"*"/job-part1.sbatch"* ]]
  [[ $output == *"sbatch --parsable --dependency=afterok:\<venv\ job\ id\>\\,afterany:\<array\ 2\> --kill-on-invalid-dep=yes $SCRATCH/proj/hpc_outputs/jobs/x-"*"/job-part3.sbatch"* ]]
  [[ $output == *'#SBATCH --array="0,4%2"'* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
}
