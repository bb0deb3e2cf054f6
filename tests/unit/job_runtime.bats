#!/usr/bin/env bats
# Job side of the W&B key, on one node without Slurm: job_runtime.sh reads the key file the
# batch script names (HPC_WANDB_KEY_FILE) into WANDB_API_KEY, refuses an unsafe or broken
# one at the job's start, and never prints the key. On the cluster: tests/integration.
# shellcheck disable=SC2016 # the job code in single quotes is expanded by the job shell

load ../helpers/common

setup() {
  hermetic_env
  job_side_env
  KEY="$BATS_TEST_TMPDIR/keys/wandb key"
  mkdir -p "${KEY%/*}"
  SECRET=job-side-secret-0123456789
  (umask 077 && printf '%s\n' "$SECRET" >"$KEY")
}

# job BODY: a batch shell that sources the runtime, begins the job, then runs BODY.
job() {
  run_job_side hpc_job_begin "$1"
}

@test "the key file named by the script becomes WANDB_API_KEY, and is never printed" {
  HPC_WANDB_KEY_FILE=$KEY job 'printf %s "$WANDB_API_KEY" | sha256sum >"$BATS_TEST_TMPDIR/hash"'
  [ "$status" -eq 0 ]
  [ "$(cat "$BATS_TEST_TMPDIR/hash")" = "$(printf %s "$SECRET" | sha256sum)" ]
  [[ $output != *"$SECRET"* && $stderr != *"$SECRET"* ]]
}

@test "no key file named: WANDB_API_KEY is left as it is" {
  WANDB_API_KEY=from-env job 'echo "key=$WANDB_API_KEY"'
  [ "$status" -eq 0 ]
  [[ $output == *"key=from-env"* ]]
}

@test "a key file others can read, a missing one or an empty one stops the job at its start" {
  chmod 640 "$KEY"
  HPC_WANDB_KEY_FILE=$KEY job 'echo ran'
  [ "$status" -ne 0 ] && [[ $output != *ran* ]]
  [[ $stderr == *"W&B API key file $KEY can be read by others (mode 640): chmod 600"* ]]
  HPC_WANDB_KEY_FILE=$KEY.gone job 'echo ran'
  [ "$status" -ne 0 ] && [[ $output != *ran* ]]
  [[ $stderr == *"W&B API key file $KEY.gone is missing or unreadable on this node"* ]]
  : >"$KEY" && chmod 600 "$KEY"
  HPC_WANDB_KEY_FILE=$KEY job 'echo ran'
  [ "$status" -ne 0 ] && [[ $output != *ran* ]]
  [[ $stderr == *"W&B API key file $KEY is empty"* ]]
}

@test "one name for the training processes per node: HPC_DEVICES_PER_NODE (HPC_PROCS_PER_NODE is gone)" {
  run git -C "$REPO_ROOT" grep -n "HPC_PROCS_PER_NODE" -- . ':!tests/unit/job_runtime.bats'
  [ "$status" -eq 1 ] || { echo "$output"; return 1; }
  grep -q '^export HPC_DEVICES_PER_NODE=' "$REPO_ROOT/tests/unit/golden/lightning_2x2.sbatch"
}
