#!/usr/bin/env bats
# The first line of a job's log says which array task it is and which line(s) of the
# submission it runs, truly, when array indices are not line numbers: a --rerun (indices
# kept, fewer tasks), resource blocks (one array per block, indices kept), an array split
# at MaxArraySize (HPC_TASK_OFFSET), a packed job; HPC_NUM_TASKS is the submission's
# number of lines in each of them.

load ../helpers/cluster

setup() {
  integration_setup proj
  # Each line says what it sees, then fails unless $SCRATCH/fixed.N exists.
  # shellcheck disable=SC2016 # run by the job
  echo 'echo "seen index=$HPC_TASK_INDEX of=$HPC_NUM_TASKS"; test -e "$SCRATCH/fixed.$1"' >"$PROJECT/line.sh"
}

# header EXP JOB INDEX: the first line of array task JOB_INDEX's log, without its prefix.
header() {
  local log
  log=$(job_log "$2" "$1" "$3")
  head -1 "$log" | sed 's/^\[hpc [^]]*\] //'
}

@test "a rerun's task: its array index of the rerun's tasks, its line of the submission's" {
  failing_lines 5 1 3
  submit -e rr --time 5
  local first=$JOB_ID
  wait_job "$first" 120 5
  header rr "$first" 3
  [[ $(header rr "$first" 3) == "job ${first}_3 ("*"array index 3 of an array of 5 task(s)): line index 3 of 5, attempt 1, nodes node"* ]]
  touch "$SCRATCH/fixed.1" "$SCRATCH/fixed.3"
  submit --rerun "$first"
  wait_job "$JOB_ID" 120 2
  local h
  h=$(header rr "$JOB_ID" 3)
  echo "$h"
  [[ $h == "job ${JOB_ID}_3 ("*"array index 3 of an array of 2 task(s)): line index 3 of 5, attempt 1, nodes node"* ]]
  [[ $h != *"array task 3 of 2"* ]]
  grep -qx 'seen index=3 of=5' "$(job_log "$JOB_ID" rr 3)"
  grep -qx 'seen index=1 of=5' "$(job_log "$JOB_ID" rr 1)"
}

@test "resource blocks and a split array: each task's header names its own array and its line of the whole file" {
  failing_lines 4
  # Lines 0 and 3: the command line's options (one array, indices 0,3); 1 and 2: --cpus 2.
  sed -i '2i #hpc: --cpus 2' "$PROJECT/experiment_configurations.txt"
  sed -i '5i #hpc:' "$PROJECT/experiment_configurations.txt"
  cat "$PROJECT/experiment_configurations.txt"
  submit -e bl --time 5
  local -a parts
  mapfile -t parts < <(submitted_ids)
  [ "${#parts[@]}" -eq 2 ]
  wait_job "${parts[0]}" 120 2
  wait_job "${parts[1]}" 120 2
  local h
  h=$(header bl "${parts[0]}" 3)
  echo "$h"
  [[ $h == "job ${parts[0]}_3 ("*"array index 3 of an array of 2 task(s)): line index 3 of 4, attempt 1"* ]]
  h=$(header bl "${parts[1]}" 2)
  echo "$h"
  [[ $h == "job ${parts[1]}_2 ("*"array index 2 of an array of 2 task(s)): line index 2 of 4, attempt 1"* ]]
  grep -qx 'seen index=2 of=4' "$(job_log "${parts[1]}" bl 2)"

  # Split at MaxArraySize 2: the second array's index 0 runs line index 2.
  failing_lines 3
  HPC_MAX_ARRAY_SIZE=2 submit -e sp --time 5
  mapfile -t parts < <(submitted_ids)
  [ "${#parts[@]}" -eq 2 ]
  wait_job "${parts[1]}" 120 1
  h=$(header sp "${parts[1]}" 0)
  echo "$h"
  [[ $h == "job ${parts[1]}_0 ("*"array index 0 of an array of 1 task(s)): line index 2 of 3, attempt 1"* ]]
  grep -qx 'seen index=2 of=3' "$(job_log "${parts[1]}" sp 0)"
}

@test "a packed job's header names the lines it runs; each line sees the submission's number of lines" {
  failing_lines 3
  submit -e pk --time 5 --pack 2 --cpus 2
  wait_job "$JOB_ID" 120 2
  local h
  h=$(header pk "$JOB_ID" 1)
  echo "$h"
  [[ $h == "job ${JOB_ID}_1 ("*"array index 1 of an array of 2 task(s)): packed line 2 of 3, attempt 1"* ]]
  grep -q '\] command: (packed: line 2; its command is logged when it starts)$' "$(job_log "$JOB_ID" pk 1)"
  h=$(header pk "$JOB_ID" 0)
  [[ $h == "job ${JOB_ID}_0 ("*"array index 0 of an array of 2 task(s)): packed lines 0-1 of 3, attempt 1"* ]]
  grep -q '\] command: (packed: lines 0-1, 2 at once; each line.s command is logged when it starts)$' "$(job_log "$JOB_ID" pk 0)"
  grep -qx 'seen index=1 of=3' "$SCRATCH/proj/hpc_outputs/pk-$JOB_ID-line1.out"
}

# field FILE EXPR: a value from a JSON file (python expression on d).
field() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

@test "the log shows the line as written (command:) and as it ran (runs as:, expanded, quoted), on 1 node and as rank 0 of 2" {
  # shellcheck disable=SC2016 # expanded by the job
  local line='python argv_dump.py a$SLURM_PROCID --dataset=$SLURM_TMPDIR/data --name "$HPC_TASK_INDEX run" --star '"'*'"
  printf '%s\n' "$line" >"$PROJECT/experiment_configurations.txt"
  local exp log tmp rec
  for exp in one two; do
    if [[ $exp == one ]]; then
      submit -e one --time 5
    else
      submit -e two --time 5 -d script --num-nodes 2
    fi
    wait_job "$JOB_ID" 120
    log=$(job_log "$JOB_ID" "$exp")
    cat "$log"
    grep -qF "command: $line" "$log"
    # What the program got (argv_dump's record of rank 0) is what the log says it ran.
    rec=$SCRATCH/proj/$exp/checkpoints/a0.json
    tmp=$(field "$rec" 'd["env"]["SLURM_TMPDIR"]')
    [ -n "$tmp" ]
    [ "$(field "$rec" 'd["argv"]')" = "['--dataset=$tmp/data', '--name', '0 run', '--star', '*']" ]
    grep -q "^\[hpc [^]]*\] \(rank 0: \)\?runs as: python argv_dump.py a0 --dataset=$tmp/data --name '0 run' --star '\*'\$" "$log"
  done
}
