#!/usr/bin/env bats
# `hpc logs` on packed submissions (--pack N) on the real local cluster: each job's log is
# followed by its lines' own logs (hpc_outputs/EXP-JOB-lineI.out), --line I shows (and -f
# follows) one line's, --failed shows the lines that did not complete; after a --rerun,
# the rerun's logs and what its lines did.

load ../helpers/cluster

setup() {
  integration_setup proj
  # Line i prints who it is, then fails with exit 3 unless $SCRATCH/fixed.i exists.
  # shellcheck disable=SC2016 # run by the job
  printf '%s\n' 'echo "line $1 runs as index $HPC_TASK_INDEX"; sleep "${2:-0}"' \
    'test -e "$SCRATCH/fixed.$1" || { echo "line $1 breaks" >&2; exit 3; }' >"$PROJECT/line.sh"
  local i
  : >"$PROJECT/experiment_configurations.txt"
  for i in 0 1 2 3 4; do
    echo "bash line.sh $i $((i == 4 ? 4 : 0))" >>"$PROJECT/experiment_configurations.txt"
    [[ $i == 1 ]] || touch "$SCRATCH/fixed.$i"
  done
}


@test "hpc logs of a packed submission: each job's log, then its lines' own logs; --line I; -f follows a line; --failed shows the failed line" {
  submit -e pl --time 5 --pack 2 --cpus 2
  local id=$JOB_ID out=$SCRATCH/proj/hpc_outputs
  # -f on line 4 (the last job's, which sleeps 4 s): waits for its log, ends with the task.
  run --separate-stderr hpc logs pl --line 4 -f
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"line 4 runs as index 4"* ]]
  [[ $output != *"line 3 runs"* ]]
  wait_job "$id" 120 3
  [ "$(job_states "$id" | sort | cut -d'|' -f2 | tr '\n' ' ')" = "FAILED COMPLETED COMPLETED " ]

  run --separate-stderr hpc logs pl
  echo "$output"
  [ "$status" -eq 0 ]
  # Every job's log, each followed by its lines' logs, in order, each under a header.
  [ "$(grep '^==> ' <<<"$output" | sed 's/:.*//; s/ <==$//')" = "$(printf '%s\n' \
    "==> task 0 (${id}_0), packed lines 0-1" \
    "==> line 0 (task 0, ${id}_0) done, exit 0" \
    "==> line 1 (task 0, ${id}_0) failed, exit 3" \
    "==> task 1 (${id}_1), packed lines 2-3" \
    "==> line 2 (task 1, ${id}_1) done, exit 0" \
    "==> line 3 (task 1, ${id}_1) done, exit 0" \
    "==> task 2 (${id}_2), packed lines 4" \
    "==> line 4 (task 2, ${id}_2) done, exit 0")" ]
  [[ $output == *"==> line 1 (task 0, ${id}_0) failed, exit 3: $out/pl-$id-line1.out <=="* ]]
  # What each line printed is in the output, under its own header.
  local i
  for i in 0 1 2 3 4; do
    [ "$(sed -n "/^==> line $i /,/^==> /p" <<<"$output" | grep -c 'runs as index')" -eq 1 ]
    sed -n "/^==> line $i /,/^==> /p" <<<"$output" | grep -q "line $i runs as index $i"
  done

  run --separate-stderr hpc logs "${id}_1"
  [ "$(grep -c '^==> ' <<<"$output")" -eq 3 ]
  [[ $output == *"line 2 runs as index 2"*"line 3 runs as index 3"* ]]

  run --separate-stderr hpc logs pl --line 1
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"line 1 runs as index 1"*"line 1 breaks"* ]]
  [[ $output != *"line 0 runs"* ]]
  # The line's log names its job as hpc status does (ARRAYID_TASK), not by its own job id.
  [[ $(head -1 <<<"$output") == "[hpc "*"] job ${id}_0, attempt 1, line 1 (slot "* ]]

  run --separate-stderr hpc logs pl --failed -n 2
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"==> task 0 (${id}_0) FAILED exit 3:0 on node"*", packed lines 0-1: $out/pl-${id}_0.out <=="* ]]
  [[ $output == *"lines that did not complete: 1 (failed, exit 3)"* ]]
  [[ $output == *"==> line 1 (task 0, ${id}_0) failed, exit 3: $out/pl-$id-line1.out <=="$'\n'"line 1 runs as index 1"$'\n'"line 1 breaks"* ]]
  # Only the failed job, and of it only the failed line.
  [ "$(grep -c '^==> ' <<<"$output")" -eq 2 ]
  [[ $output != *"line 0 runs"* ]]

  run --separate-stderr hpc logs pl --line 5
  [ "$status" -eq 2 ]
  [[ $stderr == *"no line 5 in submission pl-"*": its lines are 0-4"* ]]
}

@test "hpc logs of the rerun of a packed job: the line it ran again, and the one it did not" {
  submit -e plr --time 5 --pack 2 --cpus 2
  local first=$JOB_ID
  wait_job "$first" 120 3
  touch "$SCRATCH/fixed.1"
  submit --rerun "$first"
  wait_job "$JOB_ID" 120 1
  [ "$(job_states "$JOB_ID")" = "${JOB_ID}_0|COMPLETED|0:0" ]
  run --separate-stderr hpc logs "$JOB_ID"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep '^==> ' <<<"$output" | sed 's/:.*//; s/ <==$//')" = "$(printf '%s\n' \
    "==> task 0 (${JOB_ID}_0), packed lines 0-1" \
    "==> line 0 (task 0, ${JOB_ID}_0) last run by ${first}_0" \
    "==> line 1 (task 0, ${JOB_ID}_0) done, exit 0")" ]
  [[ $output == *"==> line 0 (task 0, ${JOB_ID}_0) last run by ${first}_0: done, exit 0 <=="* ]]
  [ "$(grep -c 'line 1 runs as index 1' <<<"$output")" -eq 1 ]
  [[ $output != *"line 1 breaks"* ]]
  # The original's line log still holds the failed run.
  run --separate-stderr hpc logs "$first" --line 1
  [[ $output == *"line 1 breaks"* ]]
  run --separate-stderr hpc logs "$JOB_ID" --failed
  [[ $output == *"No failed task in submission"* ]]
}
