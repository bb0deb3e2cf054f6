#!/usr/bin/env bats
# --pack N and --lines-per-job K on the real local cluster (4 fake GPUs per node): each
# line runs on its own GPUs and CPUs with its own log, exit code, checkpoint and results
# folder; a failing line fails the job and is named; a requeued packed job reruns only
# the lines that had not ended; refusals submit nothing.

load ../helpers/cluster

setup() {
  integration_setup proj
  cp "$REPO_ROOT"/tests/helpers/programs/train_loop.sh "$PROJECT/"
  # A line that reports what it sees: its index, GPUs, CPUs (affinity) and threads.
  cat >"$PROJECT/report.sh" <<'SH'
cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
echo "report index=$HPC_TASK_INDEX gpus=${CUDA_VISIBLE_DEVICES:-} cpus=$cpus omp=$OMP_NUM_THREADS ck=$HPC_CHECKPOINT_DIR"
echo "$HPC_TASK_INDEX" >"$HPC_RESULTS_DIR/made_by"
sleep "${1:-1}"
exit "${2:-0}"
SH
}

# outcomes SUBMISSION_GLOB: "INDEX FIELDS" per line outcome file, sorted by index.
outcomes() {
  local f
  for f in "$SCRATCH"/proj/hpc_outputs/jobs/*/lines/*; do
    printf '%s %s\n' "${f##*/}" "$(cat "$f")"
  done | sort -n
}

# line_log ID INDEX: the log of line INDEX of the packed job (array) ID.
line_log() {
  printf '%s/proj/hpc_outputs/%s-%s-line%s.out' "$SCRATCH" "$3" "$1" "$2"
}

# wait_for_line FILE PATTERN [TIMEOUT_S]: until FILE has a line matching PATTERN.
wait_for_line() {
  local file=$1 pattern=$2 timeout=${3:-120} start=$SECONDS
  until [[ -f $file ]] && grep -qE -- "$pattern" "$file"; do
    ((SECONDS - start < timeout)) || { echo "no '$pattern' in $file after ${timeout}s" >&2; cat "$file" >&2 || true; return 1; }
    sleep 0.5
  done
}

@test "--pack 2 --gpus 4 --cpus 2: each line sees only its own 2 GPUs and its own CPU; each exit code is reported; a failing line fails its job and is named" {
  printf '%s\n' 'bash report.sh 2' 'bash report.sh 2 3' 'bash report.sh 2' 'bash report.sh 2' >"$PROJECT/experiment_configurations.txt"
  submit --pack 2 --gpus 4 --cpus 2 --exp-name pk --cluster local
  [[ $output == *"array of 2 tasks"* ]]
  wait_job "$JOB_ID" 180
  local log0 log1 i
  log0=$(job_log "$JOB_ID" pk 0) log1=$(job_log "$JOB_ID" pk 1)
  cat "$log0" "$log1"
  # Job 0 holds lines 0 and 1 (line 1 exits 3); job 1 holds lines 2 and 3.
  [ "$(job_states "$JOB_ID" | sort)" = "${JOB_ID}_0|FAILED|3:0"$'\n'"${JOB_ID}_1|COMPLETED|0:0" ]
  grep -q 'line 0 ended with exit code 0' "$log0"
  grep -q 'line 1 ended with exit code 3' "$log0"
  grep -q 'pack: 1 of 2 line(s) did not complete: line 1 (failed, exit 3); the job fails (exit 3)' "$log0"
  grep -q 'pack: failed lines: 1 ' "$log0"
  grep -q 'pack: all 2 line(s) completed' "$log1"
  # Each line: its own log, index, 2 GPUs of the 4 and CPUs of its own, 1 thread.
  local seen=() gpus=() cpus=()
  for i in 0 1 2 3; do
    local report
    report=$(grep '^report ' "$(line_log "$JOB_ID" "$i" pk)")
    echo "line $i: $report"
    [[ $report =~ index=$i\ gpus=([0-9]),([0-9])\ cpus=([0-9,-]+)\ omp=1\ ck=$SCRATCH/proj/pk/checkpoints/task_$i$ ]]
    gpus[i]=${BASH_REMATCH[1]},${BASH_REMATCH[2]} cpus[i]=${BASH_REMATCH[3]}
    [ "$(cat "$SCRATCH/proj/pk/results/task_$i/made_by")" = "$i" ]
  done
  # The two lines of a job never share a GPU; with 2 or more cores here, nor a CPU.
  [ "${gpus[0]}" != "${gpus[1]}" ]
  [ "${gpus[2]}" != "${gpus[3]}" ]
  [[ " 0,1 2,3 " == *" ${gpus[0]} "* && " 0,1 2,3 " == *" ${gpus[1]} "* ]]
  if (($(nproc) >= 2)); then
    [ "${cpus[0]}" != "${cpus[1]}" ]
    [ "${cpus[2]}" != "${cpus[3]}" ]
    [[ ${cpus[0]} =~ ^[0-9]+$ && ${cpus[1]} =~ ^[0-9]+$ ]]
  fi
  # The outcome of every line, for --rerun: line 1 failed with 3, the others done.
  run outcomes
  echo "$output"
  [[ ${lines[0]} == "0 state=done exit=0 job=${JOB_ID}_0 attempt=1 "* ]]
  [[ ${lines[1]} == "1 state=failed exit=3 job=${JOB_ID}_0 attempt=1 "* ]]
  [[ ${lines[2]} == "2 state=done exit=0 job=${JOB_ID}_1 attempt=1 "* ]]
  [[ ${lines[3]} == "3 state=done exit=0 job=${JOB_ID}_1 attempt=1 "* ]]
}

@test "--lines-per-job 3 alone: three lines one after another in one job, in order, one at a time" {
  printf '%s\n' 'bash report.sh 1' 'bash report.sh 1' 'bash report.sh 1' >"$PROJECT/experiment_configurations.txt"
  submit --lines-per-job 3 --exp-name serial --cluster local
  [[ $output == *"array of 1 tasks, 0-0"* ]]
  wait_job "$JOB_ID" 180
  local log
  log=$(job_log "$JOB_ID" serial 0)
  cat "$log"
  [ "$(job_state "${JOB_ID}_0")" = COMPLETED ]
  # Each line starts only once the one before has ended (one slot).
  [ "$(grep -oE 'line [0-2] (starts|ended)' "$log" | tr '\n' ' ')" = "line 0 starts line 0 ended line 1 starts line 1 ended line 2 starts line 2 ended " ]
  grep -q 'pack: all 3 line(s) completed (3 done)' "$log"
}

@test "a warned packed job checkpoints its running lines, requeues, and reruns only the lines that had not ended" {
  # Line 0 ends at once; lines 1 and 2 run until warned (they save and exit); line 3
  # waits for a free slot, which it does not get before the warning.
  printf '%s\n' 'bash report.sh 0' 'bash train_loop.sh usr1 60 0.25' 'bash train_loop.sh usr1 60 0.25' \
    'bash report.sh 0' >"$PROJECT/experiment_configurations.txt"
  submit --pack 2 --cpus 2 --lines-per-job 4 --exp-name rq --cluster local --time 10
  local log i
  log=$(job_log "$JOB_ID" rq 0)
  wait_for_line "$(line_log "$JOB_ID" 1 rq)" 'attempt 1 starts at step' 120
  wait_for_line "$(line_log "$JOB_ID" 2 rq)" 'attempt 1 starts at step' 120
  sleep 2 # a few steps, so that the checkpoint is not step 0
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 240
  cat "$log"
  [ "$(sacct --duplicates -X -n -P -j "$JOB_ID" -o State,ExitCode)" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -q 'walltime warning' "$log"
  grep -q 'line 1 ended with exit code 0 after [0-9]* s (requeue)' "$log"
  grep -q 'line 2 ended with exit code 0 after [0-9]* s (requeue)' "$log"
  grep -q 'pack: line(s) 1 2 3 not finished: the job is requeued and reruns only them' "$log"
  grep -q 'pack: 1 line(s) ended in an earlier attempt of this job; running the 3 left: 1 2 3' "$log"
  grep -q 'pack: all 4 line(s) completed (4 done)' "$log"
  # Line 0 ran once, in attempt 1; line 3 once, in attempt 2; lines 1 and 2 in both,
  # the second resuming from the step saved at the warning, to the full 60 steps.
  [ "$(grep -c '^report index=0' "$(line_log "$JOB_ID" 0 rq)")" -eq 1 ]
  grep -q 'attempt 1, line 0 ' "$(line_log "$JOB_ID" 0 rq)"
  [ "$(grep -c '^report index=3' "$(line_log "$JOB_ID" 3 rq)")" -eq 1 ]
  grep -q 'attempt 2, line 3 ' "$(line_log "$JOB_ID" 3 rq)"
  for i in 1 2; do
    grep -q 'attempt 2 starts at step [1-9]' "$(line_log "$JOB_ID" "$i" rq)"
    [ "$(cat "$SCRATCH/proj/rq/checkpoints/task_$i/done_0")" = "60 2" ]
  done
  run outcomes
  echo "$output"
  [[ ${lines[0]} == "0 state=done exit=0 job=${JOB_ID}_0 attempt=1 "* ]]
  [[ ${lines[1]} == "1 state=done exit=0 job=${JOB_ID}_0 attempt=2 "* ]]
  [[ ${lines[2]} == "2 state=done exit=0 job=${JOB_ID}_0 attempt=2 "* ]]
  [[ ${lines[3]} == "3 state=done exit=0 job=${JOB_ID}_0 attempt=2 "* ]]
}

@test "the progress rule per line: a line stopped without a checkpoint has failed (124) and is not rerun; the one that checkpointed resumes; the job fails naming the line" {
  # Line 0 saves on the warning; line 1 has no handler: it is stopped when the grace
  # period is over, having written nothing.
  printf '%s\n' 'bash train_loop.sh usr1 60 0.25' 'bash train_loop.sh none 400 0.25' >"$PROJECT/experiment_configurations.txt"
  submit --pack 2 --cpus 2 --exp-name np --cluster local --time 10 --signal-grace 10
  local log
  log=$(job_log "$JOB_ID" np 0)
  wait_for_line "$(line_log "$JOB_ID" 0 np)" 'attempt 1 starts at step' 120
  wait_for_line "$(line_log "$JOB_ID" 1 np)" 'attempt 1 starts at step' 120
  sleep 2
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 240
  cat "$log"
  [ "$(sacct --duplicates -X -n -P -j "$JOB_ID" -o State,ExitCode)" = $'REQUEUED|0:0\nFAILED|124:0' ]
  grep -q 'line 1: still running [0-9]* s after the warning: stopping it (SIGTERM)' "$log"
  grep -q 'line 1: ended with 143 after the warning and wrote nothing' "$log"
  grep -q 'line 0 ended with exit code 0 after [0-9]* s (requeue)' "$log"
  grep -q 'pack: line(s) 0 not finished: the job is requeued and reruns only them' "$log"
  grep -q 'running the 1 left: 0$' "$log"
  grep -q 'pack: 1 of 2 line(s) did not complete: line 1 (failed, exit 124); the job fails (exit 124)' "$log"
  # Line 1 ran in attempt 1 only; line 0 resumed and finished in attempt 2.
  [ "$(grep -c 'starts at step' "$(line_log "$JOB_ID" 1 np)")" -eq 1 ]
  [ "$(cat "$SCRATCH/proj/np/checkpoints/task_0/done_0")" = "60 2" ]
  run outcomes
  echo "$output"
  [[ ${lines[0]} == "0 state=done exit=0 job=${JOB_ID}_0 attempt=2 "* ]]
  [[ ${lines[1]} == "1 state=failed exit=124 job=${JOB_ID}_0 attempt=1 "* ]]
}

@test "scancel of a packed job: its running lines end, the line left is never started, each outcome is recorded and the log stays short" {
  printf '%s\n' 'sleep 120' 'sleep 120' 'bash report.sh 0' >"$PROJECT/experiment_configurations.txt"
  submit --pack 2 --cpus 2 --lines-per-job 3 --exp-name cx --cluster local
  local log
  log=$(job_log "$JOB_ID" cx 0)
  wait_for_line "$log" 'line 1 starts' 120
  scancel "$JOB_ID"
  wait_job "$JOB_ID" 120
  cat "$log"
  [[ $(job_state "${JOB_ID}_0") == CANCELLED* ]]
  grep -q 'line 0 ended with exit code' "$log"
  grep -q 'line 1 ended with exit code' "$log"
  if grep -q 'line 2 starts' "$log"; then false; fi
  [ ! -e "$(line_log "$JOB_ID" 2 cx)" ]
  # (bash can reap a line while a trap runs; the runner must not spin on it.)
  [ "$(wc -l <"$log")" -lt 40 ]
  run outcomes
  echo "$output"
  [ "${#lines[@]}" -eq 2 ]
  # (Their exit codes are what Slurm's kill made of them: 143 as a rule.)
  [[ ${lines[0]} =~ ^0\ state=(stopped|failed)\ exit=-?[0-9]+\ job=${JOB_ID}_0\  ]]
  [[ ${lines[1]} =~ ^1\ state=(stopped|failed)\ exit=-?[0-9]+\ job=${JOB_ID}_0\  ]]
}

@test "refusals on the cluster: nothing submitted, nothing written" {
  printf '%s\n' 'bash report.sh 1' 'bash report.sh 1' >"$PROJECT/experiment_configurations.txt"
  local start
  start=$(date +%Y-%m-%dT%H:%M:%S)
  run --separate-stderr submitter --pack 3 --gpus 4 -e refused --cluster local
  [ "$status" -eq 2 ]
  [[ $stderr == *"--pack 3 must divide the job's 4 GPU(s) per node"* ]]
  run --separate-stderr submitter --pack 2 --gpus 2 -N 2 -d lightning -e refused --cluster local
  [ "$status" -eq 2 ]
  [[ $stderr == *"packing is not defined for it"* ]]
  [ -z "$(jobs_named refused "$start")" ]
  [ ! -e "$SCRATCH/proj" ]
}
