#!/usr/bin/env bats
# The submitting side among other users (issue 23): what another researcher's files on the
# same machine do to a submission. Runs the toolkit as the test user (hpcalice); root only
# sets the scene (the other user's files). Nothing reaches Slurm (--dry-run, stub sbatch).

load ../helpers/common
load ../helpers/users

setup() {
  ensure_test_users
  hermetic_env
  use_sbatch_stub
  PATH=$PATH:/usr/sbin # runuser
  # A folder both users can reach (BATS_TEST_TMPDIR is root's, mode 700).
  AREA=$(mktemp -d /var/tmp/hpc_shared_users.XXXXXX)
  chmod 755 "$AREA"
  PROJECT=$AREA/proj
  mkdir -p "$PROJECT"
  bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$PROJECT" >/dev/null
  printf 'echo hi\n' >"$PROJECT/experiment_configurations.txt"
  export SCRATCH=$AREA/scratch HOME=$AREA/home
  mkdir -p "$SCRATCH" "$HOME"
  chown "$HPC_TEST_USER" "$SCRATCH" "$HOME"
}

teardown() {
  rm -rf -- "$AREA"
}

# as_researcher ARGS...: job_submitter.sh in the project, as the test user.
as_researcher() {
  (cd "$PROJECT" && as_user env HOME="$HOME" SCRATCH="$SCRATCH" PATH="$PATH" \
    bash hpc_files/job_submitter.sh --venv none "$@")
}

@test "a project in a git repository of another user (git's dubious ownership): the submission says why no code is recorded and how to trust it; --snapshot is refused for that reason" {
  git -C "$PROJECT" init -q
  git -C "$PROJECT" add -A
  git -C "$PROJECT" -c user.email=t@example.org -c user.name=t commit -qm first
  chown -R "$HPC_OTHER_USER" "$PROJECT"
  run --separate-stderr as_researcher --dry-run --exp-name dub
  echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $stderr == *"git refuses to read the repository $PROJECT: it belongs to $HPC_OTHER_USER"* ]]
  [[ $stderr == *"git config --global --add safe.directory $PROJECT"* ]]
  [[ $stderr == *"the code this job runs is not recorded"* ]]
  run --separate-stderr as_researcher --dry-run --exp-name dub --snapshot
  echo "$stderr"
  [ "$status" -eq 2 ]
  [[ $stderr == *"git refuses to read the repository $PROJECT: it belongs to $HPC_OTHER_USER"* ]]
  [[ $stderr == *"safe.directory"* ]]
  [[ $stderr != *"not in a git repository with a commit"* ]]
}
