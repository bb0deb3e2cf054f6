#!/usr/bin/env bats
# Job side: after the command, the job log names what the program made or changed at the
# top of the project folder (a relative output path), with the task's folders to use
# instead; Python's own __pycache__ and entries older than the command are not named.
# On the cluster: tests/integration/programs.bats.

# shellcheck disable=SC2016 # the variables' names, as the message holds them

load ../helpers/common

setup() {
  hermetic_env
  mkdir -p "$BATS_TEST_TMPDIR/p/old_dir" "$BATS_TEST_TMPDIR/p/data"
  touch "$BATS_TEST_TMPDIR/p/train.py"
  # made well before the command (the check looks 0.1 s back: the kernel's coarse clock)
  touch -d '-1 minute' "$BATS_TEST_TMPDIR/p/train.py" "$BATS_TEST_TMPDIR/p/old_dir" "$BATS_TEST_TMPDIR/p/data"
}

# check SCRIPT: run SCRIPT in the project folder after the start mark, then the check.
check() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  run bash -c 'source "$1/virtual_env_hpc_files/project_writes.sh"
    hpc_log() { echo "LOG $*"; }
    cd "$2" && HPC_EXP_DIR=/s/exp since=$EPOCHREALTIME && eval "$3" && hpc_project_writes_since "$since"' \
    _ "$REPO_ROOT" "$BATS_TEST_TMPDIR/p" "$1"
}

@test "a new output folder and a changed one are named, with \$HPC_CHECKPOINT_DIR and \$HPC_RESULTS_DIR" {
  check 'mkdir out && touch out/ckpt.pt data/new.bin && mkdir -p __pycache__'
  [ "$status" -eq 0 ]
  [[ $output == *"LOG warning: the program wrote into the project folder $BATS_TEST_TMPDIR/p: "* ]]
  [[ $output == *"out/"* && $output == *"data/"* ]]
  [[ $output != *"__pycache__"* && $output != *"old_dir"* && $output != *"train.py"* ]]
  [[ $output == *'--out_dir=$HPC_CHECKPOINT_DIR'* && $output == *'$HPC_RESULTS_DIR'* ]]
}

@test "a program that writes nothing into the project leaves no line" {
  check 'cat train.py >/dev/null; mkdir -p __pycache__'
  [ "$status" -eq 0 ]
  [ -z "$output" ]
}
