#!/usr/bin/env bats
# Stalls on the real local cluster (issue 33): a program that stops making progress is
# found by the stall watch of its node, shown (its processes, their state), stopped, and
# then requeued when the attempt wrote a checkpoint, else FAILED with exit code 79; a
# program that prints nothing but touches $HPC_HEARTBEAT is left alone.
# shellcheck disable=SC2016 # command lines in single quotes are expanded in the job

load ../helpers/cluster

setup() {
  integration_setup proj
}

# stall_script: $PROJECT/stall.sh saves a checkpoint and hangs; once resumed, it says from
# what and ends.
stall_script() {
  cat >"$PROJECT/stall.sh" <<'EOF'
if [ -s "$HPC_CHECKPOINT_DIR/ckpt" ]; then
  echo "resumed from $(cat "$HPC_CHECKPOINT_DIR/ckpt") on attempt $HPC_RESTART_COUNT"
  exit 0
fi
echo step-10 >"$HPC_CHECKPOINT_DIR/ckpt"
echo "saved; now hanging"
sleep 600
EOF
}

@test "a program that stalls after a checkpoint is stopped, shown, requeued and resumes; hpc status says stalled" {
  stall_script
  printf 'bash stall.sh\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name st --time 10 --stall-timeout 12s
  wait_job "$JOB_ID" 240
  local log
  log=$(job_log "$JOB_ID" st)
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -Eq 'stalled: no progress for 12s on rank 0 on node[0-9]+' "$log"
  # Where the program was: its processes with their state (sleep 600, sleeping).
  grep -Eq '^    [0-9]+ [0-9]+ S [^ ]+: sleep 600' "$log"
  grep -q 'stalled: this attempt wrote a checkpoint: requeued' "$log"
  grep -q 'resumed from step-10 on attempt 1' "$log"
  run --separate-stderr hpc status st
  echo "$output"
  [[ $output == *"2: stalled: stopped and requeued (exit 143), finished"* ]]
}

@test "a 2-node program that stalls without a checkpoint: both nodes show their processes, FAILED with exit code 79" {
  printf 'echo "rank $SLURM_PROCID up"; sleep 600\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name st2 --time 10 --stall-timeout 10s --which-distributed script --num-nodes 2
  wait_job "$JOB_ID" 180
  local log
  log=$(job_log "$JOB_ID" st2)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = FAILED ]
  [ "$(job_exit "$JOB_ID")" = 79:0 ]
  grep -Eq 'stalled: no progress for 10s on ranks? [0-9 ]+ on node[0-9]+' "$log"
  [ "$(grep -Ec 'stalled: rank [01] on node[0-9]+: its processes' "$log")" -eq 2 ]
  grep -q 'nothing in .* was written during this attempt' "$log"
  ! grep -q 'REQUEUED' <<<"$(attempts "$JOB_ID")" || false
  run --separate-stderr hpc status st2
  echo "$output"
  [[ $output == *"stalled: stopped, not requeued (exit 79)"* ]]
}

@test "a silent program that touches \$HPC_HEARTBEAT is not stalled; --stall-timeout off turns the watch off" {
  printf 'for i in $(seq 10); do touch "$HPC_HEARTBEAT"; sleep 2; done\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name hb --time 10 --stall-timeout 10s
  local first=$JOB_ID
  printf 'sleep 14\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name off --time 10 --stall-timeout off
  wait_job "$first" 180
  wait_job "$JOB_ID" 180
  cat "$(job_log "$first" hb)"
  [ "$(job_state "$first")" = COMPLETED ]
  grep -q 'stall watch: the program is stopped after 10s' "$(job_log "$first" hb)"
  ! grep -q 'stalled' "$(job_log "$first" hb)" || false
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  ! grep -q 'stall watch' "$(job_log "$JOB_ID" off)" || false
}

@test "a packed line that stalls after a checkpoint is stopped and resumes at the requeue; the other line ran once (issue 33)" {
  stall_script
  printf 'bash stall.sh\necho "line 1 ran on attempt $HPC_RESTART_COUNT"\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name pst --time 10 --stall-timeout 10s --pack 2 --cpus 2
  wait_job "$JOB_ID" 240
  local log out=$SCRATCH/${PROJECT##*/}/hpc_outputs
  log=$(job_log "$JOB_ID" pst 0)
  cat "$log"
  cat "$out/pst-$JOB_ID-line0.out" "$out/pst-$JOB_ID-line1.out"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -Eq 'stalled: no progress for 10s on line 0 on node[0-9]+' "$log"
  grep -Eq '^    [0-9]+ [0-9]+ S [^ ]+: sleep 600' "$log"
  grep -q 'line 0: stalled, and it wrote a checkpoint during this attempt: it resumes when the job is requeued' "$log"
  grep -q 'resumed from step-10 on attempt 1' "$out/pst-$JOB_ID-line0.out"
  [ "$(grep -c '^line 1 ran on attempt' "$out/pst-$JOB_ID-line1.out")" -eq 1 ]
  grep -q 'pack: all 2 line(s) completed' "$log"
}

@test "a Python program that prints without flushing (its stdout a file: block-buffered) is not taken for stalled: its prints reach the log as it runs (second review)" {
  cat >"$PROJECT/printer.py" <<'EOF2'
import time
for step in range(12):
    print(f"step {step}")  # no flush: a file's stdout holds 8 KiB before it writes
    time.sleep(2)
EOF2
  printf 'python3 printer.py\n' >"$PROJECT/experiment_configurations.txt"
  unset PYTHONUNBUFFERED # (a shell's own would reach the job)
  submit --exp-name unbuf --time 5 --stall-timeout 10s --venv none
  wait_job "$JOB_ID" 180
  local log
  log=$(job_log "$JOB_ID" unbuf)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -qx "step 11" "$log"
  ! grep -q 'stalled' "$log" || false
}
