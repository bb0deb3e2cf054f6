#!/usr/bin/env bats
# The submitting side among other users (issue 23): what another researcher's files on the
# same machine do to a submission. Runs the toolkit as the test user (hpcalice); root only
# sets the scene (the other user's files). Nothing reaches Slurm (--dry-run, stub sbatch).
# shellcheck disable=SC2016 # code in single quotes is the inner shell's

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

# chain DIR: hpc_unsafe_chain_to for DIR, as the test user; prints "safe" or the reason.
chain() {
  as_user bash -c 'source "$1" || exit 9; hpc_unsafe_chain_to why "$2"; echo "${why:-safe}"' _ \
    "$REPO_ROOT/virtual_env_hpc_files/job_lib.sh" "$1"
}

@test "hpc_unsafe_chain_to: folders of the user or root, not writable by others unless sticky (issue 23)" {
  mkdir -p "$AREA/root755/mine" "$AREA/w777/mine" "$AREA/sticky" "$AREA/bobs" "$AREA/g775"
  chmod 777 "$AREA/w777"
  chmod 1777 "$AREA/sticky"
  chown "$HPC_TEST_USER" "$AREA/root755/mine" "$AREA/w777/mine"
  as_user mkdir -m 700 "$AREA/sticky/alice"
  chown "$HPC_OTHER_USER" "$AREA/bobs"
  chmod 777 "$AREA/bobs"
  chown "$HPC_TEST_USER:$HPC_TEST_USER" "$AREA/g775" && chmod 775 "$AREA/g775"
  [ "$(chain "$AREA/root755/mine")" = safe ]
  [ "$(chain "$AREA/sticky/alice")" = safe ]
  [ "$(chain "$AREA/sticky")" = safe ]
  [ "$(chain "$AREA/g775")" = safe ] # the user's own group
  run chain "$AREA/bobs"
  [[ $output == "$AREA/bobs belongs to $HPC_OTHER_USER, not to you or root"*"set HPC_LOCAL_SCRATCH"* ]]
  run chain "$AREA/w777/mine"
  [[ $output == "$AREA/w777 can be written by other users (mode 0777, not sticky)"*"chmod go-w '$AREA/w777'"* ]]
  # A link is judged by its owner, and where it leads by the folders there.
  ln -s "$AREA/bobs" "$AREA/root755/to_bobs"
  run chain "$AREA/root755/to_bobs"
  [[ $output == "$AREA/bobs belongs to $HPC_OTHER_USER"* ]]
  as_other ln -s "$AREA/root755/mine" "$AREA/bobs/link"
  run chain "$AREA/bobs/link"
  [[ $output == "$AREA/bobs belongs to"* ]]
  ln -s "$AREA/root755/mine" "$AREA/sticky/rootlink"
  [ "$(chain "$AREA/sticky/rootlink")" = safe ]
  chown -h "$HPC_OTHER_USER" "$AREA/sticky/rootlink"
  run chain "$AREA/sticky/rootlink"
  [[ $output == "$AREA/sticky/rootlink belongs to $HPC_OTHER_USER"* ]]
}
