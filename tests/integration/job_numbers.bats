#!/usr/bin/env bats
# Slurm hands job numbers out again: a cluster started from a fresh state numbers its jobs
# from the start while its completion log (or accounting) still holds the old jobs, and two
# clusters that share $SCRATCH number theirs alike. A submission's jobs are never read by
# number alone (python/hpc_toolkit/slurm.py JobRef). This file starts two jobcomp-only
# clusters of its own beside the run's (its folder + "_jnuma"/"_jnumb", ports 600/650
# higher), with other names and the same first job number, and stops them at the end.

load ../helpers/cluster

FIRST=607001 # apart from the other clusters' numbers modulo 10,000 (MASTER_PORT)
A=(_jnuma 600 HPC_LOCAL_ACCOUNTING=jobcomp HPC_LOCAL_CLUSTER_NAME=jnuma "HPC_LOCAL_FIRST_JOB_ID=$FIRST")
B=(_jnumb 650 HPC_LOCAL_ACCOUNTING=jobcomp HPC_LOCAL_CLUSTER_NAME=jnumb "HPC_LOCAL_FIRST_JOB_ID=$FIRST")

setup_file() {
  cluster_beside_start "${A[@]}"
  export A_CONF=$SLURM_CONF
}

teardown_file() {
  cluster_beside "${B[@]}" -- stop
  cluster_beside "${A[@]}" -- stop
}

setup() {
  export SLURM_CONF=$A_CONF
  integration_setup proj
  LEDGER=$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv
}

# restart_afresh NAME...: cluster NAME (A or B) stopped and started from a fresh state (its
# job numbers from FIRST again), its job completion log kept, as an admin who restarts
# slurmctld with a cleared state but keeps the log.
restart_afresh() {
  local -n cluster=$1
  local dir=${BESIDE_DIR}${cluster[0]} keep=$BATS_TEST_TMPDIR/jobcomp.kept
  cp -- "$dir/log/jobcomp.txt" "$keep"
  cluster_beside "${cluster[@]}" -- stop >/dev/null
  eval "$(cluster_beside "${cluster[@]}" -- start)"
  cat -- "$keep" >>"$dir/log/jobcomp.txt"
}

# state_of TARGET TASK: "STATE EXIT" of TASK in hpc status TARGET.
state_of() {
  run --separate-stderr hpc status "$1"
  echo "$output" >&2
  awk -v t="$2" '$1 == t { print $3, $4 }' <<<"$output"
}

@test "a cluster started afresh numbers its jobs again: the old submission keeps its own states and --rerun of it finds its failed line" {
  printf '%s\n' 'true' 'exit 3' >"$PROJECT/experiment_configurations.txt"
  submit -e nums --time 5
  local first=$JOB_ID old new
  wait_gone "$first"
  old=$(tail -1 "$LEDGER" | cut -f6)
  [ "$(tail -1 "$LEDGER" | cut -f11)" = jnuma ]
  restart_afresh A
  printf '%s\n' 'true' 'true' >"$PROJECT/experiment_configurations.txt"
  submit -e nums --time 5
  [ "$JOB_ID" = "$first" ] # the same number, another job
  new=$(tail -1 "$LEDGER" | cut -f6)
  [ "$new" != "$old" ]
  wait_gone "$JOB_ID"
  [ "$(state_of "$old" 1)" = "FAILED 3:0" ]
  [ "$(state_of "$new" 1)" = "COMPLETED 0:0" ]
  [ "$(state_of nums 1)" = "COMPLETED 0:0" ]
  # By number: the latest submission, which has nothing to rerun; by id: the old one.
  run --separate-stderr submitter --rerun "$first" --dry-run
  [[ $output == *"Nothing to rerun: every task of submission $new"* ]]
  run --separate-stderr submitter --rerun "$old" --dry-run
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"task 1 (line 2): FAILED (exit 3:0), was ${first}_1"* ]]
}

@test "two clusters that share \$SCRATCH number their jobs alike: each shows its own, and leaves the other's alone" {
  restart_afresh A
  cluster_beside "${B[@]}" -- start >/dev/null
  local b_conf=${BESIDE_DIR}_jnumb/etc/slurm.conf on_a on_b
  printf '%s\n' 'exit 3' >"$PROJECT/experiment_configurations.txt"
  submit -e both --time 5
  on_a=$JOB_ID
  export SLURM_CONF=$b_conf
  printf '%s\n' 'true' >"$PROJECT/experiment_configurations.txt"
  submit -e both --time 5
  on_b=$JOB_ID
  [ "$on_a" = "$on_b" ]
  wait_gone "$on_b"
  [ "$(cut -f11 "$LEDGER" | tr '\n' ' ')" = "jnuma jnumb " ]
  local sub_a sub_b
  sub_a=$(head -1 "$LEDGER" | cut -f6) sub_b=$(tail -1 "$LEDGER" | cut -f6)
  # On B: B's job by its number; A's submission is not read from B's job of that number.
  [ "$(state_of "$on_b" 0)" = "COMPLETED 0:0" ]
  run --separate-stderr hpc status "$sub_a"
  echo "$output $stderr"
  [[ $stderr == *"submitted on cluster jnuma, not this one (jnumb)"* ]]
  [[ $(awk '$1 == 0 { print $3 }' <<<"$output") == UNKNOWN ]]
  run --separate-stderr submitter --rerun "$sub_a" --dry-run
  [ "$status" -eq 2 ]
  [[ $stderr == *"was made on cluster jnuma, not on this one (jnumb)"* ]]
  # On A: the same number is A's job, which failed.
  export SLURM_CONF=$A_CONF
  wait_gone "$on_a"
  [ "$(state_of "$on_a" 0)" = "FAILED 3:0" ]
  run --separate-stderr submitter --rerun "$on_a" --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"task 0 (line 1): FAILED (exit 3:0)"* ]]
}
