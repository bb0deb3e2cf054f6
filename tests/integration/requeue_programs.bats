#!/usr/bin/env bats
# Wall time and preemption for every kind of program, on the real local cluster: a bash
# loop that traps USR1 (1 and 2 nodes, `none` and `script`, in the container stand-in), one
# that traps only TERM, a Python loop with its own handler, a program with no handler, and
# one that ignores the warning, a DataLoader whose workers ignore SIGTERM (Python hangs at
# exit). A warned attempt is requeued only when it made progress.
# The programs: tests/helpers/programs/ (train_loop.sh, sig_train.py, dataloader_hang.py).
# shellcheck disable=SC2016 # command lines in single quotes are expanded in the job

load ../helpers/cluster
load ../helpers/container

setup() {
  integration_setup proj
  cp "$REPO_ROOT"/tests/helpers/programs/* "$PROJECT/"
}

# wait_line FILE PATTERN [TIMEOUT_S]: until FILE has a line matching PATTERN.
wait_line() {
  local start=$SECONDS
  until grep -q -- "$2" "$1" 2>/dev/null; do
    ((SECONDS - start < ${3:-240})) || { echo "no '$2' in $1 after ${3:-240} s" >&2 && cat "$1" >&2; return 1; }
    sleep 0.5
  done
}

# warn_when_ready EXP [RANKS]: once every rank of attempt 1 runs (and has done a few
# steps), the wall-time warning as Slurm sends it: SIGUSR1 to the batch shell.
warn_when_ready() {
  local r
  for ((r = 0; r < ${2:-1}; r++)); do
    wait_file "$SCRATCH/proj/$1/marks/ready_1_$r" 180
  done
  sleep 1.5
  scancel --batch --signal=USR1 "$JOB_ID"
}

# requeued_and_resumed EXP STEPS [RANKS]: two attempts in sacct, each rank finished STEPS
# steps in 2 attempts, the second starting where the first saved (not at 0).
requeued_and_resumed() {
  local exp=$1 steps=$2 log r
  log=$(job_log "$JOB_ID" "$exp")
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  for ((r = 0; r < ${3:-1}; r++)); do
    [ "$(cat "$SCRATCH/proj/$exp/checkpoints/done_$r")" = "$steps 2" ]
    grep -qE "\[loop\] rank $r attempt 2 starts at step [1-9]" "$log"
  done
  grep -q 'requeueing job' "$log"
}

@test "bash trap USR1, 1 node (none): warned, saves, requeued, resumes" {
  printf 'bash train_loop.sh usr1 40\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name bu --time 10
  warn_when_ready bu
  wait_job "$JOB_ID" 240
  requeued_and_resumed bu 40
  grep -q 'warning passed on as SIGUSR1 to [0-9]* (bash)' "$(job_log "$JOB_ID" bu)"
}

@test "bash trap USR1, 2 nodes (script): every rank is warned, saves, and resumes" {
  printf 'bash train_loop.sh usr1 40\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name bu2 --which-distributed script --num-nodes 2 --time 10
  warn_when_ready bu2 2
  wait_job "$JOB_ID" 300
  requeued_and_resumed bu2 40 2
  local log
  log=$(job_log "$JOB_ID" bu2)
  grep -q 'rank 0: warning passed on as SIGUSR1 to [0-9]* (bash)' "$log"
  grep -q 'rank 1: warning passed on as SIGUSR1 to [0-9]* (bash)' "$log"
}

@test "2 nodes (script), ranks that save and exit 1 on the warning (as torchrun does) behind a progress bar: a pause by design, requeued, resumed; every [hpc] line starts a line" {
  printf 'LOOP_SAVE_EXIT=1 LOOP_PROGRESS=1 bash train_loop.sh usr1 40\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name bx2 --which-distributed script --num-nodes 2 --time 10
  warn_when_ready bx2 2
  wait_job "$JOB_ID" 300
  requeued_and_resumed bx2 40 2
  local log
  log=$(job_log "$JOB_ID" bx2)
  grep -q $'step [0-9]*\r' "$log" # (the progress bar is in the log)
  grep -q '^\[hpc .*the ranks stopped after the wall-time warning (rank [01] on node[0-9] ended first, exit code 1); whether the job resumes is decided next' "$log"
  [ "$(grep -c 'failed first' "$log")" -eq 0 ]
  grep -q '^\[hpc .*rank 0: warning passed on as SIGUSR1' "$log"
  [ "$(grep -o '\[hpc ' "$log" | wc -l)" -eq "$(grep -c '^\[hpc ' "$log")" ]
}

@test "2 nodes (script): rank 0 saves and exits 1 at once, rank 1 takes its warning late; rank 0 waits for it, so both save and resume" {
  # Rank 1 sets its trap after 15 steps (3 s): without the wait, srun ends rank 1 as soon
  # as rank 0 exits 1, before its warning reaches it, and it resumes from 0.
  printf 'LOOP_SAVE_EXIT=1 LOOP_LATE_TRAP=15 bash train_loop.sh usr1 60\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name late2 --which-distributed script --num-nodes 2 --time 10
  warn_when_ready late2 2
  wait_job "$JOB_ID" 300
  requeued_and_resumed late2 60 2
  local log
  log=$(job_log "$JOB_ID" late2)
  grep -q 'rank 1: warning passed on as SIGUSR1' "$log"
  [ -f "$SCRATCH/proj/late2/marks/warned_1" ]
}

@test "bash trap USR1 in the container stand-in (none and script): warned inside, requeued, resumed" {
  use_fake_singularity
  make_sif_image "$PROJECT/images/train.sif"
  rm -rf "$PROJECT/.venv"
  printf 'bash train_loop.sh usr1 40\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name cu -s images/train.sif --time 10
  local one=$JOB_ID
  submit --exp-name cu2 -s images/train.sif --which-distributed script --num-nodes 2 --time 10
  local two=$JOB_ID
  JOB_ID=$one warn_when_ready cu
  JOB_ID=$two warn_when_ready cu2 2
  wait_job "$one" 240
  wait_job "$two" 300
  JOB_ID=$one requeued_and_resumed cu 40
  JOB_ID=$two requeued_and_resumed cu2 40 2
  # The runtime in between (it passes signals on) was looked through, not signalled.
  grep -q 'warning passed on as SIGUSR1 to [0-9]* (bash)' "$(job_log "$one" cu)"
}

@test "bash trapping only TERM: warned with SIGTERM, saves, requeued, resumes" {
  printf 'bash train_loop.sh term 40\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name bt --time 10
  warn_when_ready bt
  wait_job "$JOB_ID" 240
  requeued_and_resumed bt 40
  grep -q 'warning passed on as SIGTERM to [0-9]* (bash)' "$(job_log "$JOB_ID" bt)"
}

@test "Python with its own SIGUSR1 handler (no hpc_toolkit): saves, requeued, resumes" {
  rm -rf "$PROJECT/.venv"
  printf 'python3 sig_train.py 40\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name py --time 10 --venv none
  warn_when_ready py
  wait_job "$JOB_ID" 240
  local log
  log=$(job_log "$JOB_ID" py)
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  [ "$(cat "$SCRATCH/proj/py/checkpoints/done_0")" = "40 2" ]
  grep -qE '\[py\] attempt 2 starts at step [1-9]' "$log"
  grep -q 'warning passed on as SIGUSR1 to [0-9]* (python3)' "$log"
}

@test "a program with no handler runs on to the end of the grace period, is stopped, and is not requeued" {
  printf 'bash train_loop.sh none 400\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name nh --time 10 --signal-grace 20
  warn_when_ready nh
  wait_job "$JOB_ID" 240
  local log
  log=$(job_log "$JOB_ID" nh)
  cat "$log"
  [ "$(attempts "$JOB_ID")" = 'FAILED|124:0' ]
  grep -q 'no process of the program handles SIGUSR1 or SIGTERM' "$log"
  grep -q 'the program is still running 14 s after the warning: stopping it (SIGTERM)' "$log"
  grep -q 'no checkpoint was written after the warning: not requeued' "$log"
  ! grep -q 'requeueing job' "$log" || false
}

@test "a program that ignores the warning and saves nothing: not requeued (FAILED 124), its results copied back" {
  printf '%s\n' 'echo partial >"$HPC_RESULTS_DIR/partial.txt"; bash train_loop.sh ignore 400' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name ig --time 10 --signal-grace 20
  warn_when_ready ig
  wait_job "$JOB_ID" 240
  local log
  log=$(job_log "$JOB_ID" ig)
  cat "$log"
  [ "$(attempts "$JOB_ID")" = 'FAILED|124:0' ]
  [ "$(sacct -X -n -P -j "$JOB_ID" -o State,ExitCode)" = 'FAILED|124:0' ]
  [ -e "$SCRATCH/proj/ig/marks/warned_0" ] # it did get the warning
  grep -q 'warning ignored' "$log"
  grep -q 'no checkpoint was written after the warning: not requeued' "$log"
  grep -q 'attempt 1, 0 restart(s) so far' "$log"
  [ "$(cat "$SCRATCH/proj/ig/results/partial.txt")" = partial ]
  ! grep -q 'requeueing job' "$log" || false
}

@test "an array task that ignores the warning ends alone (FAILED 124); the other tasks are untouched" {
  printf '%s\n' 'bash train_loop.sh usr1 30' 'bash train_loop.sh ignore 400' 'bash train_loop.sh usr1 30' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name ar --time 10 --signal-grace 20
  wait_file "$SCRATCH/proj/ar/marks/ready_1_0" 180 # every task writes rank 0's marks: any one
  local ck=$SCRATCH/proj/ar/checkpoints
  # Task 1 (the ignoring one) is warned once it runs.
  wait_line "$(job_log "$JOB_ID" ar 1)" 'starts at step'
  sleep 1
  scancel --batch --signal=USR1 "${JOB_ID}_1"
  wait_job "$JOB_ID" 300
  cat "$(job_log "$JOB_ID" ar 1)"
  [ "$(sacct --duplicates -X -n -P -j "${JOB_ID}_1" -o State,ExitCode)" = 'FAILED|124:0' ]
  [ "$(sacct --duplicates -X -n -P -j "${JOB_ID}_0" -o State,ExitCode)" = 'COMPLETED|0:0' ]
  [ "$(sacct --duplicates -X -n -P -j "${JOB_ID}_2" -o State,ExitCode)" = 'COMPLETED|0:0' ]
  grep -q 'no checkpoint was written after the warning: not requeued' "$(job_log "$JOB_ID" ar 1)"
  [ "$(cat "$ck/task_0/done_0")" = "30 1" ] && [ "$(cat "$ck/task_2/done_0")" = "30 1" ]
}

@test "a DataLoader whose workers ignore SIGTERM (Python hangs at exit): warned, requeued, resumed; once finished and hung it is stopped and not requeued again (FAILED 124): its pids.log is no progress" {
  project_venv # torch
  printf 'python dataloader_hang.py 30 0.2\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name dl --time 10 --signal-grace 20
  warn_when_ready dl
  local log
  log=$(job_log "$JOB_ID" dl)
  # Attempt 2 resumes, finishes, hangs at exit: the wall time's warning again.
  wait_line "$log" '^finished 30' 300
  sleep 1
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 240
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nFAILED|124:0' ]
  grep -qE '^\[dl\] attempt 2 starts at step [1-9]' "$log"
  grep -q 'requeueing job' "$log"
  grep -q 'only appended to: pids.log ' "$log"
  grep -q 'hung at exit (DataLoader workers that ignore SIGTERM) ends here too' "$log"
  grep -q 'processes of the program outlived it, ignoring SIGTERM (DataLoader workers?): killing them (SIGKILL)' "$log"
  # Every step done once, in two attempts.
  [ "$(cut -d' ' -f2 "$SCRATCH/proj/dl/marks/steps" | sort -n | uniq -d)" = "" ]
  [ "$(wc -l <"$SCRATCH/proj/dl/marks/steps")" -eq 30 ]
  [ "$(wc -l <"$SCRATCH/proj/dl/checkpoints/pids.log")" -eq 2 ]
  # No stray worker left on the nodes.
  local pid
  # shellcheck disable=SC2013 # words: the pids
  for pid in $(cut -d' ' -f2- "$SCRATCH/proj/dl/checkpoints/pids.log"); do
    ! ps -o args= -p "$pid" | grep dataloader_hang || false
  done
}

@test "a job name or Comment= holding 'PreemptTime=...' is not a preemption" {
  printf 'bash train_loop.sh usr1 400\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name hc --time 10
  wait_file "$SCRATCH/proj/hc/marks/ready_1_0" 180
  scontrol update JobId="$JOB_ID" Comment="x PreemptTime=2026-01-01T00:00:00 y" \
    Name="a PreemptTime=2026-01-01T00:00:00"
  scontrol show job "$JOB_ID" | grep -q 'Comment=x PreemptTime=2026-01-01T00:00:00'
  # SIGTERM to the steps (the watch step) and then to the batch shell: a cancel, not a
  # preemption, whatever the comment says.
  scancel --signal=TERM "$JOB_ID"
  sleep 2
  scancel --batch --signal=TERM "$JOB_ID"
  wait_job "$JOB_ID" 120
  local log
  log=$(job_log "$JOB_ID" hc)
  cat "$log"
  [ "$(attempts "$JOB_ID" | wc -l)" -eq 1 ]
  ! grep -q 'preempted at' "$log" || false
  ! grep -q 'preempt warning' "$log" || false
  grep -q 'received SIGTERM (job [A-Z]*): stopping the program, no requeue' "$log"
}

# preempt_when_ready EXP: once experiment EXP is ready, an urgent job takes its preemptible
# node (GraceTime 30 s).
preempt_when_ready() {
  wait_file "$SCRATCH/proj/$1/marks/ready_1_0" 180
  sleep 1.5
  sbatch --parsable --partition urgent --cpus-per-task 4 --time 1 --output /dev/null --wrap 'sleep 2'
}

@test "preempted: a bash loop trapping USR1, and one trapping TERM, checkpoint, requeue and resume" {
  hold_preemptible_node
  printf 'bash train_loop.sh usr1 60\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name pu --time 10 --partition preemptible --cpus 4
  preempt_when_ready pu
  wait_job "$JOB_ID" 300
  grep -q 'preempted at ' "$(job_log "$JOB_ID" pu)"
  [ "$(attempts "$JOB_ID" | tail -1)" = 'COMPLETED|0:0' ]
  [ "$(cat "$SCRATCH/proj/pu/checkpoints/done_0")" = "60 2" ]
  grep -qE '\[loop\] rank 0 attempt 2 starts at step [1-9]' "$(job_log "$JOB_ID" pu)"

  printf 'bash train_loop.sh term 60\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name pt --time 10 --partition preemptible --cpus 4
  preempt_when_ready pt
  wait_job "$JOB_ID" 300
  cat "$(job_log "$JOB_ID" pt)"
  [ "$(attempts "$JOB_ID" | tail -1)" = 'COMPLETED|0:0' ]
  [ "$(cat "$SCRATCH/proj/pt/checkpoints/done_0")" = "60 2" ]
  grep -q 'warning passed on as SIGTERM' "$(job_log "$JOB_ID" pt)"
}

@test "preempted: a Python loop with its own handler checkpoints, requeues and resumes" {
  hold_preemptible_node
  rm -rf "$PROJECT/.venv"
  printf 'python3 sig_train.py 60\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name pp --time 10 --partition preemptible --cpus 4 --venv none
  preempt_when_ready pp
  wait_job "$JOB_ID" 300
  cat "$(job_log "$JOB_ID" pp)"
  grep -q 'preempted at ' "$(job_log "$JOB_ID" pp)"
  [ "$(attempts "$JOB_ID" | tail -1)" = 'COMPLETED|0:0' ]
  [ "$(cat "$SCRATCH/proj/pp/checkpoints/done_0")" = "60 2" ]
}

@test "preempted: a program with no handler saves nothing and is not requeued (FAILED 124)" {
  hold_preemptible_node
  printf 'bash train_loop.sh none 600\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name pn --time 10 --partition preemptible --cpus 4
  preempt_when_ready pn
  wait_job "$JOB_ID" 300
  local log
  log=$(job_log "$JOB_ID" pn)
  cat "$log"
  grep -q 'preempted at ' "$log"
  grep -q 'no checkpoint was written after the warning: not requeued' "$log"
  [ "$(grep -c 'starts at step' "$log")" -eq 1 ] # the program ran once
  local states
  states=$(attempts "$JOB_ID")
  [ "$(tail -1 <<<"$states")" = 'FAILED|124:0' ]
  # 22.05: that one attempt. 24.11 starts the job once more for the preemption's own
  # requeue request (recording the first as PREEMPTED); that attempt runs nothing and ends
  # with the first one's exit code (docs/cluster-admins.md: Slurm versions).
  if [[ $(sbatch --version) == "slurm 22."* ]]; then
    [ "$states" = 'FAILED|124:0' ]
  else
    [[ $(head -n -1 <<<"$states") =~ ^(PREEMPTED\|[0-9:]+)?$ ]]
    [[ $states != *$'\n'* ]] || grep -q 'Slurm .* started it again for an old requeue request: nothing to do' "$log"
  fi
}

@test "an unchanged Lightning DDP script, 2 nodes x 2 processes: warned, checkpoints on every rank, requeued, resumes" {
  project_venv # torch, lightning
  printf 'python lightning_unchanged.py --num_nodes 2 --devices 2 --max-steps 80 --out outputs/lu\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name lu --which-distributed lightning --num-nodes 2 --procs-per-node 2 --time 10
  [[ $stderr == *"note: Lightning's built-in SLURM auto-requeue can hang in DDP (4 processes)"* ]]
  local log ck=$SCRATCH/proj/lu/checkpoints r
  log=$(job_log "$JOB_ID" lu)
  wait_line "$log" '\[train\] step 20' 300
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 400
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -q "Lightning: its built-in SLURM auto-requeue can hang in DDP; this job turns it off" "$log"
  grep -q '\[hpc\] checkpoint at step' "$log"
  [ "$(grep -c 'warning passed on as SIGUSR1 to [0-9]* (python)' "$log")" -eq 4 ]
  grep -q "\[hpc\] Lightning: resuming from $ck/hpc_ckpt_1.ckpt" "$log"
  ls "$ck"/hpc_ckpt_1.ckpt
  for r in 0 1 2 3; do
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert (d["global_step"], d["restart_count"]) == (80, 1), d; assert d["resumed_from"].endswith("hpc_ckpt_1.ckpt"), d' \
      "$PROJECT/outputs/lu/rank_$r.json"
  done
}
