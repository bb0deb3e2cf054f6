#!/usr/bin/env bats
# --pack N and --lines-per-job K on the submitting side: refusals (exit 2, nothing
# submitted or written), the number of jobs, and what the batch script exports.

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'echo 0' 'echo 1' 'echo 2' 'echo 3' 'echo 4'
}

# refused_2 MESSAGE ARGS...: refused as bad input: exit 2, the message, nothing submitted.
refused_2() {
  refused "$@" || return 1
  [ "$status" -eq 2 ] || { echo "exit $status, not 2: $stderr"; return 1; }
}

@test "--pack must divide the job's GPUs, or its CPUs in a CPU job" {
  refused_2 "--pack 3 must divide the job's 4 GPU(s) per node" --pack 3 --gpus 4
  refused_2 "--pack 2 must divide the job's 3 GPU(s)" --pack 2 --gpus 3 --cpus 2
  refused_2 "--pack 4 must divide the job's 2 CPU(s)" --pack 4 --cpus 2
  refused_2 "--pack 2 must divide the job's 1 CPU(s)" --pack 2
}

@test "--pack and --lines-per-job are whole numbers of at least 1" {
  refused_2 "--pack must be a whole number, not 'two'" --pack two
  refused_2 "--pack must be at least 1, not '0'" --pack 0
  refused_2 "--lines-per-job must be at least 1, not '0'" --lines-per-job 0
  refused_2 "--lines-per-job 2 is fewer than --pack 4" --pack 4 --cpus 4 --lines-per-job 2
  refused_2 "option --pack needs a value" --pack
}

@test "packing with a distributed launcher, a sweep or --interactive is refused" {
  refused_2 "--which-distributed lightning starts its own processes" --pack 2 --gpus 2 -d lightning
  refused_2 "--which-distributed torchrun starts its own processes" --pack 2 --gpus 4 -d torchrun -N 2
  refused_2 "packing is not defined for it" --lines-per-job 4 -d script --cpus 2
  refused_2 "cannot be used with --interactive" --pack 2 --cpus 2 --interactive
}

@test "5 lines, --pack 2: an array of 3 jobs; the script exports the packing, the dry run says it" {
  run --separate-stderr submitter --pack 2 --gpus 4 --cpus 2 --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *'#SBATCH --array="0-2"'* ]]
  [[ $output == *"export HPC_PACK='2'"* ]]
  [[ $output == *"export HPC_PACK_LINES='2'"* ]]
  [[ $output == *"export HPC_PACK_TOTAL='5'"* ]]
  [[ $output == *"# Packed: 5 line(s) in 3 job(s) of up to 2 line(s), 2 at once, 2 GPU(s) each"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "5 lines, --pack 2, submitted: the ledger counts the array's 3 jobs, not its 5 lines (hpc status, --rerun)" {
  run --separate-stderr submitter --pack 2 --gpus 4 --cpus 2
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  [ "$(tail -1 "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv" | cut -f4)" = 3 ]
}

@test "--lines-per-job alone: K lines one after another in each job; 5 lines in one job are an array of one task" {
  run --separate-stderr submitter --lines-per-job 5 --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *'#SBATCH --array="0-0"'* ]]
  [[ $output == *"export HPC_TASK_SUBDIRS='no'"* ]]
  [[ $output == *"export HPC_PACK='1'"* ]]
  [[ $output == *"export HPC_PACK_LINES='5'"* ]]
  [[ $output == *"# Packed: 5 line(s) in 1 job(s) of up to 5 line(s), 1 at once, 1 CPU(s) each"* ]]
  run --separate-stderr submitter --pack 2 --cpus 2 --lines-per-job 4
  [ "$status" -eq 0 ]
  [[ $output == *"array of 2 tasks, 0-1"* ]]
  [ "$(sbatch_calls)" -eq 1 ]
}

@test "without --pack the script exports nothing about packing" {
  run --separate-stderr submitter --dry-run
  [ "$status" -eq 0 ]
  [[ $output != *HPC_PACK* ]]
  [[ $output == *'#SBATCH --array="0-4"'* ]]
}

@test "job side: a CPU list as Linux writes it becomes one CPU per element" {
  # shellcheck disable=SC2016 # the job side's code
  run_job_side "" '_hpc_pack_list_to cpus "0-3,8,10-11"; echo "${cpus[*]}"; _hpc_pack_list_to cpus ""; echo "${#cpus[@]}"'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "0 1 2 3 8 10 11" ]
  [ "${lines[1]}" = "0" ]
}

@test "job side without Slurm: 5 lines, 2 at once, each with its index, checkpoint folder and exit code; the first failure is the job's" {
  unset SLURM_JOB_ID
  export scratch_dir=$BATS_TEST_TMPDIR/scratch/proj exp_name=e source_dir=$BATS_TEST_TMPDIR
  export HPC_EXP_DIR=$scratch_dir/e HPC_OUTPUT_DIR=$scratch_dir/hpc_outputs HPC_TASK_SUBDIRS=no
  export HPC_COMMANDS_FILE=$BATS_TEST_TMPDIR/s.commands HPC_LAUNCHER=none HPC_REQUEUE=no
  export HPC_PACK=2 HPC_PACK_LINES=5 HPC_PACK_TOTAL=5 HPC_MAX_RESTARTS=1 HPC_SIGNAL_GRACE=10
  # shellcheck disable=SC2016 # the lines' text
  printf '%s\n' 'echo "i=$HPC_TASK_INDEX ck=${HPC_CHECKPOINT_DIR##*/}"' 'exit 4' 'true' 'exit 6' 'true' >"$HPC_COMMANDS_FILE"
  run_job_side "hpc_job_begin" 'hpc_run_command'
  echo "$output"
  [ "$status" -eq 4 ]
  [[ $output == *"pack: 2 of 5 line(s) did not complete: line 1 (failed, exit 4), line 3 (failed, exit 6); the job fails (exit 4)"* ]]
  [ "$(tail -n 1 "$scratch_dir/hpc_outputs/e-local-line0.out")" = "i=0 ck=task_0" ]
  [[ $(cat "$BATS_TEST_TMPDIR/s.lines/3") =~ ^state=failed\ exit=6\ job=local-[0-9]+\ attempt=1\ seconds=[0-9]+$ ]]
  [[ $(cat "$BATS_TEST_TMPDIR/s.lines/4") == "state=done exit=0 "* ]]
}

@test "MaxJobCount counts jobs, not lines, when packed" {
  local i
  for ((i = 0; i < 12; i++)); do echo "echo $i"; done >"$PROJECT/experiment_configurations.txt"
  export HPC_MAX_JOB_COUNT=5
  refused_2 "12 tasks are more than the 5 jobs this cluster holds at once" --dry-run
  refused_2 "the configs file's 12 commands, 2 per job: 6 tasks are more than the 5 jobs" --pack 2 --cpus 2 --dry-run
  run --separate-stderr submitter --pack 2 --cpus 2 --lines-per-job 3 --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *'#SBATCH --array="0-3"'* ]]
}

@test "packing a configs file with '#hpc:' resource blocks is refused, nothing written" {
  make_project proj 'echo 0' '#hpc: --cpus 4' 'echo 1' 'echo 2'
  refused_2 "cannot be used with '#hpc:' resource blocks" --pack 2 --cpus 2
  refused_2 "cannot be used with '#hpc:' resource blocks" --lines-per-job 2
}
