#!/usr/bin/env bats
# Files the toolkit wrote earlier, on the real cluster (issue 12): a queued job keeps the
# data it was submitted with while later submissions change it (archives named by content,
# pruned once no queued job refers to them); tampered state never runs code on a node.
# shellcheck disable=SC2016 # the commands in single quotes are the job's

load ../helpers/cluster

setup() {
  integration_setup proj
  DATA=$SCRATCH/proj
  mkdir -p "$DATA/datasets/many"
  local i
  for i in $(seq 200); do
    printf '%s' "$i" >"$DATA/datasets/many/f$i"
  done
  cat >"$PROJECT/report.sh" <<'EOF2'
echo "files=$(find "$SLURM_TMPDIR/datasets" -type f | wc -l)" >"$HPC_CHECKPOINT_DIR/report.txt"
EOF2
  printf '%s\n' 'bash report.sh' >"$PROJECT/experiment_configurations.txt"
}

@test "data changed while a job is held: it extracts the data it was submitted with; its archive is pruned after it" {
  export HPC_STAGING_KEEP_MIN=0
  submit --cluster local --exp-name first --time 5 --data datasets --sbatch-option=--hold
  local first=$JOB_ID first_archive first_sha
  first_archive=$(sed -n "s/^export HPC_DATA_ARCHIVE='\\(.*\\)'$/\\1/p" "$DATA"/hpc_outputs/jobs/first-*/job.sbatch)
  first_sha=$(sed -n "s/^export HPC_DATA_SHA='\\(.*\\)'$/\\1/p" "$DATA"/hpc_outputs/jobs/first-*/job.sbatch)
  printf 'x' >"$DATA/datasets/many/f201"
  submit --cluster local --exp-name second --time 5 --data datasets
  local second=$JOB_ID
  wait_job "$second" 180
  [ "$(job_state "$second")" = COMPLETED ]
  [ -f "$first_archive" ] # the held job still refers to it
  scontrol release "$first"
  wait_job "$first" 180
  cat "$(job_log "$first" first)"
  [ "$(job_state "$first")" = COMPLETED ]
  [ "$(cat "$DATA/first/checkpoints/report.txt")" = files=200 ]
  [ "$(cat "$DATA/second/checkpoints/report.txt")" = files=201 ]
  grep -q "data: extracting ${first_archive##*/} (manifest sha256 $first_sha, 202 entries, " "$(job_log "$first" first)"
  # Both jobs have ended: the next submission with other data prunes their archives.
  printf 'y' >"$DATA/datasets/many/f202"
  submit --cluster local --exp-name third --time 5 --data datasets
  [[ $stderr == *"data: pruned 2 archive(s)"* ]]
  [ ! -e "$first_archive" ]
  [ "$(find "$DATA/.hpc_staging" -name '*.tar*' | wc -l)" -eq 1 ]
  wait_job "$JOB_ID" 180
  [ "$(cat "$DATA/third/checkpoints/report.txt")" = files=202 ]
}

@test "a tampered .hpc_staging state never runs on a node; a tampered size in a kept job script stops that job" {
  local pwned=$BATS_TEST_TMPDIR/pwned state script
  submit --cluster local-lab --exp-name one --time 5 --data datasets
  wait_job "$JOB_ID" 180
  state=$(ls "$DATA"/.hpc_staging/*.state)
  awk -v p="$pwned" '{ $3 = "x[$(touch " p ")]"; print }' "$state" >"$state.new" && mv "$state.new" "$state"
  submit --cluster local-lab --exp-name two --time 5 --data datasets
  [[ $stderr == *"data: building"* ]]
  wait_job "$JOB_ID" 180
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(cat "$DATA/two/checkpoints/report.txt")" = files=200 ]
  [ ! -e "$pwned" ]
  # The kept batch script, edited and resubmitted by hand.
  script=$(ls "$DATA"/hpc_outputs/jobs/two-*/job.sbatch)
  sed -i "s|^export HPC_DATA_BYTES=.*|export HPC_DATA_BYTES='x[\$(touch $pwned)]'|" "$script"
  JOB_ID=$(cd "$PROJECT" && sbatch --parsable "$script")
  JOB_ID=${JOB_ID%%;*}
  wait_job "$JOB_ID" 180
  cat "$(job_log "$JOB_ID" two)"
  [ "$(job_state "$JOB_ID")" = FAILED ]
  grep -q "is not a number (was .hpc_staging edited?): submit again" "$(job_log "$JOB_ID" two)"
  [ ! -e "$pwned" ]
}
