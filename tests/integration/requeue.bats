#!/usr/bin/env bats
# Wall time and preemption on the real local cluster: the job is warned (SIGUSR1), the
# program checkpoints, the job requeues itself and resumes; nothing is lost.

load ../helpers/cluster

setup() {
  integration_setup proj
  project_venv # torch, lightning and hpc_toolkit
}

# wait_for_line FILE PATTERN [TIMEOUT_S]: until FILE has a line matching PATTERN.
wait_for_line() {
  local file=$1 pattern=$2 timeout=${3:-120} start=$SECONDS
  until [[ -f $file ]] && grep -qE -- "$pattern" "$file"; do
    ((SECONDS - start < timeout)) || { echo "no '$pattern' in $file after ${timeout}s" >&2; cat "$file" >&2 || true; return 1; }
    sleep 0.5
  done
}

# steps_lost DIR: steps that had to be done twice across requeues (from progress.log).
steps_lost() {
  python3 - "$1/progress.log" <<'PY'
import sys
seen, lost = set(), 0
for line in open(sys.argv[1]):
    _, step = line.split()
    lost += step in seen
    seen.add(step)
print(lost)
PY
}

@test "(a) a warned job checkpoints, requeues and resumes to the right total; both attempts logged" {
  printf 'python examples/requeue_train.py --steps 40 --step-sleep 0.25\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name rq --time 10
  local log ck=$SCRATCH/proj/rq/checkpoints
  log=$(job_log "$JOB_ID" rq)
  wait_for_line "$ck/progress.log" '^1 8$' 120
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_for_line "$log" 'attempt 2 starts at step' 120
  wait_job "$JOB_ID" 180
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  [ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["step"], d["attempts"])' "$ck/done.json")" = "40 2" ]
  grep -q 'attempt 1, nodes' "$log"
  grep -q 'attempt 2, nodes' "$log"
  grep -q 'walltime warning: asking the program to checkpoint' "$log"
  grep -q 'requeueing job' "$log"
  [ "$(steps_lost "$ck")" -le 1 ]
}

@test "(b) a real 1-minute wall time: warned, requeued and finished with no manual signal" {
  printf 'python examples/requeue_train.py --steps 100 --step-sleep 0.4\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name wall --time 1 --signal-grace 40
  wait_job "$JOB_ID" 420
  local log ck=$SCRATCH/proj/wall/checkpoints
  log=$(job_log "$JOB_ID" wall)
  cat "$log"
  [ "$(attempts "$JOB_ID" | tail -1)" = "COMPLETED|0:0" ]
  attempts "$JOB_ID" | grep -q '^REQUEUED'
  [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$ck/done.json")" = 100 ]
  [ "$(steps_lost "$ck")" -le 1 ]
  ! grep -q 'TIMEOUT' <<<"$(attempts "$JOB_ID")" || false
}

@test "(c) 2-node Lightning DDP requeues and resumes with the SlurmRequeue callback" {
  printf 'python examples/lightning_ddp.py --max-steps 80 --step-sleep 0.15\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name lrq --which-distributed lightning --num-nodes 2 --time 10
  local log ck=$SCRATCH/proj/lrq/checkpoints
  log=$(job_log "$JOB_ID" lrq)
  wait_for_line "$log" '\[train\] step 20' 240
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_for_line "$log" 'resuming from' 180
  wait_job "$JOB_ID" 300
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  ls "$ck"/hpc_ckpt_1.ckpt
  local r
  for r in 0 1; do
    [ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["global_step"], d["restart_count"])' "$ck/lightning_rank_$r.json")" = "80 1" ]
  done
  grep -q "checkpoint at step" "$log"
}

@test "(d) the restart limit is honoured: no requeue past --max-restarts" {
  printf 'python examples/requeue_train.py --steps 200 --step-sleep 0.25\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name lim --time 10 --max-restarts 1
  local log ck=$SCRATCH/proj/lim/checkpoints
  log=$(job_log "$JOB_ID" lim)
  wait_for_line "$ck/progress.log" '^1 4$' 120
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_for_line "$ck/progress.log" '^2 ' 120
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 120
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nFAILED|75:0' ]
  grep -q 'restart limit reached' "$log"
  [ -f "$ck/state.json" ]
}

@test "(e) a program that fails on its own is not requeued: FAILED with its code" {
  printf 'python examples/requeue_train.py --steps 20 --step-sleep 0.05 --fail-at 3\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name fail --time 10
  wait_job "$JOB_ID" 120
  [ "$(attempts "$JOB_ID")" = "FAILED|3:0" ]
  ! grep -q 'requeueing' "$(job_log "$JOB_ID" fail)" || false
}

@test "a user's scancel stops the job without a requeue" {
  printf 'python examples/requeue_train.py --steps 400 --step-sleep 0.25\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name cancel --time 10
  wait_for_line "$SCRATCH/proj/cancel/checkpoints/progress.log" '^1 3$' 120
  scancel "$JOB_ID"
  wait_job "$JOB_ID" 60
  run attempts "$JOB_ID"
  [ "${#lines[@]}" -eq 1 ]
  [[ ${lines[0]} == "CANCELLED"* ]]
  ! grep -q 'requeueing' "$(job_log "$JOB_ID" cancel)" || false
}

@test "a requeue from outside (scontrol requeue: the user, an admin, the program itself) runs the job again; it is not taken for a finished job" {
  # Attempt 1 waits to be requeued; attempt 2 finishes. On Slurm 24.11 the toolkit keeps a
  # marker against stale requeue requests (job_lib.sh): an attempt that someone requeued
  # must not leave it.
  # shellcheck disable=SC2016
  printf '%s\n' 'if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then echo "second attempt ran"; else echo started >"$HPC_CHECKPOINT_DIR/started"; sleep 120; exit 9; fi' \
    >"$PROJECT/experiment_configurations.txt"
  submit --exp-name outside --time 10
  local log
  log=$(job_log "$JOB_ID" outside)
  wait_for_line "$SCRATCH/proj/outside/checkpoints/started" 'started' 120
  scontrol requeue "$JOB_ID"
  wait_for_line "$log" 'second attempt ran' 180
  wait_job "$JOB_ID" 120
  cat "$log"
  [ "$(attempts "$JOB_ID" | tail -n 1)" = "COMPLETED|0:0" ]
  [ "$(attempts "$JOB_ID" | head -n 1 | cut -d'|' -f1)" = "REQUEUED" ]
  ! grep -q 'already finished' "$log" || false
}

@test "in an array, a warned task requeues alone and resumes from its own checkpoint" {
  printf '%s\n' 'python examples/requeue_train.py --steps 30 --step-sleep 0.2' \
    'python examples/requeue_train.py --steps 30 --step-sleep 0.2' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name arq --time 10
  local ck=$SCRATCH/proj/arq/checkpoints
  wait_for_line "$ck/task_1/progress.log" '^1 5$' 120
  scancel --batch --signal=USR1 "${JOB_ID}_1"
  wait_job "$JOB_ID" 180
  [ "$(sacct --duplicates -X -n -P -j "${JOB_ID}_1" -o State | tr '\n' ' ')" = "REQUEUED COMPLETED " ]
  [ "$(sacct --duplicates -X -n -P -j "${JOB_ID}_0" -o State | tr '\n' ' ')" = "COMPLETED " ]
  [ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["step"], d["attempts"])' "$ck/task_1/done.json")" = "30 2" ]
  [ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["step"], d["attempts"])' "$ck/task_0/done.json")" = "30 1" ]
}

@test "(f) results written before the warning are in shared scratch after the rerun" {
  printf 'python examples/requeue_train.py --steps 30 --step-sleep 0.2\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name rqres --time 10
  local ck=$SCRATCH/proj/rqres/checkpoints
  wait_for_line "$ck/progress.log" '^1 5$' 120
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 180
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  # Attempt 1 wrote its file on node-local disk before the warning; attempt 2 ran with a
  # fresh local folder: both files are in the results on shared scratch.
  [ "$(cat "$SCRATCH/proj/rqres/results/attempt_1.txt")" = "started at step 0" ]
  grep -qE '^started at step [1-9]' "$SCRATCH/proj/rqres/results/attempt_2.txt"
}

@test "a preemption's SIGTERM (HPC_REQUEUE_ON_TERM=yes) checkpoints and requeues like the warning" {
  printf 'python examples/requeue_train.py --steps 30 --step-sleep 0.2\n' >"$PROJECT/experiment_configurations.txt"
  HPC_REQUEUE_ON_TERM=yes submit --exp-name pre --time 10
  local ck=$SCRATCH/proj/pre/checkpoints
  wait_for_line "$ck/progress.log" '^1 5$' 120
  scancel --batch --signal=TERM "$JOB_ID"
  wait_job "$JOB_ID" 180
  cat "$(job_log "$JOB_ID" pre)"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -q 'preempt warning: asking the program to checkpoint' "$(job_log "$JOB_ID" pre)"
  [ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["step"], d["attempts"])' "$ck/done.json")" = "30 2" ]
}

@test "a real preemption (an urgent job takes the node): the job checkpoints, requeues and resumes; nothing lost" {
  hold_preemptible_node
  # The local cluster's 'urgent' partition preempts 'preemptible' (one node, GraceTime 30 s).
  printf 'python examples/requeue_train.py --steps 40 --step-sleep 0.2\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name preempted --time 10 --partition preemptible --cpus 4
  local ck=$SCRATCH/proj/preempted/checkpoints urgent log
  wait_for_line "$ck/progress.log" '^1 5$' 180
  urgent=$(sbatch --parsable --partition urgent --cpus-per-task 4 --time 1 --output /dev/null --wrap 'sleep 2')
  wait_job "$JOB_ID" 240
  log=$(job_log "$JOB_ID" preempted)
  cat "$log"
  grep -q 'preempted at ' "$log"
  grep -q 'preempt warning: asking the program to checkpoint' "$log"
  grep -q 'requeueing job' "$log"
  [ "$(attempts "$JOB_ID" | tail -1)" = 'COMPLETED|0:0' ]
  [ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["step"], d["attempts"])' "$ck/done.json")" = "40 2" ]
  [ "$(steps_lost "$ck")" -le 1 ]
  [ "$(sacct -n -X -P -j "$urgent" -o State | head -1)" = COMPLETED ]
}

@test "a real preemption of Lightning DDP (2 processes): SlurmRequeue checkpoints, the job requeues and resumes" {
  hold_preemptible_node
  printf 'python examples/lightning_ddp.py --max-steps 80 --step-sleep 0.15\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name lpre --which-distributed lightning --procs-per-node 2 --cpus 4 --partition preemptible --time 10
  local log ck=$SCRATCH/proj/lpre/checkpoints r
  log=$(job_log "$JOB_ID" lpre)
  wait_for_line "$log" '\[train\] step 20' 240
  sbatch --parsable --partition urgent --cpus-per-task 4 --time 1 --output /dev/null --wrap 'sleep 2'
  wait_job "$JOB_ID" 300
  cat "$log"
  grep -q 'preempted at ' "$log"
  grep -q 'checkpoint at step' "$log"
  [ "$(attempts "$JOB_ID" | tail -1)" = 'COMPLETED|0:0' ]
  ls "$ck"/hpc_ckpt_1.ckpt
  for r in 0 1; do
    [ "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["global_step"], d["restart_count"])' "$ck/lightning_rank_$r.json")" = "80 1" ]
  done
}
