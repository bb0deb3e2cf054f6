#!/usr/bin/env bats
# cgroup enforcement (HPC_LOCAL_CGROUPS=yes: proctrack/cgroup, task/cgroup with
# ConstrainCores, ConstrainRAMSpace, ConstrainDevices; cgroup v1 here): a job sees only its
# own CPUs and GPUs, CUDA_VISIBLE_DEVICES counts from 0, and the toolkit's core paths run
# there as the normal user (tests/helpers/variant_core.bash). A cluster of its own beside
# the run's (folder + _cgroup, ports 350 higher). Only one cgroup-enforced cluster can run
# on a machine at a time: every cluster here names its nodes node1..node4, and the nodes'
# cgroup trees are named after them (slurm_node1, ...).

load ../helpers/cluster
load ../helpers/variant_core

CGROUP=(_cgroup 350 HPC_LOCAL_CGROUPS=yes)

setup_file() {
  cluster_beside_start "${CGROUP[@]}"
}

teardown_file() {
  cluster_beside "${CGROUP[@]}" -- stop
}

setup() {
  integration_setup proj
  grep -q '^ConstrainDevices=yes' "$HPC_LOCAL_CLUSTER_DIR/etc/cgroup.conf"
}

@test "cgroup: a job sees only its GPUs (CUDA_VISIBLE_DEVICES from 0) and its CPUs; another job's GPU device is denied" {
  # Another job holds node1's GPUs 0 and 1 first.
  local holder
  holder=$(sbatch --parsable -p tmpdir -w node1 --gres=gpu:2 -c 1 -t 5 -o /dev/null --wrap 'sleep 120')
  local start=$SECONDS
  until [[ $(squeue -h -j "$holder" -o %T) == RUNNING ]]; do
    ((SECONDS - start < 60)) || { echo "the holder job did not start" >&2; return 1; }
    sleep 0.5
  done
  local dev=$HPC_LOCAL_CLUSTER_DIR/gres/node1
  # shellcheck disable=SC2016 # expanded by the job
  printf '%s\n' "{ echo \"cvd=\$CUDA_VISIBLE_DEVICES gpus=\$SLURM_JOB_GPUS nproc=\$(nproc)\"; for i in 0 1 2 3; do (exec 3<$dev/nvidia\$i) 2>&1 | sed \"s/^/open\$i: /\"; done; true; } >\"\$HPC_CHECKPOINT_DIR/seen.txt\"" \
    >"$PROJECT/experiment_configurations.txt"
  submit --exp-name gpus --gpus 2 --cpus 1 --time 5 --cluster local --sbatch-option=--nodelist=node1
  wait_job "$JOB_ID"
  scancel "$holder"
  local seen=$SCRATCH/proj/gpus/checkpoints/seen.txt
  cat "$seen"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  core_ran_as_user "$JOB_ID"
  grep -qx 'cvd=0,1 gpus=2,3 nproc=1' "$seen"
  grep -q '^open0: .*Operation not permitted' "$seen"
  grep -q '^open1: .*Operation not permitted' "$seen"
  grep -q '^open2: .*No such device or address' "$seen"
  grep -q '^open3: .*No such device or address' "$seen"
}

@test "cgroup: one job and an array" {
  core_single_and_array
}

@test "cgroup: 2-node script with --data; each node's results come back" {
  core_two_node_script
}

@test "cgroup: 2-node torchrun" {
  core_two_node_torchrun
}

@test "cgroup: 2-node lightning" {
  core_two_node_lightning
}

@test "cgroup: a warned job requeues itself and resumes; its results come back" {
  core_requeue
}

@test "cgroup: hpc doctor says jobs are confined" {
  run --separate-stderr hpc doctor
  [ "$status" -eq 0 ]
  [[ $output == *"cgroup:         yes (proctrack/cgroup, task/cgroup"* ]]
}
