#!/usr/bin/env bats
# hpc why and hpc doctor on a real cluster: a job in a partition an admin set DOWN, one
# waiting on a dependency, one whose --time runs into a maintenance reservation, and the
# cluster described by doctor (with a probe job). The partition goes down and the
# reservation is made on a cluster of this file's own beside the run's (its folder +
# "_why", its ports 730 higher, a job completion log instead of slurmdbd), never on the
# shared one; it stops at the end.

load ../helpers/cluster

WHY=(_why 730 HPC_LOCAL_ACCOUNTING=jobcomp)

setup_file() {
  cluster_beside_start "${WHY[@]}"
}

teardown_file() {
  cluster_beside "${WHY[@]}" -- stop
}

setup() {
  integration_setup proj
}

teardown() {
  as_admin scontrol update PartitionName=notmpdir State=UP 2>/dev/null || true
  as_admin scontrol delete ReservationName=hpc_why_maint 2>/dev/null || true
}

# sbatch_job ARGS...: a job of the researcher's, submitted with ARGS; sets JOB.
sbatch_job() {
  JOB=$(sbatch --parsable --chdir "$BATS_TEST_TMPDIR" -o /dev/null "$@" --wrap true)
  [[ $JOB =~ ^[0-9]+$ ]] || { echo "no job id: $JOB" >&2 && return 1; }
}

# wait_reason JOB REASON: until squeue shows the job pending for REASON (30 s at most).
wait_reason() {
  local i
  for ((i = 0; i < 60; i++)); do
    [[ $(squeue -h -j "$1" -o %r) == "$2" ]] && return 0
    sleep 0.5
  done
  echo "job $1 is not pending for '$2': $(squeue -h -j "$1" -o '%T %r')" >&2
  return 1
}

@test "hpc why: a job in a partition that is down names it and the partitions up" {
  as_admin scontrol update PartitionName=notmpdir State=DOWN
  sbatch_job -p notmpdir -t 5
  wait_reason "$JOB" PartitionDown
  run --separate-stderr hpc why "$JOB"
  [ "$status" -eq 0 ]
  [[ $output == *"Job $JOB ("*") is PENDING in partition notmpdir."* ]]
  [[ $output == *"Slurm says: PartitionDown. Partition notmpdir is DOWN"* ]]
  [[ $output == *"--partition NAME (up now: tmpdir, "* ]]
  scancel "$JOB"
}

@test "hpc why: a job waiting on a held one names its dependency; once done, it points to status and logs" {
  sbatch_job -H -t 5
  local first=$JOB
  sbatch_job -t 5 -d "afterok:$first"
  wait_reason "$JOB" Dependency
  run --separate-stderr hpc why "$JOB"
  [ "$status" -eq 0 ]
  [[ $output == *"Slurm says: Dependency. It waits for another job: afterok:${first}"*"(unfulfilled)."* ]]
  run --separate-stderr hpc why "$first"
  [[ $output == *"Slurm says: JobHeldUser."* && $output == *"scontrol release $first"* ]]
  scontrol release "$first"
  local i
  for ((i = 0; i < 60; i++)); do
    [[ $(scontrol show job "$JOB" 2>/dev/null) == *JobState=COMPLETED* ]] && break
    sleep 0.5
  done
  run --separate-stderr hpc why "$JOB"
  [ "$status" -eq 0 ]
  [[ $output == *"is COMPLETED (exit 0:0"* ]]
  [[ $output == *"hpc status $JOB"* && $output == *"hpc logs $JOB"* ]]
}

@test "hpc why: a --time that runs into a maintenance says how long the job can be" {
  as_admin scontrol create ReservationName=hpc_why_maint StartTime=now+2hours Duration=60 \
    Nodes=ALL Users=root Flags=MAINT,IGNORE_JOBS
  sbatch_job -t 3:00:00
  wait_reason "$JOB" "ReqNodeNotAvail, Reserved for maintenance"
  run --separate-stderr hpc why "$JOB"
  [ "$status" -eq 0 ]
  [[ $output == *"maintenance hpc_why_maint takes node[1-4] from "* ]]
  # about 2 hours from now, less a minute of margin
  [[ $output =~ "the job's --time (03:00:00) runs into it: with --time 01:5"[0-9]":"[0-9][0-9]" or less" ]]
  scancel "$JOB"
}

@test "hpc doctor describes the cluster, probes SLURM_TMPDIR, and writes a profile job_submitter.sh takes" {
  local version
  version=$(sbatch --version | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
  run --separate-stderr hpc doctor --probe --write mine
  [ "$status" -eq 0 ]
  [[ $output == *"Slurm $version, supported"* ]]
  [[ $output == *"short        UP     00:05:00"* ]]
  [[ $output == *"GPU types (--gpu-type): a100"* ]]
  [[ $output == *"Accounting:     no slurmdbd; a job completion log"* ]]
  [[ $output =~ "SLURM_TMPDIR:   yes ("[^\)]*"/job_"[0-9]+")" ]]
  [[ $output == *"Wrote $PROJECT/hpc_files/clusters/mine.conf"* ]]
  grep -qx 'HPC_PROVIDES_TMPDIR="yes"' "$PROJECT/hpc_files/clusters/mine.conf"
  run --separate-stderr hpc doctor --write mine
  [ "$status" -eq 2 ]
  [[ $stderr == *"mine.conf exists: pass --force"* ]]
  printf 'python argv_dump.py p\n' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --cluster mine --exp-name doc --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"#SBATCH --partition=\"tmpdir\""* ]]
  [[ $output == *"#SBATCH --time=\"01:00:00\""* ]]
}

@test "hpc doctor on the run's own cluster (slurmdbd accounting)" {
  SLURM_CONF=$BESIDE_DIR/etc/slurm.conf run --separate-stderr hpc doctor
  [ "$status" -eq 0 ]
  [[ $output == *"Accounting:     slurmdbd"* ]]
  [[ $output == *"preemptible"*"REQUEUE"* ]]
}
