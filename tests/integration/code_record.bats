#!/usr/bin/env bats
# The code each job ran (coderecord.sh) on the real cluster: the git record beside the
# batch script, the commit in the job log, --snapshot against edits made while the job
# waits, and a project without git. --mail's #SBATCH lines reach Slurm.

load ../helpers/cluster

setup() {
  integration_setup proj
  printf 'print("old code")\n' >"$PROJECT/run.py"
  printf 'python run.py\n' >"$PROJECT/experiment_configurations.txt"
}

git_init() {
  printf '.venv/\n' >"$PROJECT/.gitignore"
  git -C "$PROJECT" init -q
  git -C "$PROJECT" add -A
  git -C "$PROJECT" -c user.email=t@example.org -c user.name=t commit -qm first
}

@test "--snapshot: the job held in the queue runs the code as it was at submission; the copies of the code are private" {
  umask 022
  chmod 755 "$BATS_TEST_TMPDIR" # a $SCRATCH other users can enter, as many are
  git_init
  printf 'notes\n' >"$PROJECT/untracked notes.txt"
  printf '# edited before submission\n' >>"$PROJECT/run.py"
  submit --exp-name snap --time 5 --snapshot --sbatch-option=--hold
  [[ $stderr == *"snapshot: the job runs the project's tracked files as copied to $SCRATCH/proj/hpc_outputs/snapshots/"* ]]
  printf 'print("new code")\n' >"$PROJECT/run.py" # edited while the job waits
  scontrol release "$JOB_ID"
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local log=$SCRATCH/proj/hpc_outputs/snap-$JOB_ID.out record commit
  cat "$log"
  grep -qx 'old code' "$log"
  ! grep -q 'new code' "$log" || false
  commit=$(git -C "$PROJECT" rev-parse HEAD)
  grep -q "code: git commit $commit, run from $SCRATCH/proj/hpc_outputs/snapshots/" "$log"
  record=$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/snap-*/code.git')
  cat "$record"
  grep -qx "commit: $commit" "$record"
  grep -qx "branch: $(git -C "$PROJECT" symbolic-ref --short HEAD)" "$record"
  grep -qx 'untracked notes.txt' "$record"
  grep -q '^+# edited before submission' "${record%.git}.diff"
  # The copies of the code are private, whatever the umask (022 here: the project and its
  # files are readable by all): the snapshot folder 700, the diff 600; the other user on
  # the node reads neither.
  local snap
  snap=$(find "$SCRATCH/proj/hpc_outputs/snapshots" -mindepth 1 -maxdepth 1)
  [ "$(stat -c %a "$snap")" = 700 ]
  [ "$(stat -c %a "${record%.git}.diff")" = 600 ]
  [ "$(stat -c '%a %U' "$snap/run.py")" = "600 $HPC_TEST_USER" ]
  as_other cat "$record" >/dev/null # (the other user can reach the home: the record is not a copy of code)
  run as_other cat "$snap/run.py"
  [ "$status" -ne 0 ]
  run as_other cat "${record%.git}.diff"
  [ "$status" -ne 0 ]
  # The same content again: the same snapshot folder, not a second copy; one an older
  # version left open is made private.
  as_user chmod 755 "$snap"
  git -C "$PROJECT" checkout -q run.py
  printf '# edited before submission\n' >>"$PROJECT/run.py"
  submit --exp-name snap2 --time 5 --snapshot --sbatch-option=--hold
  scancel "$JOB_ID"
  [ "$(find "$SCRATCH/proj/hpc_outputs/snapshots" -mindepth 1 -maxdepth 1 | wc -l)" -eq 1 ]
  [ "$(stat -c %a "$snap")" = 700 ]
}

@test "without --snapshot the record is written and the job runs the project as it is" {
  git_init
  submit --exp-name plain --time 5
  wait_job "$JOB_ID"
  grep -q "code: git commit $(git -C "$PROJECT" rev-parse HEAD), run from $PROJECT " \
    "$SCRATCH/proj/hpc_outputs/plain-$JOB_ID.out"
  [ ! -e "$SCRATCH/proj/hpc_outputs/snapshots" ]
  [ -z "$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/plain-*/code.diff')" ] # clean tree: no diff
}

@test "no git: the job runs, nothing is recorded, its log says so; --snapshot is refused" {
  submit --exp-name nogit --time 5
  [ -z "$stderr" ]
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ -z "$(find "$SCRATCH/proj/hpc_outputs/jobs" -name code.git)" ]
  grep -q "code: not recorded ($PROJECT was not in a git repository with a commit at submission)" \
    "$SCRATCH/proj/hpc_outputs/nogit-$JOB_ID.out"
  run --separate-stderr submitter --exp-name nogit2 --snapshot
  [ "$status" -eq 2 ]
  [[ $stderr == *"--snapshot copies the project's git-tracked files"* ]]
}

@test "--mail: Slurm gets the address and END,FAIL; refused without an address" {
  run --separate-stderr submitter --exp-name m --mail
  [ "$status" -eq 2 ]
  [[ $stderr == *"--mail needs an address: export HPC_MAIL_USER="* ]]
  [ -z "$(find "$SCRATCH" -name '*.sbatch')" ]
  HPC_MAIL_USER=researcher@example.org submit --exp-name m --time 5 --mail --sbatch-option=--hold
  local shown
  shown=$(scontrol show job "$JOB_ID")
  scancel "$JOB_ID"
  [[ $shown == *"MailUser=researcher@example.org MailType=END,FAIL"* ]]
}
