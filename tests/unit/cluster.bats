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

@test "a job of this version leaves its finished marker in its submission's home: another home's job of the same number is not stale" {
  export SLURM_JOB_ID=88 HPC_OUTPUT_DIR=$BATS_TEST_TMPDIR/out SLURM_RESTART_COUNT=0
  local rc old=$BATS_TEST_TMPDIR/out/jobs/old-1 new=$BATS_TEST_TMPDIR/out/jobs/new-2
  mkdir -p "$old" "$new"
  HPC_HOME=$old HPC_SUBMISSION_ID=old-1 HPC_SLURM_VERSION=24.11.5 hpc_slurm_job_finished 3
  [ "$(cat "$old/finished.88")" = "3 0" ]
  [ -z "$(find "$BATS_TEST_TMPDIR/out" -name '.hpc_finished*')" ] # nothing beside the homes
  # An array task's marker names the array and the task.
  SLURM_ARRAY_JOB_ID=90 SLURM_ARRAY_TASK_ID=4 HPC_HOME=$old HPC_SLURM_VERSION=24.11.5 hpc_slurm_job_finished 0
  [ "$(cat "$old/finished.90_4")" = "0 0" ]
  # The new submission's job 88 (its own home), requeued: attempt 2 runs.
  SLURM_RESTART_COUNT=1
  ! HPC_HOME=$new HPC_SUBMISSION_ID=new-2 hpc_slurm_stale_attempt_to rc || false
  HPC_HOME=$old HPC_SUBMISSION_ID=old-1 hpc_slurm_stale_attempt_to rc
  [ "$rc" = 3 ]
}

@test "the preemption watch: auto starts it only where Slurm said the job can be preempted" {
  local w
  # shellcheck disable=SC2034 # read by hpc_preempt_watch_to
  J_PARTITION=tmpdir OPT_DRY_RUN=0 OPT_LOCAL=0 J_PREEMPT_WATCH=auto
  declare -gA HPC_PARTITION_INFO=([tmpdir]="PartitionName=tmpdir GraceTime=0 PreemptMode=OFF State=UP"
    [low]="PartitionName=low GraceTime=30 PreemptMode=REQUEUE State=UP")
  HPC_SLURM_CONFIG=$'MaxArraySize            = 1001\nPreemptMode             = REQUEUE\nPreemptType             = preempt/partition_prio\n'
  hpc_preempt_watch_to w
  [ "$w" = no ]
  J_PARTITION=low hpc_preempt_watch_to w
  [ "$w" = yes ]
  J_PARTITION=unasked hpc_preempt_watch_to w # a partition Slurm did not describe
  [ "$w" = yes ]
  J_PREEMPT_WATCH=yes hpc_preempt_watch_to w # the user's yes and no win
  [ "$w" = yes ]
  J_PARTITION=low J_PREEMPT_WATCH=no hpc_preempt_watch_to w
  [ "$w" = no ]
  OPT_DRY_RUN=1 hpc_preempt_watch_to w # a dry run asks Slurm nothing: the safe yes
  [ "$w" = yes ]
  # A QOS may preempt whatever the partition says; no preemption at all: no watch.
  HPC_SLURM_CONFIG=${HPC_SLURM_CONFIG/partition_prio/qos}
  hpc_preempt_watch_to w
  [ "$w" = yes ]
  HPC_SLURM_CONFIG=${HPC_SLURM_CONFIG/qos/none}
  J_PARTITION=low hpc_preempt_watch_to w
  [ "$w" = no ]
  HPC_SLURM_CONFIG="" # Slurm did not answer
  hpc_preempt_watch_to w
  [ "$w" = yes ]
}
