#!/usr/bin/env bats
# --rerun on a cluster WITHOUT slurmdbd (JobCompType=jobcomp/filetxt only): sacct fails,
# and the states come from where `hpc status` finds them (the job completion log, squeue,
# scontrol). This file starts its own jobcomp-only cluster beside whichever one the run
# uses (its folder + "_rerunjc", its ports 200 higher; after_submit_jobcomp's is at +100,
# sweep_split's at +50) and stops it at the end.

load ../helpers/cluster

setup_file() {
  cluster_beside_start _rerunjc 200 HPC_LOCAL_ACCOUNTING=jobcomp
}

teardown_file() {
  cluster_beside _rerunjc 200 HPC_LOCAL_ACCOUNTING=jobcomp -- stop
}

setup() {
  integration_setup proj
  run sacct -X -j 1
  [ "$status" -ne 0 ]
  [[ $output == *"accounting storage is disabled"* ]]
}

@test "no accounting: the failed task is found from the job completion log and rerun alone" {
  # shellcheck disable=SC2016 # run by the job
  printf '%s\n' 'echo zero' 'echo "task $HPC_TASK_INDEX" >>"$SCRATCH/ran"; test -e "$SCRATCH/fixed"' 'sleep 2' \
    >"$PROJECT/experiment_configurations.txt"
  submit -e jc --time 5
  local first=$JOB_ID
  # While a task runs or waits: refused, whatever the source.
  run --separate-stderr submitter --rerun "$first"
  [ "$status" -eq 2 ]
  [[ $stderr == *"are still queued or running"* ]]
  wait_gone "$first"
  touch "$SCRATCH/fixed"
  submit --rerun "$first"
  echo "$output"
  [[ $output == *"1 task(s) did not complete:"* ]]
  [[ $output == *"task 1 (line 2): FAILED (exit 1:0), was ${first}_1"* ]]
  [[ $output == *"Submitted batch job $JOB_ID (array of 1 task(s) as array indices 1)"* ]]
  wait_gone "$JOB_ID"
  [ "$(cat "$SCRATCH/ran")" = "$(printf 'task 1\ntask 1\n')" ]
  # The completion log has the rerun task's end: completed.
  run --separate-stderr hpc status "$JOB_ID" --scratch-dir "$SCRATCH/proj"
  echo "$output"
  [ "$(awk -v j="${JOB_ID}_1" '$2 == j { print $1, $3 }' <<<"$output")" = "1 COMPLETED" ]
}
