#!/usr/bin/env bats
# shellcheck disable=SC2030,SC2031 # each test sets its own environment
# hpc_files/lib/cluster.sh: Slurm versions, the job's own TMPDIR, and the guard against a
# requeue request that outlives its attempt (the real behaviour: tests/integration/).

load ../helpers/common

setup() {
  hermetic_env
  # shellcheck source=hpc_files/lib/cluster.sh
  source "$REPO_ROOT/hpc_files/lib/cluster.sh"
}

@test "versions are read from sbatch --version output and compared by year and month" {
  local v
  hpc_slurm_version_parse_to v "slurm 22.05.8"
  [ "$v" = 22.05.8 ]
  hpc_slurm_version_parse_to v "slurm-wlm 24.11.5"
  [ "$v" = 24.11.5 ]
  hpc_slurm_version_parse_to v "slurm 25.05.0-0rc1"
  [ "$v" = 25.05.0 ]
  hpc_slurm_version_parse_to v "4241"
  [ -z "$v" ]
  hpc_slurm_at_least 22.05 22.05.8
  hpc_slurm_at_least 23.02 24.11.5
  ! hpc_slurm_at_least 23.02 22.05.8 || false
  ! hpc_slurm_at_least 22.05 21.08.8 || false
}

@test "TMPDIR is the job's local scratch only when Slurm made it for this job" {
  local t
  export SLURM_JOB_ID=77 TMPDIR=$BATS_TEST_TMPDIR/node1/job_77
  mkdir -p "$TMPDIR"
  hpc_slurm_tmpdir_to t
  [ "$t" = "$TMPDIR" ]
  SLURM_TMPDIR=/x/slurm hpc_slurm_tmpdir_to t
  [ "$t" = /x/slurm ]
  TMPDIR=$BATS_TEST_TMPDIR hpc_slurm_tmpdir_to t # the login node's, passed on
  [ -z "$t" ]
  TMPDIR=/tmp hpc_slurm_tmpdir_to t
  [ -z "$t" ]
}

@test "on 24.11 a finished job leaves a marker and a later attempt of it is stale; not on 22.05" {
  export SLURM_JOB_ID=88 HPC_OUTPUT_DIR=$BATS_TEST_TMPDIR/out SLURM_RESTART_COUNT=1
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  printf '#!/bin/sh\necho "$@" >>"%s/scontrol.log"\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/bin/scontrol"
  chmod +x "$BATS_TEST_TMPDIR/bin/scontrol"
  PATH=$BATS_TEST_TMPDIR/bin:$PATH
  local rc
  HPC_SLURM_VERSION=22.05.8 hpc_slurm_job_finished 0
  [ ! -e "$HPC_OUTPUT_DIR/jobs/.hpc_finished.88" ]
  HPC_SLURM_VERSION=24.11.5 hpc_slurm_job_finished 3
  [ "$(cat "$HPC_OUTPUT_DIR/jobs/.hpc_finished.88")" = "3 1" ]
  [ ! -e "$BATS_TEST_TMPDIR/scontrol.log" ] # no Requeue=0: it would leave the job PREEMPTED
  ! hpc_slurm_stale_attempt_to rc || false # the same attempt is not stale
  SLURM_RESTART_COUNT=2 hpc_slurm_stale_attempt_to rc
  [ "$rc" = 3 ]
  SLURM_JOB_ID=89 SLURM_RESTART_COUNT=2
  ! hpc_slurm_stale_attempt_to rc || false # another job
}

@test "a finished marker is the submission's: a job of another submission that got the same number (Slurm numbering afresh) is not stale" {
  export SLURM_JOB_ID=88 HPC_OUTPUT_DIR=$BATS_TEST_TMPDIR/out SLURM_RESTART_COUNT=0
  local rc
  HPC_SUBMISSION_ID=old-1 HPC_SLURM_VERSION=24.11.5 hpc_slurm_job_finished 3
  [ "$(cat "$HPC_OUTPUT_DIR/jobs/.hpc_finished.old-1.88")" = "3 0" ]
  # The new submission's job 88, requeued: attempt 2 runs (it is not the old job's).
  HPC_SUBMISSION_ID=new-2 SLURM_RESTART_COUNT=1
  ! hpc_slurm_stale_attempt_to rc || false
  HPC_SUBMISSION_ID=old-1 hpc_slurm_stale_attempt_to rc
  [ "$rc" = 3 ]
}
