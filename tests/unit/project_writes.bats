#!/usr/bin/env bats
# Job side: after the command, the job log names what this task's Python processes wrote
# into the project folder, at any depth (python_hooks/hpc_project_writes.py), and the paths
# another task of the same submission wrote too; a new top-level entry that no Python
# process of the task wrote is named apart; files changed meanwhile by others are not the
# task's. On the cluster: tests/integration/programs.bats.

# shellcheck disable=SC2016 # the variables' names, as the message holds them

load ../helpers/common

setup() {
  hermetic_env
  P=$BATS_TEST_TMPDIR/p
  mkdir -p "$P/old_dir" "$P/data/deep/er" "$BATS_TEST_TMPDIR/jobs"
  touch "$P/train.py" "$P/data/deep/er/old.bin"
  # made well before the command
  touch -d '-1 minute' "$P/train.py" "$P/old_dir" "$P/data" "$P/data/deep/er/old.bin"
}

# check TASK SCRIPT: run SCRIPT as task TASK's command in the project folder, between the
# start of the check and its end.
check() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  run bash -c 'source "$1/virtual_env_hpc_files/project_writes.sh"
    hpc_log() { echo "LOG $*"; }
    export HPC_COMMANDS_FILE=$2/../jobs/e-1.commands HPC_SOURCE_DIR=$2 HPC_TASK_INDEX=$3
    cd "$2" && HPC_EXP_DIR=/s/exp since=$EPOCHREALTIME && hpc_project_writes_begin && eval "$4" &&
      hpc_project_writes_since "$since"' \
    _ "$REPO_ROOT" "$P" "$1" "$2"
}

# py CODE: CODE run by python3 (the hook is on PYTHONPATH in the command).
py() {
  printf 'python3 -c %q' "$1"
}

@test "files written at any depth, a folder made and a rename are named; reads and __pycache__ are not" {
  check 0 "$(py 'import os
os.makedirs("out/run1", exist_ok=True)
open("out/run1/ckpt.pt", "w").write("x")
open("data/deep/er/old.bin", "a").write("more")
open("data/deep/er/tmp", "w").write("y"); os.replace("data/deep/er/tmp", "data/deep/er/final")
open("train.py").read(); os.makedirs("__pycache__", exist_ok=True); open("__pycache__/x.pyc", "w")')"
  [ "$status" -eq 0 ]
  echo "$output"
  [[ $output == *"LOG warning: the program wrote into the project folder $P: "* ]]
  # Sorted; the folders made are left out where a file in them is named, and data/deep/er/tmp,
  # renamed away, is gone.
  [[ $output == *": data/deep/er/final, data/deep/er/old.bin, out/run1/ckpt.pt. Every task"* ]]
  [[ $output != *"__pycache__"* && $output != *"old_dir"* && $output != *"train.py"* ]]
  [[ $output == *'--out_dir=$HPC_CHECKPOINT_DIR'* && $output == *'$HPC_RESULTS_DIR'* ]]
  [[ $output != *"new in the project folder"* ]] # out/ is the Python process's
  [[ $output != *"of this submission wrote the same"* ]]
}

@test "torch.save to a path (its file opened in C++, unseen by the audit hook) is named" {
  [[ -x $TEST_VENV/bin/python ]] || { echo "no test venv at $TEST_VENV: run bash tests/setup/install_deps.sh" >&2; return 1; }
  check 0 "$(printf '%q -c %q' "$TEST_VENV/bin/python" 'import torch; torch.save({"w": 1}, "data/deep/er/model.pt")')"
  [ "$status" -eq 0 ]
  [[ $output == *"LOG warning: the program wrote into the project folder $P: data/deep/er/model.pt. "* ]]
}

@test "a program that writes nothing into the project leaves no line; what others change meanwhile is not the task's" {
  check 0 "$(py 'open("train.py").read(); open("/dev/null", "w").write("x")'); touch train.py data/deep/er/old.bin"
  [ "$status" -eq 0 ]
  [ -z "$output" ]
}

@test "two tasks of one submission writing the same path: the second task's log says so, naming the first; a third with other paths (in a folder both made) is silent" {
  local write='import os; os.makedirs("outputs/10-24-25", exist_ok=True); open("outputs/10-24-25/config.yaml", "w").write("a")'
  check 0 "$(py "$write")"
  [[ $output != *"same path"* ]]
  check 2 "$(py 'import os; os.makedirs("outputs/10-24-25", exist_ok=True); open("outputs/mine_only.txt", "w").write("b")')"
  [[ $output != *"same path"* ]]
  check 1 "$(py "$write")"
  echo "$output"
  [[ $output == *"LOG warning: task(s) 0 of this submission wrote the same path(s) in the project as this task: outputs/10-24-25/config.yaml. One overwrote the other's"* ]]
  # The task's list: the file (the folders were there already: no write).
  [ "$(cat "$BATS_TEST_TMPDIR/jobs/e-1.writes/1"/*)" = outputs/10-24-25/config.yaml ]
}

@test "a new top-level entry no Python process wrote (a redirection) is named apart; an attempt's list starts afresh" {
  check 0 'echo hi >made_by_shell.txt'
  [[ $output == *"LOG warning: new in the project folder $P since the command began, written by no Python process of this task"*": made_by_shell.txt."* ]]
  [[ $output != *"the program wrote into"* ]]
  mkdir -p "$BATS_TEST_TMPDIR/jobs/e-1.writes/0" && echo stale >"$BATS_TEST_TMPDIR/jobs/e-1.writes/0/n.1"
  check 0 'true'
  [ -z "$output" ]
}

@test "HPC_LIGHTNING_HOOK=no leaves Python alone: no hook on PYTHONPATH" {
  HPC_LIGHTNING_HOOK=no check 0 'echo "PP=${PYTHONPATH:-}"'
  [ "$output" = "PP=" ]
}
