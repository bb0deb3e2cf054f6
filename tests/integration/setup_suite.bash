# shellcheck shell=bash
# Once per run of the integration tests (bats loads this file itself): the test users, and
# the run's folder under which each test gets a folder its user owns (HPC_TEST_RUN_DIR,
# tests/helpers/cluster.bash: user_folders). It lies outside /tmp (a cluster with a private
# /tmp per job hides /tmp from the jobs) and goes at the end unless HPC_TEST_KEEP=yes.

setup_suite() {
  load ../helpers/users
  ensure_test_users
  local base=${HPC_TEST_RUN_BASE:-/var/tmp}
  HPC_TEST_RUN_DIR=$(mktemp -d "$base/hpc_tests.XXXXXX")
  chmod 0755 "$HPC_TEST_RUN_DIR"
  export HPC_TEST_RUN_DIR
}

teardown_suite() {
  [[ ${HPC_TEST_KEEP:-} == yes || -z ${HPC_TEST_RUN_DIR:-} ]] || rm -rf -- "$HPC_TEST_RUN_DIR" || true
}
