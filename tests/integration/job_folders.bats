#!/usr/bin/env bats
# The job's own local scratch folder on the real cluster (issue 12): it never removes a
# folder it did not make (another user's leftover, a planted link: the job runs beside it,
# in a folder of an unguessable name, issue 23), it never makes the
# profile's HPC_LOCAL_SCRATCH, it is distinct per node where nodes share one scratch path,
# and HPC_PROVIDES_TMPDIR=auto takes Slurm's SLURM_TMPDIR where the job has one.
# shellcheck disable=SC2016 # the commands in single quotes are the job's

load ../helpers/cluster

setup() {
  integration_setup proj
  DATA=$SCRATCH/proj
  LAB=$HPC_LOCAL_CLUSTER_DIR/localscratch_lab
  [[ -n $HPC_LOCAL_CLUSTER_DIR ]] || LAB=/tmp/hpc_local_cluster/localscratch_lab
  mkdir -p "$DATA/datasets/many"
  local i
  # Enough entries that two nodes extracting into one folder at once collide.
  for i in $(seq 300); do
    mkdir -p "$DATA/datasets/many/d$i"
    printf '%s' "$i" >"$DATA/datasets/many/d$i/f"
  done
  cat >"$PROJECT/report.sh" <<'EOF2'
n=$(find "$SLURM_TMPDIR/datasets" -type f | wc -l)
echo "node=$SLURMD_NODENAME tmp=$SLURM_TMPDIR files=$n" >"$HPC_CHECKPOINT_DIR/rank_${SLURM_PROCID:-0}.txt"
EOF2
  PLANTED=()
}

teardown() {
  local p
  for p in "${PLANTED[@]}"; do
    rm -rf -- "$p"
  done
}

commands() {
  printf '%s\n' "$@" >"$PROJECT/experiment_configurations.txt"
}

# held ARGS...: submit held (the test plants something before the job may start).
held() {
  submit "$@" --sbatch-option=--hold
}

# plant_foreign ID: on every node's local-lab scratch, a folder of user nobody (with a file)
# where the job's folder would go.
plant_foreign() {
  local n d
  for n in node1 node2 node3 node4; do
    d=$LAB/$n/hpc_job_$1_$n
    mkdir -p "$d"
    echo theirs >"$d/their_file"
    chown -R nobody "$d"
    PLANTED+=("$d")
  done
}

@test "another user's leftover hpc_job folder on the nodes is left intact: the 2-node job runs beside it, saying whose it is" {
  commands 'bash report.sh'
  held --cluster local-lab --exp-name foreign --which-distributed script --num-nodes 2 --time 5
  plant_foreign "$JOB_ID"
  scontrol release "$JOB_ID"
  wait_job "$JOB_ID" 180
  local log n r
  log=$(job_log "$JOB_ID" foreign)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q "is taken (it exists and belongs to nobody; not this job's, left alone): the job uses " "$log"
  for r in 0 1; do
    grep -Eq " tmp=$LAB/node[0-9]/hpc_job_${JOB_ID}_node[0-9]\.[A-Za-z0-9]{6} " "$DATA/foreign/checkpoints/rank_$r.txt"
  done
  for n in node1 node2 node3 node4; do
    [ "$(cat "$LAB/$n/hpc_job_${JOB_ID}_$n/their_file")" = theirs ]
    [ "$(stat -c %U "$LAB/$n/hpc_job_${JOB_ID}_$n")" = nobody ]
    [ -z "$(find "$LAB/$n" -maxdepth 1 -name "hpc_job_${JOB_ID}_$n.*")" ] # ours are gone
  done
}

@test "another user's leftover folder on a 1-node job is left intact too" {
  commands 'echo "the program ran in $SLURM_TMPDIR"'
  held --cluster local-lab --exp-name foreign1 --time 5
  plant_foreign "$JOB_ID"
  scontrol release "$JOB_ID"
  wait_job "$JOB_ID" 180
  local log n
  log=$(job_log "$JOB_ID" foreign1)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q "belongs to nobody; not this job's, left alone): the job uses" "$log"
  grep -Eq "^the program ran in $LAB/node[0-9]/hpc_job_${JOB_ID}_node[0-9]\.[A-Za-z0-9]{6}$" "$log"
  grep -q "removed the job's folder" "$log"
  for n in node1 node2 node3 node4; do
    [ "$(cat "$LAB/$n/hpc_job_${JOB_ID}_$n/their_file")" = theirs ]
  done
}

@test "a planted symbolic link where the job's folder goes is left as it is, and its target too" {
  commands 'echo mine >"$SLURM_TMPDIR/f"'
  held --cluster local-lab --exp-name planted --which-distributed script --num-nodes 2 --time 5
  local target=$BATS_TEST_TMPDIR/target n log
  mkdir -p "$target"
  echo precious >"$target/f"
  for n in node1 node2 node3 node4; do
    ln -s "$target" "$LAB/$n/hpc_job_${JOB_ID}_$n"
    PLANTED+=("$LAB/$n/hpc_job_${JOB_ID}_$n")
  done
  scontrol release "$JOB_ID"
  wait_job "$JOB_ID" 180
  log=$(job_log "$JOB_ID" planted)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q "is taken (it is a symbolic link; not this job's, left alone): the job uses" "$log"
  for n in node1 node2 node3 node4; do
    [ -L "$LAB/$n/hpc_job_${JOB_ID}_$n" ]
  done
  [ "$(cat "$target/f")" = precious ]
}

@test "labcluster profile: a missing /local/scratch/<user> is refused on the node, naming HPC_LOCAL_SCRATCH, and not made" {
  [ ! -e /local/scratch ] || { echo "this machine has /local/scratch: the test needs it absent" >&2; return 1; }
  commands 'echo the program started'
  submit --cluster labcluster --partition notmpdir --exp-name lab --time 5
  wait_job "$JOB_ID" 180
  local log
  log=$(job_log "$JOB_ID" lab)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = FAILED ]
  grep -q "the local scratch folder /local/scratch/$HPC_TEST_USER does not exist (or is not a folder) on this node (HPC_LOCAL_SCRATCH='/local/scratch/%u' in the cluster profile)" "$log"
  ! grep -qx 'the program started' "$log" || false
  [ ! -e /local/scratch ]
}

@test "nodes sharing one local scratch path: each gets its own folder, the 2-node job's data extract without collision" {
  local conf=$BATS_TEST_TMPDIR/shared.conf shared=$BATS_TEST_TMPDIR/shared_scratch r
  cp "$REPO_ROOT/hpc_files/clusters/local-lab.conf" "$conf"
  printf 'HPC_LOCAL_SCRATCH=%q\n' "$shared" >>"$conf"
  mkdir -p "$shared"
  commands 'bash report.sh'
  submit --cluster "$conf" --exp-name shared --which-distributed script --num-nodes 2 --time 5 --data datasets
  wait_job "$JOB_ID" 180
  cat "$(job_log "$JOB_ID" shared)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  ! grep -q "Unexpected inconsistency" "$(job_log "$JOB_ID" shared)" || false
  local nodes=()
  for r in 0 1; do
    grep -q "files=300$" "$DATA/shared/checkpoints/rank_$r.txt"
    nodes+=("$(sed -n 's/^node=\([^ ]*\) .*/\1/p' "$DATA/shared/checkpoints/rank_$r.txt")")
    grep -q " tmp=$shared/hpc_job_${JOB_ID}_${nodes[r]} " "$DATA/shared/checkpoints/rank_$r.txt"
  done
  [ "${nodes[0]}" != "${nodes[1]}" ]
  [ -z "$(ls -A "$shared")" ]
}

@test "HPC_PROVIDES_TMPDIR=auto (generic profile): Slurm's SLURM_TMPDIR where the job has one, the job's own elsewhere" {
  commands 'bash report.sh'
  submit --cluster generic --partition tmpdir --exp-name auto --time 5 --data datasets
  wait_job "$JOB_ID" 180
  cat "$(job_log "$JOB_ID" auto)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q " tmp=$(node_tmpdir 'node[0-9]' "$JOB_ID") files=300$" "$DATA/auto/checkpoints/rank_0.txt"
  grep -q 'made by Slurm on every node' "$(job_log "$JOB_ID" auto)"
  # Without Slurm's folder (partition notmpdir): the job's own, in the profile's /tmp.
  submit --cluster generic --partition notmpdir --exp-name auto2 --time 5 --data datasets
  wait_job "$JOB_ID" 180
  cat "$(job_log "$JOB_ID" auto2)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q " tmp=/tmp/hpc_job_${JOB_ID}_node[0-9] files=300$" "$DATA/auto2/checkpoints/rank_0.txt"
  [ -z "$(find /tmp -maxdepth 1 -name "hpc_job_${JOB_ID}_*")" ]
}
