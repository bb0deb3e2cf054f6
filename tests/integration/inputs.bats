#!/usr/bin/env bats
# Inputs of issue 12 that only the real Slurm can judge: a '%' in the log's path (sbatch
# --output expands it), a fresh install's default submission, the message when sbatch
# refuses a request no node can hold, and --nodes-arg reaching the program.
# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own: SCRATCH and PROJECT are set per test

load ../helpers/cluster

setup() {
  integration_setup proj
}

@test "a '%' in SCRATCH and the project name: the log lands at the literal path" {
  export SCRATCH="$BATS_TEST_TMPDIR/scr %j 100%"
  mkdir -p "$SCRATCH"
  make_project 'p%x'
  "$TEST_VENV/bin/python3" -m venv --without-pip "$PROJECT/.venv"
  printf 'echo logged-here\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name pct --time 5
  [[ $output == *"log:    $SCRATCH/p%x/hpc_outputs/pct-$JOB_ID.out"* ]]
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q logged-here "$SCRATCH/p%x/hpc_outputs/pct-$JOB_ID.out"
  # Nothing was written under a name Slurm expanded (e.g. "scr <jobid> 100...").
  [ "$(find "$BATS_TEST_TMPDIR" -maxdepth 1 -name 'scr *' | wc -l)" -eq 1 ]
}

@test "install into a fresh project, then the default submission runs every line to COMPLETED" {
  local fresh=$BATS_TEST_TMPDIR/fresh_project
  mkdir -p "$fresh"
  bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$fresh" >/dev/null
  "$TEST_VENV/bin/python3" -m venv --without-pip "$fresh/.venv"
  PROJECT=$fresh
  submit --time 5
  wait_job "$JOB_ID"
  [ "$(job_states "$JOB_ID" | cut -d'|' -f2 | sort | uniq -c | awk '{print $1, $2}')" = "2 COMPLETED" ]
}

@test "--gpus 6 on 4-GPU, 4-CPU nodes: the message names the GPU and CPU limits and what to pass" {
  run --separate-stderr submitter --gpus 6 --time 5 -e big
  [ "$status" -eq 1 ]
  [[ $stderr == *"--gpus 6 is more than the 4 GPU(s) per node"* ]]
  [[ $stderr == *"asks for 6 CPUs per node (the default: 6 process(es) x 1 CPU(s)"*"pass --cpus 4"* ]]
  run --separate-stderr submitter --gpus 2 --cpus 6 --time 5 -e big -p tmpdir
  [ "$status" -eq 1 ]
  [[ $stderr == *"--cpus 6 is more than the 4 CPUs per node of the nodes of partition tmpdir"* ]]
  [ -z "$(ls "$SCRATCH/proj/hpc_outputs/jobs")" ]
}

@test "--nodes-arg and --devices-arg reach the program although the line ends in a comment" {
  printf 'python argv_dump.py na --lr 0.1 # our baseline; see notes\n' >"$PROJECT/experiment_configurations.txt"
  submit -d script --procs-per-node 1 --nodes-arg num_nodes --devices-arg devices -e na --time 5
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["argv"]; assert a == ["--lr", "0.1", "--num_nodes", "1", "--devices", "1"], a' \
    "$SCRATCH/proj/na/checkpoints/na.json"
}

@test "a command just under the longest a node can run (127 KiB) runs there; the log shows its start and length (issue 32)" {
  local long
  long=$(head -c 129900 /dev/zero | tr '\0' x)
  printf ': %s; echo ran-the-long-line\n' "$long" >"$PROJECT/experiment_configurations.txt"
  submit --exp-name long --time 5
  wait_job "$JOB_ID"
  local log
  log=$(job_log "$JOB_ID" long)
  [ "$(job_state "$JOB_ID")" = COMPLETED ] || { head -c 3000 "$log"; return 1; }
  grep -qx 'ran-the-long-line' "$log"
  grep -q "command: : xxx.* ... (129926 bytes in all: the whole command is line 1 of " "$log" || { grep -o "command: .\{0,20\}\|\.\.\. (.*" "$log"; return 1; }
  (($(wc -c <"$log") < 20000))
}

@test "SBATCH_* in the researcher's environment: the plan's name, time and array win (said); SBATCH_PARTITION is the partition planned; a '%a' in the scratch path prints as it is" {
  export SCRATCH="$BATS_TEST_TMPDIR/scr%a"
  mkdir -p "$SCRATCH"
  make_project proj
  "$TEST_VENV/bin/python3" -m venv --without-pip "$PROJECT/.venv"
  printf 'echo one\necho two\n' >"$PROJECT/experiment_configurations.txt"
  export SBATCH_JOB_NAME=other SBATCH_TIMELIMIT=7 SBATCH_ARRAY_INX=1 SBATCH_PARTITION=short
  submit --exp-name envsb --time 3
  [[ $stderr == *"not used for this submission: SBATCH_ARRAY_INX=1, SBATCH_JOB_NAME=other, SBATCH_TIMELIMIT=7 "* ]]
  [[ $stderr != *SBATCH_PARTITION* ]] # taken into the plan
  [[ $output == *"logs:   $SCRATCH/proj/hpc_outputs/envsb-${JOB_ID}_<task>.out"* ]]
  unset SBATCH_JOB_NAME SBATCH_TIMELIMIT SBATCH_ARRAY_INX SBATCH_PARTITION
  wait_job "$JOB_ID"
  # Both tasks, under the experiment's name, with the plan's time, on SBATCH_PARTITION's partition.
  [ "$(sacct -X -n -P -j "$JOB_ID" -o JobID,JobName,Timelimit,Partition,State | sort)" = "$(printf '%s\n' "${JOB_ID}_0|envsb|00:03:00|short|COMPLETED" "${JOB_ID}_1|envsb|00:03:00|short|COMPLETED")" ]
  grep -qx one "$SCRATCH/proj/hpc_outputs/envsb-${JOB_ID}_0.out"
}
