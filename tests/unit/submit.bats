#!/usr/bin/env bats
# Submission with a recording sbatch: the files written, the exact argv, what is printed,
# and that nothing is left behind when sbatch refuses. (tests/integration/ uses real Slurm.)

# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own: SBATCH_STUB_VERSION is set per test
load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1 --layers 1,2,3 --name "run a"' \
    "python examples/train.py --lr 0.2 --name 'b'"
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
}

@test "one sbatch --parsable call for many lines: a job array, script and commands kept" {
  run --separate-stderr submitter --exp-name base --cluster local
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  [ "$(sed -n 1p "$SBATCH_STUB_LOG")" = "--parsable" ]
  local script
  script=$(sed -n 2p "$SBATCH_STUB_LOG")
  [[ $script == "$SCRATCH/proj/hpc_outputs/jobs/base-"*.sbatch ]]
  [ -f "$script" ]
  grep -qx '#SBATCH --array="0-1"' "$script"
  cmp "$script" "$SBATCH_STUB_LOG.script.1"
  [ "$(cat "${script%/*}/commands")" = "$(cat "$PROJECT/experiment_configurations.txt")" ]
  [ "${lines[0]}" = "Submitted batch job 4242 (array of 2 tasks, 0-1)" ]
  [ "${lines[1]}" = "  logs:   $SCRATCH/proj/hpc_outputs/base-4242_<task>.out" ]
  [ "${lines[2]}" = "  script: $script" ]
}

@test "a submission's home holds its script, manifest and commands; the manifest is what the script exports" {
  # Values a manifest must carry whole: quotes, a $( ), unicode (a backslash, a tab and a
  # newline: tests/python/test_paths.py; Slurm's --output refuses them in $SCRATCH).
  # shellcheck disable=SC2016 # a literal $( ) in the path
  export SCRATCH=$BATS_TEST_TMPDIR/'sc "r" $(x) it'"'"'s é'
  mkdir -p "$SCRATCH"
  run --separate-stderr submitter --exp-name base --cluster local --max-parallel 1
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  local script home name value plan got
  script=$(sed -n 2p "$SBATCH_STUB_LOG")
  home=${script%/*}
  [ "$script" = "$home/job.sbatch" ]
  [[ ${home##*/} == base-* ]]
  [ "${home%/*}" = "$SCRATCH/proj/hpc_outputs/jobs" ]
  # The ledger names the home's script and the home's id.
  [ "$(cut -f5,6 "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv")" = "$script"$'\t'"${home##*/}" ]
  [ "$(cd "$home" && ls)" = "$(printf '%s\n' commands job.plan job.sbatch)" ]
  plan=$home/job.plan
  grep -qxF $'@array\t0-1%1' "$plan"
  grep -qxF $'@job_name\tbase' "$plan"
  # Every job variable of the manifest is the batch script's export, value for value.
  # shellcheck disable=SC2016 # the inner script's text
  got=$(env -i bash -c 'source "$1"; set -e
    eval "$(grep "^export " "$2")"
    n=0
    while IFS=$'"'"'\t'"'"' read -r name value; do
      [[ $name != [@#]* && -n $name ]] || continue
      hpc_manifest_unescape_to value "$value"
      [[ ${!name-unset} == "$value" ]] || { echo "$name differs"; exit 1; }
      n=$((n + 1))
    done <"$3"
    [[ $n == $(grep -c "^export " "$2") ]] || { echo "$n of the exports"; exit 1; }
    echo same' _ "$REPO_ROOT/virtual_env_hpc_files/job_lib.sh" "$script" "$plan")
  [ "$got" = same ]
  grep -qxF "export HPC_HOME=$(printf '%s' "$home" | sed "s/'/'\\\\''/g; s/^/'/; s/$/'/")" "$script"
}

@test "a home already there is refused, never shared; a refused submission leaves no home" {
  run bash -c 'source "$1/hpc_files/job_submitter.sh"; J_HOME=$2; hpc_submission_home_make' _ "$REPO_ROOT" "$BATS_TEST_TMPDIR"
  [ "$status" -ne 0 ]
  [[ $output == *"$BATS_TEST_TMPDIR already exists: submit again in a second"* ]]
  SBATCH_STUB_FAIL="Invalid account" run --separate-stderr submitter -e x
  [ "$status" -ne 0 ]
  [ -z "$(find "$SCRATCH/proj/hpc_outputs/jobs" -mindepth 1)" ]
}

@test "a submission stopped once sbatch has queued its job keeps the home: the job reads it" {
  # An sbatch that queues the job (the stub), then stops the submission (SIGTERM), as a
  # Ctrl-C or a closed terminal would just after sbatch answered.
  local bin=$BATS_TEST_TMPDIR/bin
  mkdir -p "$bin"
  # shellcheck disable=SC2016 # the wrapper's text
  printf '%s\n' '#!/bin/bash' "\"$REPO_ROOT/tests/helpers/stubs/sbatch\" \"\$@\" || exit" \
    '[[ $1 == --version ]] && exit 0' 'p=$PPID' 'while ((p > 1)); do' \
    '  if grep -qa job_submitter.sh "/proc/$p/cmdline" 2>/dev/null; then kill -TERM "$p"; break; fi' \
    '  p=$(awk "{print \$4}" "/proc/$p/stat")' 'done' >"$bin/sbatch"
  chmod +x "$bin/sbatch"
  PATH=$bin:$PATH run --separate-stderr submitter -e stopped
  [ "$status" -ne 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  local script
  script=$(sed -n 2p "$SBATCH_STUB_LOG")
  [ -f "$script" ] && [ -f "${script%/*}/commands" ] && [ -f "${script%/*}/job.plan" ]
}

@test "a single command is a plain job with its log path printed" {
  printf 'echo one\n' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter -e solo
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "Submitted batch job 4242" ]
  [ "${lines[1]}" = "  log:    $SCRATCH/proj/hpc_outputs/solo-4242.out" ]
  ! grep -q -- '--array' "$SBATCH_STUB_LOG.script.1" || false
}

@test "the submission is recorded in hpc_outputs/jobs/submissions.tsv" {
  submitter -e a >/dev/null
  submitter -e b >/dev/null
  local ledger=$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv
  [ "$(wc -l <"$ledger")" -eq 2 ]
  [ "$(cut -f2,3,4 "$ledger" | head -1)" = $'4242\ta\t2' ]
  [ "$(cut -f2,3 "$ledger" | tail -1)" = $'4243\tb' ]
}

@test "sbatch refusing the job: error, non-zero exit, no files left" {
  SBATCH_STUB_FAIL="Requested node configuration is not available" run --separate-stderr submitter -e x
  [ "$status" -ne 0 ]
  [[ $stderr == *"Requested node configuration is not available"* ]]
  [[ $stderr == *"nothing was submitted"* ]]
  [ -z "$(find "$SCRATCH" -type f)" ]
}

@test "runs from any folder of the project" {
  mkdir -p "$PROJECT/src/deep"
  cd "$PROJECT/src/deep"
  run --separate-stderr bash ../../hpc_files/job_submitter.sh -e deep
  [ "$status" -eq 0 ]
  grep -qx "export source_dir='$PROJECT'" "$SBATCH_STUB_LOG.script.1"
}

@test "a missing venv is a warning at submission, not a silent surprise" {
  rm -r "$PROJECT/.venv"
  run --separate-stderr submitter -e x
  [ "$status" -eq 0 ]
  [[ $stderr == *"no virtual environment at $PROJECT/.venv"*"--setup-venv"* ]]
  run --separate-stderr submitter -e x --venv none
  [[ $stderr != *"no virtual environment"* ]]
  grep -qx "export HPC_VENV='none'" "$SBATCH_STUB_LOG.script.2"
}

@test "--setup-venv submits the venv job first and chains the experiments with afterok" {
  printf 'pyyaml\n' >"$PROJECT/requirements.txt"
  run --separate-stderr submitter -e x --setup-venv
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
  grep -qx "$PROJECT/virtual_env_hpc_files/build_venv.sh" "$SBATCH_STUB_LOG"
  grep -qx -- "--dependency=afterok:4242" "$SBATCH_STUB_LOG"
  [[ $output == *"Submitted venv job 4242"*"Submitted batch job 4243"* ]]
}

@test "--setup-venv without requirements.txt is refused before any submission" {
  run --separate-stderr submitter -e x --setup-venv
  [ "$status" -ne 0 ]
  [[ $stderr == *"requirements.txt, which does not exist"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "a large array with stdin not a terminal never waits for an answer" {
  seq 1 150 | sed 's/^/echo /' >"$PROJECT/experiment_configurations.txt"
  # shellcheck disable=SC2016 # expanded by the inner bash
  run --separate-stderr timeout 20 bash -c 'cd "$1" && bash hpc_files/job_submitter.sh -e big </dev/null' _ "$PROJECT"
  [ "$status" -eq 0 ]
  grep -qx '#SBATCH --array="0-149"' "$SBATCH_STUB_LOG.script.1"
}

@test "each configs line reaches the commands file byte for byte (quotes, commas, unicode)" {
  printf '%s\n' "python t.py --a 'x y' --b \"p,q\" --c é\\\\n;echo \$HOME" >"$PROJECT/c.txt"
  submitter -e q --configs c.txt >/dev/null
  local script
  script=$(sed -n 2p "$SBATCH_STUB_LOG")
  cmp "${script%/*}/commands" "$PROJECT/c.txt"
}

@test "any job: WANDB_API_KEY goes to a mode-600 key file, not to Slurm; the script names the file" {
  sbatch_env_stub
  local secret=plain_job_secret_0123456789abcdef key=$HOME/.config/hpc_files/wandb_api_key
  WANDB_API_KEY=$secret run --separate-stderr submitter -e keyed
  [ "$status" -eq 0 ]
  [ "$(cat "$key")" = "$secret" ]
  [ "$(stat -c %a "$key")" = 600 ]
  [[ $stderr == *"saved WANDB_API_KEY to $key (mode 600)"* ]]
  grep -qx "export HPC_WANDB_KEY_FILE='$key'" "$SBATCH_STUB_LOG.script.1"
  [ -s "$BATS_TEST_TMPDIR/sbatch.env" ]
  ! grep -q WANDB_API_KEY= "$BATS_TEST_TMPDIR/sbatch.env" || false
  run ! grep -rq -- "$secret" "$SCRATCH" "$SBATCH_STUB_LOG"* "$BATS_TEST_TMPDIR/sbatch.env"
  # A dry run names the file, writes nothing and prints no key.
  rm -rf "${key%/*}"
  WANDB_API_KEY=$secret run --separate-stderr submitter -e keyed --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"export HPC_WANDB_KEY_FILE='$key'"* && $output != *"$secret"* ]]
  [ ! -e "$key" ]
  # Without a key in the environment the script names no key file.
  run --separate-stderr submitter -e plain
  ! grep -q HPC_WANDB_KEY_FILE "$SBATCH_STUB_LOG.script.2" || false
}

@test "a Slurm older than the toolkit supports is refused before anything is written" {
  export SBATCH_STUB_VERSION=21.08.8
  run --separate-stderr submitter --exp-name old
  [ "$status" -eq 2 ]
  [[ $stderr == *"this cluster runs Slurm 21.08.8, older than the oldest this toolkit supports (22.05"* ]]
  [ -z "$output" ]
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
}

@test "an sbatch that does not say its version is refused; the version read goes into the script" {
  export SBATCH_STUB_VERSION=""
  run --separate-stderr submitter --exp-name nover
  [ "$status" -eq 2 ]
  [[ $stderr == *"could not read Slurm's version from 'sbatch --version'"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  export SBATCH_STUB_VERSION=24.11.5
  run --separate-stderr submitter --exp-name newer
  [ "$status" -eq 0 ]
  grep -qxF "export HPC_SLURM_VERSION='24.11.5'" "$SBATCH_STUB_LOG.script.1"
}

# shellcheck disable=SC2016 # the inner bash's own variables
# loaded_after ARGS...: run job_submitter.sh's main with ARGS in the project and print which
# of its libraries it loaded on first use (hpc_lib.sh: hpc_autoload), then its exit status.
loaded_after() {
  (cd "$PROJECT" && bash -c 'source hpc_files/job_submitter.sh
    rc=0; (main "$@" >/dev/null 2>&1; echo "loaded: ${!HPC_AUTOLOADED[*]}") || rc=$?
    echo "exit $rc"' _ "$@")
}

# shellcheck disable=SC2016 # the inner bash's own variables
@test "a plain submission does not parse --rerun's or --remote's library; --rerun and --remote load theirs; a function its library lacks is an internal error, not a loop" {
  # Sourced: the stubs only.
  run bash -c 'source "$1/hpc_files/job_submitter.sh"; ! declare -F _rerun_read_plan && declare -f hpc_rerun' _ "$PROJECT"
  [ "$status" -eq 0 ]
  [[ $output == *"hpc_autoload_now rerun hpc_rerun"* ]]
  run loaded_after --exp-name plain
  [ "${lines[0]}" = "loaded: " ]
  [ "${lines[1]}" = "exit 0" ]
  [ "$(sbatch_calls)" -eq 1 ]
  run loaded_after --exp-name plain2 --dry-run
  [ "${lines[0]}" = "loaded: " ]
  # --rerun of a job the ledger does not know: its library, loaded, refuses it.
  run --separate-stderr submitter --rerun 999999
  echo "$stderr"
  [ "$status" -eq 2 ]
  [[ $stderr == *"999999"* ]]
  # --remote to a host that does not resolve: its library, loaded, says it cannot reach it.
  run --separate-stderr submitter --remote nohost.invalid --exp-name r
  echo "$stderr"
  [ "$status" -ne 0 ]
  [[ $stderr == *"nohost.invalid"* ]]
  [ "$(sbatch_calls)" -eq 1 ]
  # A table naming a function its library does not define: one clear error.
  run --separate-stderr bash -c 'source "$1/hpc_files/job_submitter.sh"; hpc_autoload rerun hpc_no_such; hpc_no_such' _ "$PROJECT"
  [ "$status" -ne 0 ]
  [[ $stderr == *"internal error: "*"/rerun.sh does not define hpc_no_such"* ]]
}

# The project's folder is found by cd -P and back, not a subshell (job_submitter.sh main).
# shellcheck disable=SC2016 # the bash -c scripts expand in that bash
@test "the project's folder: its physical path from a linked path, relative paths from where it ran, and a removed working folder still submits" {
  ln -s "$PROJECT" "$BATS_TEST_TMPDIR/link"
  mkdir -p "$BATS_TEST_TMPDIR/elsewhere"
  printf 'echo from-elsewhere\n' >"$BATS_TEST_TMPDIR/elsewhere/c.txt"
  run --separate-stderr bash -c 'cd "$1" && bash "$2/hpc_files/job_submitter.sh" --dry-run --configs c.txt' _ \
    "$BATS_TEST_TMPDIR/elsewhere" "$BATS_TEST_TMPDIR/link"
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *"export HPC_SOURCE_DIR='$(cd "$PROJECT" && pwd -P)'"* ]]
  [[ $output == *$'\necho from-elsewhere\n'* || $output == *$'\necho from-elsewhere' ]]
  # A cd of the user's (an exported function that prints) is not the one used.
  run --separate-stderr bash -c 'cd() { builtin cd "$@" && echo CD-NOISE; }; export -f cd; builtin cd "$1" && bash "$2/hpc_files/job_submitter.sh" --dry-run --configs c.txt' _ \
    "$BATS_TEST_TMPDIR/elsewhere" "$BATS_TEST_TMPDIR/link"
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *"export HPC_SOURCE_DIR='$(cd "$PROJECT" && pwd -P)'"* && $output != *CD-NOISE* ]]
  # A working folder removed since the shell entered it: the default configs file still.
  mkdir "$BATS_TEST_TMPDIR/gone"
  run --separate-stderr bash -c 'cd "$1" && rmdir "$1" && bash "$2/hpc_files/job_submitter.sh" -e g' _ \
    "$BATS_TEST_TMPDIR/gone" "$BATS_TEST_TMPDIR/link"
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(sbatch_calls)" -eq 1 ]
}
