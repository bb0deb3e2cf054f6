# shellcheck shell=bash
# The normal users the tests act as: researchers are never root. HPC_TEST_USER submits,
# follows, cancels and cleans up; HPC_OTHER_USER is a second researcher on the same nodes
# (their files in shared places, ahead of ours). Root only creates them (and, in tests that
# must, plays an admin). Slurm's daemons stay root and start jobs as the submitting uid.

HPC_TEST_USER=${HPC_TEST_USER:-hpcalice}
HPC_OTHER_USER=${HPC_OTHER_USER:-hpcbob}
# runuser and useradd by path: a test may narrow PATH to one without /usr/sbin
# (no_sbatch_on_path, use_sbatch_stub), and the first test to need the users may be such a
# test on a machine where they do not exist yet.
HPC_RUNUSER=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v runuser) || HPC_RUNUSER=runuser
HPC_USERADD=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v useradd) || HPC_USERADD=useradd

# ensure_test_users: both users exist, each with a home it owns (created once; a lock keeps
# suites run side by side from racing useradd).
ensure_test_users() {
  local user
  for user in "$HPC_TEST_USER" "$HPC_OTHER_USER"; do
    id -u "$user" >/dev/null 2>&1 && continue
    PATH=/usr/sbin:/sbin:/usr/bin:/bin flock /etc/.hpc_test_users.lock "$HPC_USERADD" -m -s /bin/bash "$user" 2>/dev/null ||
      id -u "$user" >/dev/null 2>&1 || {
      echo "could not create the test user $user (useradd failed; run the tests as root)" >&2
      return 1
    }
  done
}

# user_path: the caller's PATH less the folders under /root (mode 700: pyenv's shims would
# shadow /usr/bin/python3 with an interpreter no other user may run).
user_path() {
  local dir out=""
  local IFS=:
  for dir in $PATH; do
    [[ $dir == /root || $dir == /root/* ]] || out+=${out:+:}$dir
  done
  printf '%s' "$out"
}

# as_user CMD...: run CMD as the test user in the caller's environment (the test's
# hermetic SCRATCH, SLURM_CONF, PATH less /root's folders). HOME stays the caller's when
# the user owns it (an integration test's hermetic home), else it is the user's own.
as_user() {
  local home=$HOME
  [[ $(stat -c %U -- "$home" 2>/dev/null) == "$HPC_TEST_USER" ]] ||
    home=$(getent passwd "$HPC_TEST_USER" | cut -d: -f6)
  "$HPC_RUNUSER" -u "$HPC_TEST_USER" -- env HOME="$home" PATH="$(user_path)" "$@"
}

# as_other CMD...: run CMD as the second user (its own HOME).
as_other() {
  "$HPC_RUNUSER" -u "$HPC_OTHER_USER" -- env PATH="$(user_path)" "$@"
}
