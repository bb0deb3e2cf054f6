#!/usr/bin/env bats
# Runs own their checkpoints, on the real local cluster (README: Runs, attempts and
# checkpoints): a new submission refuses another run's checkpoints and says whose; a
# --rerun of the run resumes them; --resume continues them on purpose; --fresh keeps them
# aside and starts over; two submissions of one experiment are never queued at once. The
# program (tests/helpers/programs/table_prog.py) resumes only when HPC_RESUMING=1, and
# the line shows HPC_INIT_FROM, as a nanoGPT line would pass it (--init_from=...).
# shellcheck disable=SC2016,SC2030,SC2031 # command lines in single quotes are expanded in the job; each test is a subshell

load ../helpers/cluster

setup() {
  integration_setup proj
  cp "$REPO_ROOT"/tests/helpers/programs/* "$PROJECT/"
}

@test "a run's checkpoints: refused to a new submission, resumed by its --rerun, continued with --resume, kept aside with --fresh" {
  printf '%s\n' 'echo "init_from=$HPC_INIT_FROM"; python3 table_prog.py save 60' >"$PROJECT/experiment_configurations.txt"
  local ck=$SCRATCH/proj/r1/checkpoints first log
  # The first run is warned and saves; at its restart limit (0) it ends, FAILED 75.
  submit --exp-name r1 --venv none --time 10 --signal-grace 20 --max-restarts 0
  first=$JOB_ID
  wait_file "$SCRATCH/proj/r1/marks/ready_0_1_0"
  sleep 1.5
  scancel --batch --signal=USR1 "$first"
  wait_job "$first" 200
  log=$(job_log "$first" r1)
  cat "$log"
  [ "$(sacct -X -n -P -j "$first" -o State,ExitCode)" = 'FAILED|75:0' ]
  grep -q "init_from=scratch" "$log"
  grep -q "restart limit reached (0 of --max-restarts 0): not requeued. The checkpoint is in $ck; to go on, rerun this run (job_submitter.sh --rerun $first) or submit again with --resume" "$log"
  grep -qx "run=r1-.*/0" "$ck/.hpc_run" && grep -qx "job=$first" "$ck/.hpc_run"

  # A new submission of the experiment is refused before anything is written.
  local jobs_before
  jobs_before=$(find "$SCRATCH/proj/hpc_outputs/jobs" | wc -l)
  run --separate-stderr submitter --exp-name r1 --venv none --time 10
  [ "$status" -eq 2 ]
  [[ $stderr == *"$ck: job $first (run r1-"*"), submitted "*", command: echo \"init_from=\$HPC_INIT_FROM\"; python3 table_prog.py save 60"* ]]
  [[ $stderr == *"--resume"*"--fresh"*"--exp-name NAME"* ]]
  [ "$(find "$SCRATCH/proj/hpc_outputs/jobs" | wc -l)" -eq "$jobs_before" ]

  # Its --rerun is the same run: it resumes.
  run --separate-stderr submitter --rerun "$first"
  [ "$status" -eq 0 ]
  JOB_ID=$(submitted_ids | tail -1) JOB_TASKS=1
  wait_job "$JOB_ID" 200
  log=$(job_log "$JOB_ID" r1)
  cat "$log"
  [ "$(sacct -X -n -P -j "$JOB_ID" -o State,ExitCode)" = 'COMPLETED|0:0' ]
  grep -q "init_from=resume" "$log"
  grep -q "resuming: $ck holds this run's checkpoints (newest: ckpt.json)" "$log"
  read -r steps att from <"$ck/done_0_0"
  [ "$steps" = 60 ]
  ((from > 0))

  # --resume: another submission continues them on purpose, and says whose they were.
  submit --exp-name r1 --venv none --time 10 --resume
  wait_job "$JOB_ID" 200
  log=$(job_log "$JOB_ID" r1)
  cat "$log"
  [ "$(sacct -X -n -P -j "$JOB_ID" -o State,ExitCode)" = 'COMPLETED|0:0' ]
  grep -q -- "--resume: continuing the checkpoints in $ck of job $first (run r1-" "$log"
  grep -q "init_from=resume" "$log"
  grep -q "resumed_from=r1-" "$ck/.hpc_run"
  local resumer=$JOB_ID

  # --fresh: they are kept aside under a name that says whose; the run starts over.
  submit --exp-name r1 --venv none --time 10 --fresh
  [[ $stderr == *"--fresh: the checkpoints in $ck are kept as $SCRATCH/proj/r1/old_checkpoints/checkpoints.job$resumer-"* ]]
  wait_job "$JOB_ID" 200
  log=$(job_log "$JOB_ID" r1)
  cat "$log"
  grep -q "init_from=scratch" "$log"
  grep -q "starting from scratch: nothing to resume in $ck" "$log"
  [ "$(cat "$ck/done_0_0")" = "60 1 -1" ]
  ls "$SCRATCH/proj/r1/old_checkpoints/checkpoints.job$resumer-"*/ckpt.json
}

@test "two submissions of one experiment are never queued or running at once" {
  printf '%s\n' 'sleep 60' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name r2 --venv none --time 5
  local first=$JOB_ID
  run --separate-stderr submitter --exp-name r2 --venv none --time 5
  [ "$status" -eq 2 ]
  [[ $stderr == *"(job $first) of experiment 'r2' is still queued or running"* ]]
  scancel "$first"
  wait_job "$first" 120
  submit --exp-name r2 --venv none --time 5 # (sleep 60 wrote no checkpoint)
  scancel "$JOB_ID"
  wait_job "$JOB_ID" 120
}

@test "two submissions of one experiment started at the same moment: exactly one is queued; a --rerun beside a newer running submission is refused" {
  printf '%s\n' 'sleep 60' >"$PROJECT/experiment_configurations.txt"
  local i rcs
  for i in 1 2; do
    (rc=0 && submitter --exp-name r3 --venv none --time 5 >"$BATS_TEST_TMPDIR/$i.out" 2>&1 || rc=$? && echo "$rc" >"$BATS_TEST_TMPDIR/$i.rc") &
  done
  wait
  cat "$BATS_TEST_TMPDIR"/[12].out "$BATS_TEST_TMPDIR"/[12].rc
  rcs=$(sort "$BATS_TEST_TMPDIR"/[12].rc | tr '\n' ' ')
  [[ $rcs == "0 "[12]" " ]]
  grep -q "experiment 'r3' is being submitted right now by another job_submitter.sh\|of experiment 'r3' is still queued or running" "$BATS_TEST_TMPDIR"/[12].out
  [ "$(squeue -h -n r3 -o %i | wc -l)" -eq 1 ]
  [ "$(wc -l <"$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv")" -eq 1 ]
  local running
  running=$(squeue -h -n r3 -o %i)
  scancel "$running"
  wait_job "$running" 120

  # --rerun of an older submission while a newer one of the experiment runs: refused.
  printf '%s\n' 'exit 3' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name r3 --venv none --time 5
  local old=$JOB_ID
  wait_job "$old" 120
  printf '%s\n' 'sleep 60' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name r3 --venv none --time 5
  run --separate-stderr submitter --rerun "$old"
  echo "$stderr"
  [ "$status" -eq 2 ]
  [[ $stderr == *"(job $JOB_ID) of experiment 'r3' is still queued or running"* ]]
  [ "$(squeue -h -n r3 -o %i)" = "$JOB_ID" ]
  scancel "$JOB_ID"
  wait_job "$JOB_ID" 120
}

@test "a second run of an experiment never mixes its results with the first run's: they are kept aside, and it says so" {
  printf '%s\n' 'echo one >"$HPC_RESULTS_DIR/b.txt"' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name r4 --venv none --time 5
  local first=$JOB_ID res=$SCRATCH/proj/r4/results
  wait_job "$first" 120
  [ "$(cat "$res/b.txt")" = one ]
  printf '%s\n' 'echo two >"$HPC_RESULTS_DIR/a.txt"' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name r4 --venv none --time 5
  echo "$stderr"
  [[ $stderr == *"the results of an earlier run of 'r4' are kept as $SCRATCH/proj/r4/old_results/results.job$first-"* ]]
  wait_job "$JOB_ID" 120
  [ "$(ls -A "$res")" = a.txt ]
  [ "$(cat "$SCRATCH"/proj/r4/old_results/results.job"$first"-*/b.txt)" = one ]
}

@test "the Lightning hook loads hpc_ckpt_N.ckpt only when the run resumes: its own attempt or --resume, never a new run's first" {
  project_venv # torch, lightning
  printf 'python lightning_unchanged.py --max-steps 60 --out outputs/$HPC_INIT_FROM\n' >"$PROJECT/experiment_configurations.txt"
  local ck=$SCRATCH/proj/lh/checkpoints log first
  # The first run is warned, saves hpc_ckpt_1.ckpt and stops at its restart limit (0).
  submit --exp-name lh -d lightning --time 10 --max-restarts 0
  first=$JOB_ID
  log=$(job_log "$first" lh)
  local start=$SECONDS
  until grep -q '\[train\] step 20' "$log" 2>/dev/null; do
    ((SECONDS - start < 300)) || { cat "$log" && false; }
    sleep 0.5
  done
  scancel --batch --signal=USR1 "$first"
  wait_job "$first" 200
  cat "$log"
  [ "$(sacct -X -n -P -j "$first" -o State,ExitCode)" = 'FAILED|75:0' ]
  ls "$ck/hpc_ckpt_1.ckpt"
  ! grep -q 'Lightning: resuming from' "$log" || false # a new run's first attempt
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["resumed_from"] is None, d' "$PROJECT/outputs/scratch/rank_0.json"
  # A new submission may take it only with --resume; the hook then loads it.
  run --separate-stderr submitter --exp-name lh -d lightning --time 10
  [ "$status" -eq 2 ]
  submit --exp-name lh -d lightning --time 10 --resume
  wait_job "$JOB_ID" 300
  log=$(job_log "$JOB_ID" lh)
  cat "$log"
  [ "$(sacct -X -n -P -j "$JOB_ID" -o State,ExitCode)" = 'COMPLETED|0:0' ]
  grep -q "\[hpc\] Lightning: resuming from $ck/hpc_ckpt_1.ckpt" "$log"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["global_step"] == 60 and d["resumed_from"].endswith("hpc_ckpt_1.ckpt"), d' "$PROJECT/outputs/resume/rank_0.json"
}
