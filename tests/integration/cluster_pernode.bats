#!/usr/bin/env bats
# Node-local disks that are really per node (HPC_LOCAL_NODE_DISKS=pernode): each slurmd in
# its own mount namespace with its node's disk at /localscratch, so $SLURM_TMPDIR is the
# same path on every node with other contents, as on Compute Canada. The toolkit's core
# paths run there as the normal user (tests/helpers/variant_core.bash); a cluster of its
# own beside the run's (folder + _pernode, ports 300 higher).

load ../helpers/cluster
load ../helpers/variant_core

PERNODE=(_pernode 300 HPC_LOCAL_NODE_DISKS=pernode)

setup_file() {
  cluster_beside_start "${PERNODE[@]}"
}

teardown_file() {
  cluster_beside "${PERNODE[@]}" -- stop
}

setup() {
  integration_setup proj
}

@test "pernode: a file the batch script writes to \$SLURM_TMPDIR on node1 is not on node2 under the same path" {
  # shellcheck disable=SC2016 # expanded by the job
  run --separate-stderr sbatch --parsable -N 2 -t 5 -o "$SCRATCH/probe.out" --wrap \
    'echo here >"$SLURM_TMPDIR/mine"; srun -N 2 -n 2 bash -c "echo \$SLURMD_NODENAME \$SLURM_TMPDIR \$(cat \$SLURM_TMPDIR/mine 2>/dev/null || echo absent)"'
  [ "$status" -eq 0 ]
  wait_job "$output"
  cat "$SCRATCH/probe.out"
  [ "$(sort "$SCRATCH/probe.out" | awk '{print $2}' | sort -u)" = "/localscratch/job_$output" ]
  [ "$(sort "$SCRATCH/probe.out" | awk '{print $3}' | tr '\n' ' ')" = "here absent " ]
  # Nothing stays mounted on the host.
  ! findmnt /localscratch >/dev/null || false
}

@test "pernode: one job and an array" {
  core_single_and_array
}

@test "pernode: 2-node script: --data on both nodes; each rank's \$HPC_RESULTS_DIR is on its own node and comes back (issue 23, item 5)" {
  core_two_node_script
}

@test "pernode: 2-node torchrun" {
  core_two_node_torchrun
}

@test "pernode: 2-node lightning" {
  core_two_node_lightning
}

@test "pernode: a warned job requeues itself and resumes; its results come back" {
  core_requeue
}
