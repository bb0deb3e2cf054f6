#!/usr/bin/env bats
# How a line's status is decided (run_line.sh): bash -o pipefail -c LINE by default, so a
# failing program piped through tee fails the line; HPC_PIPEFAIL=no (--no-pipefail) is
# bash's default. The plan says which in the batch script (the dry run). On the cluster:
# tests/integration/programs.bats (a `python x.py | tee` job ends FAILED, --rerun reruns it).
# shellcheck disable=SC2016 # lines in single quotes run in the line's own bash

load ../helpers/common

setup() {
  hermetic_env
  job_side_env
  RT=$REPO_ROOT/virtual_env_hpc_files
}

# line_status LINE: the status run_line.sh gives LINE, in $status.
line_status() {
  run bash "$RT/run_line.sh" "$1"
}

@test "pipefail by default: a failing program piped through tee fails the line with its code" {
  line_status 'bash -c "exit 3" | tee /dev/null'
  [ "$status" -eq 3 ]
  line_status 'bash -c "exit 3" | tee /dev/null && echo done'
  [ "$status" -eq 3 ]
  [[ $output != *done* ]]
  line_status 'echo ok | tee /dev/null'
  [ "$status" -eq 0 ]
  [ "$output" = ok ]
}

@test "a ; list ends with its last command's status, && stops at the first failure, as in bash" {
  line_status 'echo start; false; echo after'
  [ "$status" -eq 0 ]
  [ "$output" = $'start\nafter' ]
  line_status 'echo start && false && echo after'
  [ "$status" -eq 1 ]
  [ "$output" = start ]
  line_status 'set -e; echo start; false; echo after'
  [ "$status" -eq 1 ]
  [ "$output" = start ]
}

@test "HPC_PIPEFAIL=no: a pipeline's status is its last command's" {
  HPC_PIPEFAIL=no line_status 'bash -c "exit 3" | tee /dev/null && echo done'
  [ "$status" -eq 0 ]
  [ "$output" = "done" ]
}

@test "the argv: bash -o pipefail -c LINE, or bash -c LINE with HPC_PIPEFAIL=no; a launcher's own command as given" {
  run bash -c 'source "$1"; HPC_ENV_DEFAULT_SIGNAL=no; hpc_run_line_argv_to a "x | y"; printf "<%s>" "${a[@]}"' _ "$RT/run_line.sh"
  [ "$output" = '<bash><-o><pipefail><-c><x | y>' ]
  run bash -c 'source "$1"; HPC_ENV_DEFAULT_SIGNAL=no HPC_PIPEFAIL=no; hpc_run_line_argv_to a "x | y"; printf "<%s>" "${a[@]}"' _ "$RT/run_line.sh"
  [ "$output" = '<bash><-c><x | y>' ]
  run bash -c 'source "$1"; HPC_ENV_DEFAULT_SIGNAL=no; hpc_run_line_argv_to a -- dask worker; printf "<%s>" "${a[@]}"' _ "$RT/run_line.sh"
  [ "$output" = '<dask><worker>' ]
}

@test "the dry run says how lines run: pipefail by default, --no-pipefail exports HPC_PIPEFAIL=no" {
  use_sbatch_stub
  make_project proj 'python x.py | tee out.txt'
  run --separate-stderr submitter --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"# Each runs as bash -o pipefail -c LINE: a failing command of a pipeline fails the line."* ]]
  [[ $output != *HPC_PIPEFAIL* ]]
  run --separate-stderr submitter --dry-run --no-pipefail
  [ "$status" -eq 0 ]
  [[ $output == *"# Each runs as bash -c LINE (--no-pipefail): a pipeline's status is its last command's."* ]]
  [[ $output == *"export HPC_PIPEFAIL='no'"* ]]
}
