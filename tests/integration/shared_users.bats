#!/usr/bin/env bats
# A researcher among other users on the real cluster (issue 23): the toolkit runs as the
# test user (hpcalice, tests/helpers/users.bash); the other user (hpcbob) owns folders on
# the nodes ahead of the jobs. Root only sets the scene. The project, its venv (Debian's
# /usr/bin/python3: root's pyenv python is not runnable by others) and $SCRATCH live in a
# per-test folder under /var/tmp that the test user owns.
# shellcheck disable=SC2016 # the commands in single quotes are the job's

load ../helpers/cluster
load ../helpers/users

setup() {
  ensure_test_users
  hermetic_env
  cluster_env
  AREA=$(mktemp -d /var/tmp/hpc_shared_it.XXXXXX)
  chmod 755 "$AREA"
  export SCRATCH=$AREA/scratch HOME=$AREA/home
  PROJECT=$AREA/proj
  mkdir -p "$SCRATCH" "$HOME" "$PROJECT"
  bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$PROJECT" >/dev/null
  chown -R "$HPC_TEST_USER" "$SCRATCH" "$HOME" "$PROJECT"
  as_user /usr/bin/python3 -m venv --without-pip "$PROJECT/.venv"
}

teardown() {
  [[ -z ${JOB_ID:-} ]] || scancel "$JOB_ID" 2>/dev/null || true
  [[ -n ${KEEP_AREA:-} ]] || rm -rf -- "$AREA"
}

# submitter ARGS...: job_submitter.sh from the project, as the test user (replaces
# common.bash's, so that submit and refused act as the researcher).
submitter() {
  (cd "$PROJECT" && as_user env HOME="$HOME" SCRATCH="$SCRATCH" PATH="$PATH" \
    SLURM_CONF="$SLURM_CONF" bash hpc_files/job_submitter.sh "$@")
}

commands() {
  printf '%s\n' "$@" | as_user tee "$PROJECT/experiment_configurations.txt" >/dev/null
}

@test "a packed line that runs 'kill -9 0' fails on its own; the job log holds no source of the toolkit" {
  commands 'echo first' 'kill -9 0' 'echo third'
  submit --exp-name k9 --time 5 --pack 3 --cpus 3
  wait_job "$JOB_ID" 120
  local log
  log=$(job_log "$JOB_ID" k9 0)
  cat "$log"
  grep -q 'line 1 ended with exit code 137' "$log"
  grep -q 'line 0 ended with exit code 0' "$log"
  ! grep -qE 'Killed|exec setsid|trap .:. USR1|hpc_run_line_argv_to' "$log" || false
}
