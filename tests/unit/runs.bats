#!/usr/bin/env bats
# Runs own their checkpoints (README: Runs, attempts and checkpoints): a new submission
# refuses another run's checkpoints unless --resume or --fresh, and one of an experiment
# that is queued; the job side claims its folder (.hpc_run), resumes only its own run's
# checkpoints (HPC_RESUMING, HPC_INIT_FROM) and records its attempts. On the cluster:
# tests/integration/runs.bats.
# shellcheck disable=SC2016,SC2030,SC2031 # job code in single quotes runs in the job shell; each test is a subshell

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1'
  CK=$SCRATCH/proj/e/checkpoints
}

# old_run DIR: checkpoints left in DIR by run "e-20260101-000000-1/0" (job 77).
old_run() {
  mkdir -p "$1"
  printf 'weights' >"$1/ckpt.pt"
  printf 'run=e-20260101-000000-1/0\njob=77\nsubmitted=2026-01-01T00:00:00\nstarted=2026-01-01T00:01:00\ncommand=python train.py --lr 0.5\n' \
    >"$1/.hpc_run"
}

@test "a new submission that finds another run's checkpoints is refused (exit 2), naming the run and the three ways on; nothing written" {
  old_run "$CK"
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 2 ]
  [[ $stderr == *"$CK: job 77 (run e-20260101-000000-1/0), submitted 2026-01-01T00:00:00, command: python train.py --lr 0.5"* ]]
  [[ $stderr == *"--resume "*"--fresh "*"--exp-name NAME"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  [ ! -e "$SCRATCH/proj/hpc_outputs" ]
  [ "$(cat "$CK/ckpt.pt")" = weights ]
}

@test "an array's task folders are checked one by one; an empty folder or one with only the toolkit's files is free" {
  printf '%s\n' 'python a.py 1' 'python a.py 2' >"$PROJECT/experiment_configurations.txt"
  mkdir -p "$CK/task_0" && : >"$CK/task_0/empty.pt" # empty: no checkpoint
  printf 'run=x/0\n' >"$CK/task_0/.hpc_run"
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 0 ]
  old_run "$CK/task_1"
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 2 ]
  [[ $stderr == *"$CK/task_1: job 77"* && $stderr != *"task_0"* ]]
  # Checkpoints with no record of their run are another run's too.
  rm "$CK/task_1/.hpc_run"
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 2 ]
  [[ $stderr == *"$CK/task_1: a run that left no record of itself (.hpc_run)"* ]]
}

@test "--resume submits and tells the job to continue them (HPC_RESUME=yes); without it the script says nothing of it" {
  old_run "$CK"
  run --separate-stderr submitter --exp-name e --resume
  [ "$status" -eq 0 ]
  grep -qx "export HPC_RESUME='yes'" "$SBATCH_STUB_LOG.script.1"
  grep -q "^export HPC_SUBMISSION_ID='e-[0-9]\{8\}-[0-9]\{6\}-[0-9]*-[0-9a-f]\{4\}'$" "$SBATCH_STUB_LOG.script.1"
  [ "$(cat "$CK/ckpt.pt")" = weights ]
  run --separate-stderr submitter --exp-name other
  [ "$status" -eq 0 ]
  ! grep -q HPC_RESUME= "$SBATCH_STUB_LOG.script.2" || false
}

@test "--fresh keeps the old checkpoints under a name that says whose they were, then submits; --dry-run only says so" {
  old_run "$CK"
  run --separate-stderr submitter --exp-name e --fresh --dry-run
  [ "$status" -eq 0 ]
  [[ $stderr == *"--fresh would keep $CK as $SCRATCH/proj/e/old_checkpoints/checkpoints.job77-20260101-000000"* ]]
  [ -f "$CK/ckpt.pt" ]
  run --separate-stderr submitter --exp-name e --fresh
  [ "$status" -eq 0 ]
  [ ! -e "$CK" ]
  [ "$(cat "$SCRATCH/proj/e/old_checkpoints/checkpoints.job77-20260101-000000/ckpt.pt")" = weights ]
  [ "$(sbatch_calls)" -eq 1 ]
  ! grep -q HPC_RESUME= "$SBATCH_STUB_LOG.script.1" || false
}

@test "--resume with --fresh, or either with a sweep, is refused" {
  run --separate-stderr submitter --resume --fresh
  [ "$status" -eq 2 ]
  [[ $stderr == *"--resume and --fresh exclude each other"* ]]
}

# squeue_stub BODY: an squeue on PATH that runs the bash BODY.
squeue_stub() {
  mkdir -p "$BATS_TEST_TMPDIR/qbin"
  printf '#!/usr/bin/env bash\n%s\n' "$1" >"$BATS_TEST_TMPDIR/qbin/squeue"
  chmod +x "$BATS_TEST_TMPDIR/qbin/squeue"
  export PATH=$BATS_TEST_TMPDIR/qbin:$PATH
}

@test "a submission of an experiment that is still queued or running is refused, naming it; another experiment is not" {
  squeue_stub "printf '%s\\n' \"\$*\" >>'$BATS_TEST_TMPDIR/squeue.log'; echo '4242_[1-3] e'"
  run --separate-stderr submitter --exp-name e # the stub's first job id: 4242
  [ "$status" -eq 0 ]
  run --separate-stderr submitter --exp-name e --resume
  [ "$status" -eq 2 ]
  [[ $stderr == *"submission e-"*" (job 4242) of experiment 'e' is still queued or running"* ]]
  [ "$(sbatch_calls)" -eq 1 ]
  run --separate-stderr submitter --exp-name f
  [ "$status" -eq 0 ]
  grep -qx -- "-h -o %i %j -u $(id -un) -n e" "$BATS_TEST_TMPDIR/squeue.log" # (only the experiment's jobs)
}

@test "a job number of the ledger that now names another job (Slurm numbered afresh, another cluster) does not refuse the experiment" {
  # (the job's number alone when asked for no more)
  squeue_stub '[[ $* == *%j* ]] && echo "4242 someone-elses-job" || echo 4242'
  run --separate-stderr submitter --exp-name e # the stub's first job id: 4242
  [ "$status" -eq 0 ]
  run --separate-stderr submitter --exp-name e --resume
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
}

@test "three submissions of one experiment started at the same moment: exactly one is submitted, the others are refused naming it" {
  # sbatch takes a second (the first holds the experiment meanwhile); squeue knows the
  # first's job once it is in the ledger, as Slurm would.
  local ledger=$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv i
  mkdir -p "$BATS_TEST_TMPDIR/slow"
  printf '#!/usr/bin/env bash\n[[ $1 == --version ]] || sleep 1\nexec %q "$@"\n' "$(command -v sbatch)" >"$BATS_TEST_TMPDIR/slow/sbatch"
  chmod +x "$BATS_TEST_TMPDIR/slow/sbatch"
  export PATH=$BATS_TEST_TMPDIR/slow:$PATH
  squeue_stub "[[ -e '$ledger' ]] && cut -f2,3 '$ledger' | tr '\\t' ' ' || true"
  for i in 1 2 3; do
    (rc=0 && submitter --exp-name e >"$BATS_TEST_TMPDIR/$i.out" 2>&1 || rc=$? && echo "$rc" >"$BATS_TEST_TMPDIR/$i.rc") &
  done
  wait
  cat "$BATS_TEST_TMPDIR"/[123].out "$BATS_TEST_TMPDIR"/[123].rc
  [[ $(sort "$BATS_TEST_TMPDIR"/[123].rc | tr '\n' ' ') == "0 "[12]" "[12]" " ]]
  [ "$(wc -l <"$ledger")" -eq 1 ]
  [ "$(grep -l "experiment 'e' is being submitted right now by another job_submitter.sh\|of experiment 'e' is still queued or running" "$BATS_TEST_TMPDIR"/[123].out | wc -l)" -eq 2 ]
  # The lock file stays (its note names the last holder): one refused never removes it.
  [ -f "$SCRATCH/proj/hpc_outputs/jobs/.e.lock" ]
}

@test "a refused submission that made the experiment's lock file removes it again" {
  SBATCH_STUB_FAIL="Requested node configuration is not available" run --separate-stderr submitter -e x
  [ "$status" -eq 1 ]
  [ -z "$(find "$SCRATCH" -type f)" ]
}

@test "a new run keeps an earlier run's results aside and says so; --dry-run only says so; --resume and --results-dir none leave them" {
  local res=$SCRATCH/proj/e/results old
  mkdir -p "$res/task_1"
  echo b >"$res/task_1/b.txt"
  run --separate-stderr submitter --exp-name e --dry-run
  [ "$status" -eq 0 ]
  [[ $stderr == *"an earlier run's results in $res would be kept as $SCRATCH/proj/e/old_results/results.jobunknown-"*" (not moved: --dry-run; --resume keeps them in place)"* ]]
  [ -f "$res/task_1/b.txt" ]
  run --separate-stderr submitter --exp-name e --resume
  [ "$status" -eq 0 ]
  [[ $stderr != *"earlier run"* ]]
  run --separate-stderr submitter --exp-name e --results-dir none
  [ "$status" -eq 0 ]
  [[ $stderr != *"earlier run"* ]]
  [ -f "$res/task_1/b.txt" ]
  run --separate-stderr submitter --exp-name e # the ledger's latest job of e: 4243
  [ "$status" -eq 0 ]
  old=$(echo "$SCRATCH"/proj/e/old_results/results.job4243-*)
  [[ $stderr == *"the results of an earlier run of 'e' are kept as $old: this run's own go to $res"* ]]
  [ "$(cat "$old/task_1/b.txt")" = b ]
  [ ! -e "$res" ]
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 0 ] && [[ $stderr != *"earlier run"* ]]
}

@test "a new run keeps aside the results an earlier run could not copy back (EXP/.hpc_results_kept), with that run's results, so that its own attempts never bring them back (issue 32)" {
  local kept=$SCRATCH/proj/e/.hpc_results_kept old
  mkdir -p "$kept/attempt_1" "$SCRATCH/proj/e/results"
  echo k >"$kept/attempt_1/k.txt"
  echo r >"$SCRATCH/proj/e/results/r.txt"
  run --separate-stderr submitter --exp-name e --resume
  [ "$status" -eq 0 ]
  [ -f "$kept/attempt_1/k.txt" ] # --resume continues the run: they stay
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 0 ]
  old=$(echo "$SCRATCH"/proj/e/old_results/results.job*)
  [[ $stderr == *"results an earlier run of 'e' could not copy back are kept as $old/.hpc_results_kept"* ]]
  [ "$(cat "$old/.hpc_results_kept/attempt_1/k.txt")" = k ]
  [ ! -e "$kept" ]
  # Kept results with no results copied back: aside all the same.
  mkdir -p "$kept/attempt_2" && echo k2 >"$kept/attempt_2/k.txt"
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 0 ]
  [[ $stderr == *"results an earlier run of 'e' could not copy back are kept as $SCRATCH/proj/e/old_results/kept."* ]]
  [ ! -e "$kept" ]
}

# job LINE [BODY]: a job on one node without Slurm: its own submission id e-1, line 0.
job() {
  job_side_env
  printf '%s\n' "$1" >"$HPC_COMMANDS_FILE"
  export source_dir=$BATS_TEST_TMPDIR HPC_LAUNCHER=none HPC_SUBMISSION_ID=e-1 HPC_SUBMITTED_AT=2026-01-02T03:04:05
  export HPC_SIGNAL_GRACE=6 HPC_MAX_RESTARTS=10 HPC_REQUEUE=yes HPC_PREEMPT_WATCH=no
  run_job_side hpc_job_begin "${2:-hpc_run_command; exit \$?}"
}

@test "job side: a new run claims its empty folder and starts from scratch; the program sees HPC_RESUMING=0" {
  job 'echo "resuming=$HPC_RESUMING init=$HPC_INIT_FROM"'
  [ "$status" -eq 0 ]
  [[ $output == *"resuming=0 init=scratch"* ]]
  [[ $output == *"starting from scratch: nothing to resume in $scratch_dir/e/checkpoints"* ]]
  grep -qx 'run=e-1/0' "$scratch_dir/e/checkpoints/.hpc_run"
  grep -qx 'job=4242' "$scratch_dir/e/checkpoints/.hpc_run"
  grep -qx 'submitted=2026-01-02T03:04:05' "$scratch_dir/e/checkpoints/.hpc_run"
  grep -qx 'command=echo "resuming=$HPC_RESUMING init=$HPC_INIT_FROM"' "$scratch_dir/e/checkpoints/.hpc_run"
  # Its attempts: one, finished.
  [ "$(sed -n 2p "$BATS_TEST_TMPDIR/commands.attempts/0" | sed 's/ start=[0-9]* end=[0-9]*//')" = "attempt=1 job=4242 outcome=finished exit=0" ]
}

@test "job side: its own run's checkpoints (a later attempt, a --rerun) are resumed: HPC_RESUMING=1, HPC_INIT_FROM=resume" {
  job_side_env
  mkdir -p "$scratch_dir/e/checkpoints"
  printf 'run=e-1/0\njob=4242\n' >"$scratch_dir/e/checkpoints/.hpc_run"
  printf w >"$scratch_dir/e/checkpoints/ck.pt"
  job 'echo "resuming=$HPC_RESUMING init=$HPC_INIT_FROM"'
  [ "$status" -eq 0 ]
  [[ $output == *"resuming=1 init=resume"* ]]
  [[ $output == *"resuming: $scratch_dir/e/checkpoints holds this run's checkpoints (newest: ck.pt)"* ]]
}

@test "job side: another run's checkpoints stop the job (exit 2) unless --resume, which takes them over and says whose" {
  job_side_env
  old_run "$scratch_dir/e/checkpoints"
  job 'echo the-program-ran'
  [ "$status" -eq 2 ]
  ! grep -qx the-program-ran <<<"$output" || false # (the log's "command:" line names it)
  [[ $output == *"holds checkpoints of another run: job 77 (run e-20260101-000000-1/0)"* ]]
  grep -q ' outcome=failed exit=2$' "$BATS_TEST_TMPDIR/commands.attempts/0"
  export HPC_RESUME=yes
  job 'echo "resuming=$HPC_RESUMING"'
  [ "$status" -eq 0 ]
  [[ $output == *"--resume: continuing the checkpoints in $scratch_dir/e/checkpoints of job 77"* ]]
  [[ $output == *"resuming=1"* ]]
  grep -qx 'run=e-1/0' "$scratch_dir/e/checkpoints/.hpc_run"
  grep -qx 'resumed_from=e-20260101-000000-1/0' "$scratch_dir/e/checkpoints/.hpc_run"
}

@test "job side: the run's own record (.hpc_run) is no progress: a warned program that saves nothing is not requeued" {
  export HPC_REQUEUE_MARGIN=0
  job 'python3 -c "import time; [time.sleep(0.1) for _ in range(300)]"' '(sleep 1; kill -USR1 $$) & hpc_run_command; exit $?'
  [ "$status" -eq 124 ]
  [ -f "$scratch_dir/e/checkpoints/.hpc_run" ]
  [[ $output == *"no checkpoint was written after the warning: not requeued"* ]]
}

@test "nothing queued (squeue answers nothing): the experiment's next submission goes in" {
  squeue_stub 'exit 0'
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 0 ]
  run --separate-stderr submitter --exp-name e
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
}
