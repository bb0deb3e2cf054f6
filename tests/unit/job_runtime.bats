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
  [ "$status" -ne 0 ]
  [[ $output != *ran* ]]
  [[ $stderr == *"W&B API key file $KEY can be read by others (mode 640): chmod 600"* ]]
  HPC_WANDB_KEY_FILE=$KEY.gone job 'echo ran'
  [ "$status" -ne 0 ]
  [[ $output != *ran* ]]
  [[ $stderr == *"W&B API key file $KEY.gone is missing or unreadable on this node"* ]]
  : >"$KEY" && chmod 600 "$KEY"
  HPC_WANDB_KEY_FILE=$KEY job 'echo ran'
  [ "$status" -ne 0 ]
  [[ $output != *ran* ]]
  [[ $stderr == *"W&B API key file $KEY is empty"* ]]
}

@test "one name for the training processes per node: HPC_DEVICES_PER_NODE (HPC_PROCS_PER_NODE is gone)" {
  run git -C "$REPO_ROOT" grep -n "HPC_PROCS_PER_NODE" -- . ':!tests/unit/job_runtime.bats'
  [ "$status" -eq 1 ] || { echo "$output"; return 1; }
  grep -q '^export HPC_DEVICES_PER_NODE=' "$REPO_ROOT/tests/unit/golden/lightning_2x2.sbatch"
}

@test "HPC_NUM_TASKS is the submission's number of lines: a task of a smaller array (a rerun, a split), an --interactive session, a single job" {
  printf 'echo %s\n' 0 1 2 3 4 >"$HPC_COMMANDS_FILE"
  # Array index 3 of a rerun of 2 tasks: line 3 of 5.
  SLURM_ARRAY_JOB_ID=4240 SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_COUNT=2 \
    job 'echo "index=$HPC_TASK_INDEX of=$HPC_NUM_TASKS"'
  [ "$status" -eq 0 ]
  [[ $output == *"index=3 of=5"* ]]
  [[ $output == *"job 4240_3 (Slurm job 4242, array index 3 of an array of 2 task(s)): line index 3 of 5, attempt 1"* ]]
  # The second array of a split: index 0 runs line 4.
  HPC_TASK_OFFSET=4 SLURM_ARRAY_JOB_ID=4242 SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=1 \
    job 'echo "index=$HPC_TASK_INDEX of=$HPC_NUM_TASKS"'
  [[ $output == *"index=4 of=5"* ]]
  [[ $output == *"job 4242_0 (array index 0 of an array of 1 task(s)): line index 4 of 5, attempt 1"* ]]
  # An --interactive session of task 2.
  HPC_INTERACTIVE_TASK=2 HPC_VENV=none SLURM_TMPDIR=$BATS_TEST_TMPDIR/tmp HPC_LAUNCHER=none \
    run_job_side hpc_interactive_begin 'echo "index=$HPC_TASK_INDEX of=$HPC_NUM_TASKS"'
  echo "$output $stderr"
  [[ $output == *"index=2 of=5"* ]]
  # A single job: its one line.
  echo 'echo only' >"$HPC_COMMANDS_FILE"
  job 'echo "index=$HPC_TASK_INDEX of=$HPC_NUM_TASKS"'
  [[ $output == *"index=0 of=1"* ]]
  [[ $output == *"job 4242, attempt 1"* ]]
}

# A stand-in srun: rank 0 leaves its status "time node rank code" and the step exits 1,
# as when torchrun returns 1 after its workers saved and stopped on the warning.
srun_rank0_exits_1='srun() {
  printf "%s nodeA 0 1\n" "$EPOCHREALTIME" >"$HPC_RANK_STATUS_DIR/rank_0"
  return 1
}
export HPC_NUM_NODES=1'

@test "a rank that ends after the wall-time warning is logged as a stop by design, not as a failure; a rank failing on its own still is one" {
  job "$srun_rank0_exits_1"'
    HPC_SIGNALLED=walltime
    hpc_srun_tasks 1 plain true; echo "rc=$?"'
  echo "$output"
  [[ $output == *"rc=1"* ]]
  [[ $output != *"failed first"* ]]
  [[ $output == *"the ranks stopped after the wall-time warning (rank 0 on nodeA ended first, exit code 1); whether the job resumes is decided next"* ]]
  # Nothing empty left in the experiment folder.
  [ ! -e "$HPC_EXP_DIR/.hpc_ranks" ]
  job "$srun_rank0_exits_1"'
    hpc_srun_tasks 1 plain true; echo "rc=$?"'
  [[ $output == *"rank 0 on nodeA failed first, with exit code 1; the other ranks were stopped (srun exit 1)"* ]]
  [ ! -e "$HPC_EXP_DIR/.hpc_ranks" ]
}
