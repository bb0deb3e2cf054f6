#!/usr/bin/env bats
# After submitting, on a cluster WITHOUT slurmdbd (JobCompType=jobcomp/filetxt only, as
# many lab clusters run): `sacct` fails, yet hpc status knows every task's state from
# the job completion log and squeue -t all. This file starts its own jobcomp-only cluster
# beside whichever one the run uses (its folder + "_jobcomp", its ports 100 higher; the
# sweep_split one is at + 50) and stops it at the end.

load ../helpers/cluster

setup_file() {
  cluster_beside_start _jobcomp 100 HPC_LOCAL_ACCOUNTING=jobcomp
}

teardown_file() {
  cluster_beside _jobcomp 100 HPC_LOCAL_ACCOUNTING=jobcomp -- stop
}

setup() {
  integration_setup proj
  # The cluster really has no accounting database.
  run sacct -X -j 1
  [ "$status" -ne 0 ]
  [[ $output == *"accounting storage is disabled"* ]]
}


@test "jobcomp only: pending and running tasks from squeue -t all, finished ones from the completion log" {
  printf '%s\n' 'sleep 6' 'echo broken >&2; exit 4' 'true' >"$PROJECT/experiment_configurations.txt"
  HPC_MAX_ARRAY_SIZE=2 submit --exp-name jc --time 5 --max-parallel 1
  local ids
  mapfile -t ids < <(sed -n 's/^Submitted batch job \([0-9]*\) .*/\1/p' <<<"$output")
  [ "${#ids[@]}" -eq 2 ]
  run --separate-stderr hpc status jc
  echo "$output"
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == "States from: "*"squeue -t all"* ]]
  [[ $stderr == *"sacct failed (exit 1"*"accounting storage is disabled"* ]]
  [[ $output != *UNKNOWN* ]]
  [[ $output == *"${ids[1]}_0  PENDING"* ]]
  wait_gone "${ids[@]}"
  # squeue still remembers them (MinJobAge): the completion log must answer first.
  run --separate-stderr hpc status jc
  echo "$output"
  [[ ${lines[0]} == "States from: jobcomp file $HPC_LOCAL_CLUSTER_DIR/log/jobcomp.txt" ]]
  [[ ${lines[1]} == *"COMPLETED 2, FAILED 1" ]]
  local -a f
  mapfile -t f < <(awk '$1 == 1' <<<"$output" | sed 's/   */\n/g') # ATTEMPTS holds single spaces
  [ "${f[1]}" = "${ids[0]}_1" ]
  [ "${f[2]}" = FAILED ]
  [ "${f[3]}" = 4:0 ]
  [[ ${f[4]} =~ ^[0-9:]+$ && ${f[5]} == node[1-4] ]]
  [ "${f[7]}" = "$SCRATCH/proj/hpc_outputs/jc-${ids[0]}_1.out" ]
  read -r -a f <<<"$(awk '$1 == 2' <<<"$output")"
  [ "${f[1]}" = "${ids[1]}_0" ]
  [ "${f[2]}" = COMPLETED ]
  run --separate-stderr hpc logs jc --failed
  [[ $output == *"==> task 1 (${ids[0]}_1) FAILED exit 4:0"* && $output == *broken* ]]
  run --separate-stderr hpc status jc --efficiency
  [[ $output == *"Efficiency: not available (sacct failed"* ]]
}

@test "jobcomp only: a job no source knows any more is named on stderr and shown UNKNOWN, never hidden" {
  printf 'true\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name gone --time 5
  wait_gone "$JOB_ID"
  # A job id no source knows (purged everywhere), recorded by hand in the ledger.
  printf '2026-01-01T00:00:00+0000\t7\tgone\t1\t%s\tsub7\tjob\t0\t%s\n' \
    "$SCRATCH/proj/hpc_outputs/jobs/x.sbatch" "$SCRATCH/proj/hpc_outputs/gone-%j.out" \
    >>"$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv"
  run --separate-stderr hpc status --summary
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  [[ $stderr == *"no source knows job(s) 7"* ]]
  [[ $output == *"jobs $JOB_ID "*"COMPLETED 1"* ]]
  [[ $output == *"jobs 7 "*"UNKNOWN 1"* ]]
}
