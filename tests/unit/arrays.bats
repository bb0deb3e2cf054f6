#!/usr/bin/env bats
# Arrays longer than the cluster's MaxArraySize go in as several arrays, each with its
# HPC_TASK_OFFSET; a subset of lines keeps its indices. (Recording sbatch, stub scontrol.)

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  # scontrol and scancel stand-ins, first on PATH.
  STUBS=$BATS_TEST_TMPDIR/stubs
  mkdir -p "$STUBS"
  cat >"$STUBS/scontrol" <<'EOF'
#!/bin/sh
printf 'MaxArraySize            = %s\n' "${MAX_ARRAY:-1001}"
EOF
  printf '#!/bin/sh\necho "$@" >>"%s/scancel.log"\n' "$BATS_TEST_TMPDIR" >"$STUBS/scancel"
  chmod +x "$STUBS/scontrol" "$STUBS/scancel"
  export PATH=$STUBS:$PATH
}

# lines N: a commands file of N commands ("echo 0" ... "echo N-1").
lines() {
  seq 0 $(($1 - 1)) | sed 's/^/echo /' >"$PROJECT/experiment_configurations.txt"
}

# script_of N: the batch script of the Nth sbatch call.
script_of() {
  cat "$SBATCH_STUB_LOG.script.$1"
}

@test "2,500 commands on a MaxArraySize of 1001: three arrays, offsets, one commands file" {
  lines 2500
  run --separate-stderr submitter -e big
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 3 ]
  grep -qx '#SBATCH --array="0-1000"' <(script_of 1)
  [[ $(script_of 1) != *HPC_TASK_OFFSET* ]]
  grep -qx '#SBATCH --array="0-1000"' <(script_of 2)
  grep -qx "export HPC_TASK_OFFSET='1001'" <(script_of 2)
  grep -qx '#SBATCH --array="0-497"' <(script_of 3)
  grep -qx "export HPC_TASK_OFFSET='2002'" <(script_of 3)
  [ "${lines[0]}" = "Submitted batch job 4242 (array of 1001 task(s): 0-1000 as array indices 0-1000)" ]
  [ "${lines[1]}" = "Submitted batch job 4243 (array of 1001 task(s): 1001-2001 as array indices 0-1000)" ]
  [ "${lines[2]}" = "Submitted batch job 4244 (array of 498 task(s): 2002-2499 as array indices 0-497)" ]
  # One commands file, named in every script; three scripts; three ledger lines.
  local commands
  commands=$(sed -n "s/^export HPC_COMMANDS_FILE='\(.*\)'$/\1/p" <(script_of 3))
  [ "$(wc -l <"$commands")" -eq 2500 ]
  grep -qF "$commands" <(script_of 1)
  [ "$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/big-*/job-part*.sbatch' | wc -l)" -eq 3 ]
  [ "$(cut -f2,4 "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv")" = $'4242\t1001\n4243\t1001\n4244\t498' ]
  # Without a cap the arrays are independent.
  [ "$(grep -c -- '--dependency' "$SBATCH_STUB_LOG")" = 0 ]
}

@test "the limit is the cluster's: MaxArraySize from scontrol, or the profile's HPC_MAX_ARRAY_SIZE" {
  lines 30
  MAX_ARRAY=10 run --separate-stderr submitter
  [ "$(sbatch_calls)" -eq 3 ]
  grep -qx "export HPC_TASK_OFFSET='20'" <(script_of 3)
  grep -qx '#SBATCH --array="0-9"' <(script_of 3)
  printf 'HPC_MAX_ARRAY_SIZE=25\n' >"$PROJECT/my.conf"
  run --separate-stderr submitter --cluster ./my.conf
  [ "$(sbatch_calls)" -eq 5 ]
  grep -qx '#SBATCH --array="0-4"' <(script_of 5)
}

@test "a real submission asks Slurm once (in the background) and leaves the preemption watch out where the partition cannot preempt" {
  cat >"$STUBS/scontrol" <<EOF
#!/bin/sh
echo "\$*" >>"$BATS_TEST_TMPDIR/scontrol.log"
case "\$*" in
  "show config") printf 'MaxArraySize            = 10\nPreemptType             = preempt/partition_prio\n' ;;
  "-a -o show partition")
    echo "PartitionName=main Default=YES MaxTime=UNLIMITED PreemptMode=OFF State=UP"
    echo "PartitionName=low Default=NO MaxTime=UNLIMITED PreemptMode=REQUEUE State=UP" ;;
esac
EOF
  lines 12
  run --separate-stderr submitter
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ] # MaxArraySize 10: two arrays
  grep -qx "export HPC_PREEMPT_WATCH='no'" <(script_of 1)
  [ "$(grep -c '^show config$' "$BATS_TEST_TMPDIR/scontrol.log")" = 1 ]
  [ "$(grep -c '^-a -o show partition$' "$BATS_TEST_TMPDIR/scontrol.log")" = 1 ]
  # The next submission reads the answers the first kept (cluster.sh): Slurm asked no more.
  run --separate-stderr submitter -p low
  [ "$status" -eq 0 ]
  grep -qx "export HPC_PREEMPT_WATCH='yes'" <(script_of 3)
  [ "$(wc -l <"$BATS_TEST_TMPDIR/scontrol.log")" = 2 ]
  HPC_CLUSTER_CACHE_TTL=0 run --separate-stderr submitter -p main -e other
  [ "$status" -eq 0 ]
  grep -qx "export HPC_PREEMPT_WATCH='no'" <(script_of 5) # (two arrays each: 12 lines)
  [ "$(wc -l <"$BATS_TEST_TMPDIR/scontrol.log")" = 4 ]
  run --separate-stderr submitter -n
  [[ $output == *"export HPC_PREEMPT_WATCH='yes'"* ]] # a dry run asks nothing: the safe yes
}

@test "an array that fits is one ordinary array; without scontrol the limit is Slurm's 1001" {
  lines 1001
  rm "$STUBS/scontrol"
  run --separate-stderr submitter
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  grep -qx '#SBATCH --array="0-1000"' <(script_of 1)
  [ "${lines[0]}" = "Submitted batch job 4242 (array of 1001 tasks, 0-1000)" ]
}

@test "with --max-parallel each array waits for the one before, so the cap holds" {
  lines 25
  MAX_ARRAY=10 run --separate-stderr submitter --max-parallel 4
  [ "$status" -eq 0 ]
  grep -qx '#SBATCH --array="0-9%4"' <(script_of 1)
  [ "$(grep -c -- '--dependency' "$SBATCH_STUB_LOG")" -eq 2 ]
  grep -qx -- '--dependency=afterany:4242' "$SBATCH_STUB_LOG"
  grep -qx -- '--dependency=afterany:4243' "$SBATCH_STUB_LOG"
}

@test "sbatch refusing a later array cancels the earlier ones and removes every file" {
  lines 25
  # An sbatch that accepts the first call only.
  cat >"$STUBS/sbatch" <<EOF
#!/usr/bin/env bash
if [[ -s "$SBATCH_STUB_LOG" ]]; then echo "sbatch: error: QOSMaxSubmitJobPerUserLimit" >&2; exit 1; fi
exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
EOF
  chmod +x "$STUBS/sbatch"
  MAX_ARRAY=10 run --separate-stderr submitter -e x
  [ "$status" -eq 1 ]
  [[ $stderr == *"sbatch did not accept array 2 of 3"* ]]
  [[ $stderr == *"nothing was submitted (jobs 4242 were cancelled)"* ]]
  [ "$(cat "$BATS_TEST_TMPDIR/scancel.log")" = 4242 ]
  [ -z "$(find "$SCRATCH" -type f)" ]
}

@test "--dry-run says how the array is split" {
  lines 2500
  run --separate-stderr submitter --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"# Submitted as 3 array(s) (MaxArraySize 1001); the script below is the first:"* ]]
  [[ $output == *"#   array 2: --array=0-1000, HPC_TASK_OFFSET=1001: 1001 task(s), 1001-2001"* ]]
  [[ $output == *"sbatch --parsable $SCRATCH/proj/hpc_outputs/jobs/default-"*"/job-part1.sbatch"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
}

@test "hpc_plan_chunks: a subset of lines keeps its indices across the limit" {
  run bash -c '
    source "$1/hpc_files/job_submitter.sh"
    J_COMMANDS=($(seq 3000)) J_ARRAY_RANGES="3 999-1003 1500 2999" HPC_MAX_ARRAY_SIZE=1001 J_MAX_PARALLEL=""
    hpc_plan_chunks && printf "%s\n" "${J_CHUNKS[@]}"
    for k in 0 1 2; do hpc_plan_array_to a $k; echo "$a"; done' _ "$REPO_ROOT"
  [ "$status" -eq 0 ]
  # Chunks: the original indices, the offset, one line per task.
  [ "${lines[0]}" = $'3,999-1000\t0\t1' ]
  [ "${lines[1]}" = $'1001-1003,1500\t1001\t1' ]
  [ "${lines[2]}" = $'2999\t2002\t1' ]
  # Their --array indices.
  [ "${lines[3]}" = '3,999-1000' ]
  [ "${lines[4]}" = '0-2,499' ]
  [ "${lines[5]}" = '997' ]
}

@test "job side: HPC_TASK_INDEX is the offset plus the array index" {
  run bash -c '
    source "$1/virtual_env_hpc_files/job_runtime.sh"
    hpc_read_task_command() { :; }; hpc_log() { :; }
    scratch_dir=$2 exp_name=e HPC_TASK_OFFSET=1001 SLURM_ARRAY_TASK_ID=7
    HPC_EXP_DIR=$2/e HPC_OUTPUT_DIR=$2/hpc_outputs HPC_TASK_SUBDIRS=yes
    hpc_job_begin; trap - EXIT; echo "$HPC_TASK_INDEX $HPC_CHECKPOINT_DIR"' _ "$REPO_ROOT" "$BATS_TEST_TMPDIR"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "1008 $BATS_TEST_TMPDIR/e/checkpoints/task_1008" ]
}
