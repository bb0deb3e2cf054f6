# shellcheck shell=bash
bats_require_minimum_version 1.5.0
# Shared set-up for the bats tests: a hermetic environment and throw-away projects.

REPO_ROOT=$(cd -- "${BATS_TEST_DIRNAME}/../.." && pwd -P)
export REPO_ROOT
# The test venv (torch CPU, lightning, wandb, hpc_toolkit): made by
# tests/setup/install_deps.sh from /usr/bin/python3 at a path every user can read.
TEST_VENV=${HPC_TEST_VENV:-/opt/hpc_files/test-venv}

load ../helpers/users

# researcher CMD...: CMD as the researcher the test plays: in integration tests the normal
# user HPC_TEST_USER (integration_setup sets TEST_AS_USER), elsewhere the caller. What root
# made under the test's folder is handed to that user first (hand_over).
researcher() {
  if [[ -n ${TEST_AS_USER:-} ]]; then
    hand_over
    as_user "$@"
  else
    command "$@"
  fi
}

# hand_over: every file root made under the test's folder (the test's own writes:
# configurations, scripts, data) becomes the test user's, as if that user had written it.
# Files of other users (HPC_OTHER_USER's) keep their owner.
hand_over() {
  [[ -n ${TEST_AS_USER:-} ]] || return 0
  find "$BATS_TEST_TMPDIR" -xdev -uid 0 -exec chown -h "$HPC_TEST_USER:" {} + 2>/dev/null || true
}

# hermetic_env: HOME, SCRATCH and PATH of the test's own; no Slurm or HPC_* variables
# leak in from the machine running the tests.
hermetic_env() {
  local v
  for v in $(compgen -e); do
    case $v in
      SLURM_CONF | HPC_LOCAL_CLUSTER_DIR | HPC_TEST_RUN_DIR) ;;
      SLURM_* | HPC_* | SBATCH_* | SRUN_*) unset "$v" ;;
    esac
  done
  export HOME=$BATS_TEST_TMPDIR/home
  export SCRATCH=$BATS_TEST_TMPDIR/scratch
  mkdir -p "$HOME" "$SCRATCH"
}

# use_sbatch_stub: the recording sbatch first on PATH (unit tests only), then Slurm's other
# commands as stubs that find no cluster: a real cluster running on this machine (the 24.11
# run starts its cluster before the unit tests) must not answer a unit test.
use_sbatch_stub() {
  export SBATCH_STUB_LOG=$BATS_TEST_TMPDIR/sbatch.log
  : >"$SBATCH_STUB_LOG"
  export PATH=$REPO_ROOT/tests/helpers/stubs:$REPO_ROOT/tests/helpers/stubs/no_cluster:/usr/local/bin:/usr/bin:/bin
}

# no_sbatch_on_path: the machine's usual PATH, less every Slurm command.
# sbatch_env_stub: an sbatch first on PATH that records its environment, then records
# its call like the usual stub.
sbatch_env_stub() {
  mkdir -p "$BATS_TEST_TMPDIR/envbin"
  cat >"$BATS_TEST_TMPDIR/envbin/sbatch" <<EOF
#!/usr/bin/env bash
env >>"$BATS_TEST_TMPDIR/sbatch.env"
exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
EOF
  chmod +x "$BATS_TEST_TMPDIR/envbin/sbatch"
  export PATH=$BATS_TEST_TMPDIR/envbin:$PATH
}

# job_side_env: what a batch script sets before sourcing job_runtime.sh, for tests of the
# job side on one node without Slurm: job 4242 on nodeA, experiment e, one command (true).
job_side_env() {
  export scratch_dir=$BATS_TEST_TMPDIR/scratch/proj exp_name=e
  # The project folder the job cds into: the test's own (bash 5.3 refuses `cd ""`, where
  # 5.2 stayed put: an unset source_dir failed the job side only on Debian sid's bash).
  export source_dir=$PWD
  # The plan's paths, as a batch script exports them (hpc_files/lib/plan.sh).
  export HPC_EXP_DIR=$scratch_dir/$exp_name HPC_OUTPUT_DIR=$scratch_dir/hpc_outputs HPC_TASK_SUBDIRS=no
  export HPC_COMMANDS_FILE=$BATS_TEST_TMPDIR/commands
  echo 'true' >"$HPC_COMMANDS_FILE"
  export SLURM_JOB_ID=4242 SLURMD_NODENAME=nodeA
}

# run_job_side STEPS BODY: `run` a batch shell that sources job_runtime.sh, takes STEPS
# (e.g. "hpc_job_begin"), then runs BODY.
run_job_side() {
  # shellcheck disable=SC2016 # $1, $2 and $3 are the inner shell's arguments
  run --separate-stderr bash -c 'source "$1/virtual_env_hpc_files/job_runtime.sh" || exit 9
    eval "$2"; eval "$3"' _ "$REPO_ROOT" "$1" "$2"
}

no_sbatch_on_path() {
  local bin=$BATS_TEST_TMPDIR/bin tool
  mkdir -p "$bin"
  for tool in /usr/local/bin/* /usr/bin/* /bin/*; do
    case ${tool##*/} in
      sbatch | srun | salloc | squeue | scancel | scontrol | sinfo | sacct) continue ;;
    esac
    [[ -e $bin/${tool##*/} ]] || ln -s "$tool" "$bin/${tool##*/}"
  done
  export PATH=$bin
}

# make_project NAME [CONFIG_LINE...]: the toolkit installed into a fresh project folder
# called NAME (any characters), with these lines as experiment_configurations.txt.
# Prints nothing; sets PROJECT.
make_project() {
  PROJECT=$BATS_TEST_TMPDIR/$1
  shift
  mkdir -p "$PROJECT"
  bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$PROJECT" >/dev/null
  # (install_into_project.sh already made examples/ with the scripts the templates run)
  mkdir -p "$PROJECT/examples" && cp -R "$REPO_ROOT/examples/." "$PROJECT/examples/"
  if (($#)); then
    printf '%s\n' "$@" >"$PROJECT/experiment_configurations.txt"
  fi
}

# submitter ARGS...: run the project's job_submitter.sh from inside the project, as the
# researcher (the normal user in integration tests).
submitter() {
  (cd "$PROJECT" && researcher bash hpc_files/job_submitter.sh "$@")
}

# sbatch_calls: how many times the stub was called.
sbatch_calls() {
  grep -c '^--$' "$SBATCH_STUB_LOG" || true
}

# scratch_is_empty: nothing was written under $SCRATCH.
scratch_is_empty() {
  [[ -z $(find "$SCRATCH" -mindepth 1 -print -quit) ]]
}

# refused MESSAGE ARGS...: the submission fails, stderr holds MESSAGE, stdout is empty,
# sbatch was not called and nothing was written under $SCRATCH.
refused() {
  local message=$1
  shift
  run --separate-stderr submitter "$@"
  if [ "$status" -eq 0 ] || [[ $stderr != *"$message"* ]]; then
    echo "args: $* -> status $status, stderr: $stderr"
    return 1
  fi
  [ -z "$output" ] || { echo "stdout not empty: $output"; return 1; }
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
}
