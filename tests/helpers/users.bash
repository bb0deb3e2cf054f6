# shellcheck shell=bash
# The normal users the tests act as: researchers are never root. HPC_TEST_USER submits,
# follows, cancels and cleans up; HPC_OTHER_USER is a second researcher on the same nodes
# (their files in shared places, ahead of ours). Root only creates them (and, in tests that
# must, plays an admin). Slurm's daemons stay root and start jobs as the submitting uid.

HPC_TEST_USER=${HPC_TEST_USER:-hpcalice}
HPC_OTHER_USER=${HPC_OTHER_USER:-hpcbob}

# ensure_test_users: both users exist, each with a home it owns (created once; a lock keeps
# suites run side by side from racing useradd).
ensure_test_users() {
  local user
  for user in "$HPC_TEST_USER" "$HPC_OTHER_USER"; do
    id -u "$user" >/dev/null 2>&1 && continue
    flock /etc/.hpc_test_users.lock useradd -m -s /bin/bash "$user" 2>/dev/null ||
      id -u "$user" >/dev/null 2>&1 || {
      echo "could not create the test user $user (useradd failed; run the tests as root)" >&2
      return 1
    }
  done
}

# as_user CMD...: run CMD as the test user (a login-less shell: the caller's environment
# minus what only root has, HOME set to the user's home).
as_user() {
  runuser -u "$HPC_TEST_USER" -- "$@"
}

# as_other CMD...: run CMD as the second user.
as_other() {
  runuser -u "$HPC_OTHER_USER" -- "$@"
}
