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
  bash -c 'source "$1/hpc_files/job_submitter.sh"; p=$1; shift;
    prepare "$p" 20260101-000000-1 "$@"; hpc_plan_script 0' _ "$PROJECT" "$@" |
    sed "s|$BATS_TEST_TMPDIR|@TMP@|g"
}

# plan_with_commands ARGS...: the batch script, then the commands file's lines: what the
# job really runs (the final commands: count arguments, the torchrun rewrite).
plan_with_commands() {
  bash -c 'source "$1/hpc_files/job_submitter.sh"; p=$1; shift;
    prepare "$p" 20260101-000000-1 "$@"; hpc_plan_script 0
    printf "# ---- commands file (golden files only) ----\n"; printf "%s\n" "${J_COMMANDS[@]}"' \
    _ "$PROJECT" "$@" | sed "s|$BATS_TEST_TMPDIR|@TMP@|g"
}

# golden NAME ARGS...: the script and commands for ARGS equal tests/unit/golden/NAME.sbatch.
golden() {
  local name=$1 file
  shift
  file=$REPO_ROOT/tests/unit/golden/$name.sbatch
  # The local profiles name the cluster's folder: the goldens hold the default one.
  (
    unset HPC_LOCAL_CLUSTER_DIR
    plan_with_commands "$@"
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

@test "golden: 2-node torchrun job: the command is rewritten at submission, count arguments included" {
  printf '%s\n' 'OMP_NUM_THREADS=2 python -u examples/train.py --lr 0.1 # first' 'python -m pkg.train' \
    >"$PROJECT/experiment_configurations.txt"
  golden torchrun_2x2 --which-distributed torchrun --num-nodes 2 --procs-per-node 2 --time 30 \
    --exp-name tr --devices-arg devices
}

@test "golden: 2-node Lightning job with 2 GPUs per node" {
  golden lightning_2x2 --which-distributed lightning --num-nodes 2 --gpus 2 --cpus 8 \
    --mem 32G --time 12:00:00 --exp-name ddp --cluster local --nodes-arg num_nodes
}

@test "the plan is final: the dry run, the scripts and the submission change no J_* value" {
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  seq 0 24 | sed 's/^/python examples\/train.py --i /' >"$PROJECT/experiment_configurations.txt"
  # shellcheck disable=SC2016 # the inner shell expands them
  run --separate-stderr bash -c '
    source "$1/hpc_files/job_submitter.sh"; p=$1; shift
    HPC_MAX_ARRAY_SIZE=10 prepare "$p" 20260101-000000-1 "$@"
    before=$(declare -p ${!J_*})
    { hpc_plan_chunks_note; print_dry_run; for k in "${!J_CHUNKS[@]}"; do hpc_plan_script "$k"; done
      hpc_submit_plan ids; hpc_print_submitted "${ids[@]}"; } >/dev/null
    [[ $(declare -p ${!J_*}) == "$before" ]] && echo "unchanged, ${#ids[@]} chunks"' \
    _ "$PROJECT" -d torchrun --devices-arg devices --max-parallel 3 -e fin
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  [ "$output" = "unchanged, 3 chunks" ]
  [ "$(sbatch_calls)" -eq 3 ]
}

@test "chunk settings apply to that chunk's script only (the format resource blocks use)" {
  # shellcheck disable=SC2016 # the inner shell expands them
  run bash -c '
    source "$1/hpc_files/job_submitter.sh"; p=$1; shift
    prepare "$p" 20260101-000000-1 "$@"
    J_CHUNKS+=("0"$'"'"'\t0\t1\tJ_TIME=00:30:00\tJ_PARTITION=big'"'"')
    hpc_plan_script 1 | grep -E "^#SBATCH --(time|partition)="; echo "plan: $J_TIME/$J_PARTITION"
    hpc_plan_script 0 | grep -c -- "--partition" || true' _ "$PROJECT" --time 10 -e blk
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = '#SBATCH --partition="big"' ]
  [ "${lines[1]}" = '#SBATCH --time="00:30:00"' ]
  [ "${lines[2]}" = "plan: 10/" ]
  [ "${lines[3]}" = 0 ]
}

@test "job-side settings from the submitting environment are written into the script, checked once" {
  HPC_REQUEUE_MARGIN=20 HPC_REQUEUE_ON_TERM=yes HPC_LIGHTNING_HOOK=no run --separate-stderr \
    submitter --dry-run -d lightning -e s
  [ "$status" -eq 0 ]
  grep -qx "export HPC_REQUEUE_MARGIN='20'" <<<"$output"
  grep -qx "export HPC_REQUEUE_ON_TERM='yes'" <<<"$output"
  grep -qx "export HPC_LIGHTNING_HOOK='no'" <<<"$output"
  grep -qx "export HPC_PREEMPT_WATCH='yes'" <<<"$output"
  HPC_REQUEUE_ON_TERM=maybe refused "HPC_REQUEUE_ON_TERM='maybe' is not yes, no or auto" -e s
  [ "$status" -eq 2 ]
  HPC_REQUEUE_MARGIN=15s refused "HPC_REQUEUE_MARGIN='15s' is not a whole number of seconds" -e s
}
