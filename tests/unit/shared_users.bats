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

@test "the --data and --venv-to-local archives are the user's alone: another user cannot read them, even with the user's umask 022 (issue 32)" {
  mkdir -p "$SCRATCH/proj/private/sub"
  echo secret >"$SCRATCH/proj/private/sub/s.txt"
  chown -R "$HPC_TEST_USER" "$SCRATCH"
  chmod 700 "$SCRATCH/proj/private" && chmod 600 "$SCRATCH/proj/private/sub/s.txt"
  chmod 755 "$SCRATCH" "$SCRATCH/proj"
  /usr/bin/python3 -m venv --without-pip "$PROJECT/.venv"
  local profile=$AREA/p.conf
  printf 'source %q\nHPC_VENV_LOCAL_DIR=%q\n' "$REPO_ROOT/hpc_files/clusters/local.conf" "$AREA/copies/%u" >"$profile"
  chmod 644 "$profile"
  mkdir -p "$AREA/stub" && chown "$HPC_TEST_USER" "$AREA/stub"
  export SBATCH_STUB_LOG=$AREA/stub/sbatch.log
  run --separate-stderr as_user bash -c 'umask 022; cd "$1" && shift && exec "$@"' _ "$PROJECT" \
    env HOME="$HOME" SCRATCH="$SCRATCH" PATH="$PATH" SBATCH_STUB_LOG="$SBATCH_STUB_LOG" bash hpc_files/job_submitter.sh \
    -C "$profile" --venv "$PROJECT/.venv" --venv-to-local --data private --exp-name arch
  echo "$stderr"
  [ "$status" -eq 0 ]
  local staging=$SCRATCH/proj/.hpc_staging a n=0
  [ "$(stat -c %a "$staging")" = 700 ]
  for a in "$staging"/*.tar* "$staging"/*.state; do
    n=$((n + 1))
    [ "$(stat -c '%a %U' "$a")" = "600 $HPC_TEST_USER" ]
  done
  ((n >= 4))
  for a in "$staging"/[0-9a-f]*.tar*; do
    run as_other tar -xOf "$a"
    [ "$status" -ne 0 ]
    [[ $output != *secret* ]]
  done
  # An archive of an earlier version (0644 in a 0755 folder) is made private when reused.
  chmod 755 "$staging" && chmod 644 "$staging"/*.tar*
  run --separate-stderr as_user bash -c 'umask 022; cd "$1" && shift && exec "$@"' _ "$PROJECT" \
    env HOME="$HOME" SCRATCH="$SCRATCH" PATH="$PATH" SBATCH_STUB_LOG="$SBATCH_STUB_LOG" bash hpc_files/job_submitter.sh \
    -C "$profile" --venv "$PROJECT/.venv" --venv-to-local --data private --exp-name arch2
  [ "$status" -eq 0 ]
  [[ $stderr == *reused* ]]
  [ "$(stat -c %a "$staging")" = 700 ]
  for a in "$staging"/*.tar*; do
    [ "$(stat -c %a "$a")" = 600 ]
  done
}

@test "--fresh and --resume never move or write into another user's files: a checkpoints folder that leads to theirs is refused with a clear line (issue 32)" {
  mkdir -m 1777 "$AREA/shared"
  as_other mkdir -p "$AREA/shared/task_0"
  as_other bash -c 'echo weights >"$1/task_0/model.pt"' _ "$AREA/shared"
  printf 'echo a\necho b\n' >"$PROJECT/experiment_configurations.txt"
  mkdir -p "$SCRATCH/proj/e"
  ln -s "$AREA/shared" "$SCRATCH/proj/e/checkpoints"
  chown -R -h "$HPC_TEST_USER" "$SCRATCH"
  local opt
  for opt in --fresh --resume; do
    run --separate-stderr as_researcher --dry-run --exp-name e "$opt"
    echo "$stderr"
    [ "$status" -eq 2 ]
    [[ $stderr == *"$opt would move or write into files of another user: $SCRATCH/proj/e/checkpoints/task_0 belongs to $HPC_OTHER_USER (through $SCRATCH/proj/e/checkpoints -> $AREA/shared)"* ]]
    [[ $stderr == *"--exp-name"* ]]
  done
  [ "$(cat "$AREA/shared/task_0/model.pt")" = weights ]
  [ ! -e "$SCRATCH/proj/e/old_checkpoints" ]
}
