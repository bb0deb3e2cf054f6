#!/usr/bin/env bats
# The suite's own set-up (issue 30): the test users are made by whichever test asks first,
# whatever its PATH. A unit test runs under use_sbatch_stub's PATH, which has no /usr/sbin:
# on a fresh machine, where the users do not exist yet, useradd must still be found.

load ../helpers/common
load ../helpers/users

setup() {
  hermetic_env
  use_sbatch_stub
  # a user of its own, made and removed here (the suite's users may exist already)
  HPC_TEST_USER=hpcnew$$ HPC_OTHER_USER=hpcnew$$b
}

teardown() {
  local u
  for u in "$HPC_TEST_USER" "$HPC_OTHER_USER"; do
    /usr/sbin/userdel -r "$u" 2>/dev/null || true
  done
}

@test "ensure_test_users makes missing users under a PATH without /usr/sbin" {
  [[ :$PATH: != *:/usr/sbin:* ]]
  run ! id -u "$HPC_TEST_USER"
  run ensure_test_users
  [ "$status" -eq 0 ]
  id -u "$HPC_TEST_USER"
  id -u "$HPC_OTHER_USER"
  # each with a home it owns
  [ "$(stat -c %U "$(getent passwd "$HPC_TEST_USER" | cut -d: -f6)")" = "$HPC_TEST_USER" ]
}
