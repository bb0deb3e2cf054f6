#!/usr/bin/env bats
# The batch script: golden files for typical submissions, purity, hostile paths.
# Regenerate the golden files after an intended change: UPDATE_GOLDEN=1 bats tests/unit/plan.bats

# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own: SCRATCH is set per test
load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1 --name "run a"'
}

# plan ARGS...: the batch script for these options, with a fixed submission stamp and the
# test's temporary folder written as @TMP@.
plan() {
  bash -c 'source "$1/hpc_files/job_submitter.sh"; p=$1; shift; prepare "$p" "$@";
    hpc_submission_paths 20260101-000000-1; hpc_plan_script' _ "$PROJECT" "$@" |
    sed "s|$BATS_TEST_TMPDIR|@TMP@|g"
}

# golden NAME ARGS...: the script for ARGS equals tests/unit/golden/NAME.sbatch.
golden() {
  local name=$1 file
  shift
  file=$REPO_ROOT/tests/unit/golden/$name.sbatch
  # The local profiles name the cluster's folder: the goldens hold the default one.
  (
    unset HPC_LOCAL_CLUSTER_DIR
    plan "$@"
  ) >"$BATS_TEST_TMPDIR/$name.sbatch"
  if [[ -n ${UPDATE_GOLDEN:-} ]]; then
    cp "$BATS_TEST_TMPDIR/$name.sbatch" "$file"
  fi
  diff -u "$file" "$BATS_TEST_TMPDIR/$name.sbatch"
}

@test "golden: one GPU job on the local profile" {
  golden single_gpu --gpus 1 --cpus 4 --time 01:00:00 --exp-name baseline --cluster local
}

@test "golden: CPU array of three commands with a concurrency cap and memory" {
  # shellcheck disable=SC1003 # a literal backslash ending a configs line
  printf '%s\n' 'python a.py --x 1' '# skipped' 'python a.py \' '  --x 2' '' 'python a.py --x "3 4"' \
    >"$PROJECT/experiment_configurations.txt"
  golden cpu_array --cpus 2 --mem 4G --max-parallel 2 --exp-name sweep1 --time 2-00:00
}

@test "golden: Compute Canada profile with account, GPU type, memory per GPU and modules" {
  golden computecanada --cluster computecanada --account def-someone --gpus 4 \
    --gpu-type v100l --mem-per-gpu 12G --time 3-00:00:00 --exp-name big
}

@test "the plan is pure: same inputs, same script" {
  local a b
  a=$(plan --gpus 2 --exp-name x)
  b=$(plan --gpus 2 --exp-name x)
  [ "$a" = "$b" ]
}

@test "every generated script is valid bash and passes shellcheck" {
  command -v shellcheck
  plan --gpus 1 --exp-name x >"$BATS_TEST_TMPDIR/s.sbatch"
  bash -n "$BATS_TEST_TMPDIR/s.sbatch"
  shellcheck -s bash "$BATS_TEST_TMPDIR/s.sbatch"
}

@test "#SBATCH lines come in a stable order with quoted values" {
  run plan --gpus 1 --mem 8G --time 10 --partition p --account a --exp-name x
  [ "$status" -eq 0 ]
  local got
  got=$(grep '^#SBATCH' <<<"$output" | sed 's/=.*//')
  [ "$got" = "$(printf '#SBATCH --%s\n' job-name account partition nodes ntasks-per-node \
    cpus-per-task gres mem time output open-mode signal requeue)" ]
  ! grep '^#SBATCH --[a-z-]*=[^"]' <<<"$output" || false
}

@test "hostile project and scratch paths reach the job exactly (spaces, quotes, ;, \$, leading dash)" {
  local name="-my proj 'q' \"d\" ; \$(x) \`y\` é"
  make_project "$name" 'echo hi'
  SCRATCH="$BATS_TEST_TMPDIR/scr atch ; 'x'"
  mkdir -p "$SCRATCH"
  plan --exp-name x >"$BATS_TEST_TMPDIR/s.sbatch"
  bash -n "$BATS_TEST_TMPDIR/s.sbatch"
  # Run the script's export lines alone and compare what they set.
  local exports
  exports=$(sed "s|@TMP@|$BATS_TEST_TMPDIR|g" "$BATS_TEST_TMPDIR/s.sbatch" | grep '^export ')
  run bash -c "$exports"$'\nprintf "%s\\n" "$source_dir" "$project_name" "$scratch_dir"'
  [ "${lines[0]}" = "$PROJECT" ]
  [ "${lines[1]}" = "$name" ]
  [ "${lines[2]}" = "$SCRATCH/$name" ]
}

@test "a path with a newline cannot reach an #SBATCH line" {
  SCRATCH="$BATS_TEST_TMPDIR/a"$'\n'"b"
  mkdir -p "$SCRATCH"
  run --separate-stderr submitter --dry-run
  [ "$status" -ne 0 ]
  [[ $stderr == *"SCRATCH holds a newline"* ]]
}

@test "double quotes in a path are escaped the way sbatch reads them" {
  SCRATCH="$BATS_TEST_TMPDIR/a\"b"
  mkdir -p "$SCRATCH"
  run --separate-stderr submitter --dry-run -e x
  [ "$status" -eq 0 ]
  grep -qxF "#SBATCH --output=\"$BATS_TEST_TMPDIR/a\\\"b/proj/hpc_outputs/x-%j.out\"" <<<"$output"
}

@test "a '%' in the scratch path or project name is doubled for --output, the real path is shown" {
  SCRATCH="$BATS_TEST_TMPDIR/50%j off"
  mkdir -p "$SCRATCH"
  make_project 'p%a' 'python examples/train.py'
  run --separate-stderr submitter --dry-run -e x
  [ "$status" -eq 0 ]
  grep -qxF "#SBATCH --output=\"$BATS_TEST_TMPDIR/50%%j off/p%%a/hpc_outputs/x-%j.out\"" <<<"$output"
  run --separate-stderr submitter -e x
  [ "$status" -eq 0 ]
  [[ $output == *"log:    $SCRATCH/p%a/hpc_outputs/x-4242.out"* ]]
}

@test "a backslash in SCRATCH or the project name is refused: Slurm would not expand %j" {
  SCRATCH="$BATS_TEST_TMPDIR/a\\b"
  mkdir -p "$SCRATCH"
  refused "SCRATCH=$SCRATCH holds a backslash" -e x
  [ "$status" -eq 2 ]
  SCRATCH=$BATS_TEST_TMPDIR/scratch
  HPC_PROJECT_NAME='my\proj' refused "the project name 'my\\proj' holds a backslash" -e x
  [ "$status" -eq 2 ]
}

@test "the command never travels in the script or the environment, only in the commands file" {
  run --separate-stderr submitter --dry-run --exp-name x
  [ "$status" -eq 0 ]
  local script=${output%%# ---- commands*}
  [[ $script != *"examples/train.py"* ]]
  [[ $output == *$'one per array task'*$'\npython examples/train.py --lr 0.1 --name "run a"' ]]
}

@test "dry run prints the exact sbatch argv and writes and submits nothing" {
  run --separate-stderr submitter --dry-run --exp-name x
  [ "$status" -eq 0 ]
  [[ ${lines[1]} == "sbatch --parsable $SCRATCH/proj/hpc_outputs/jobs/x-"*".sbatch" ]]
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
}

@test "golden: 2-node Lightning job with 2 GPUs per node" {
  golden lightning_2x2 --which-distributed lightning --num-nodes 2 --gpus 2 --cpus 8 \
    --mem 32G --time 12:00:00 --exp-name ddp --cluster local --nodes-arg num_nodes
}
