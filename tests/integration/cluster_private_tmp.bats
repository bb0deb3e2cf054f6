#!/usr/bin/env bats
# A private /tmp per job and node (HPC_LOCAL_PRIVATE_TMP=yes: job_container/tmpfs): the
# job sees none of the host's /tmp, nor another node's. The toolkit's core paths run there
# as the normal user (tests/helpers/variant_core.bash), with Slurm's SLURM_TMPDIR
# (partition tmpdir) and without it, the job making its own folders in the private /tmp
# (issue 23, item 5). A cluster of its own beside the run's (ports 400 higher), in a
# folder outside /tmp (the jobs could not see Slurm's own files there).

load ../helpers/cluster
load ../helpers/variant_core

setup_file() {
  # Inside the 24.11 and 26.05 roots (tests/setup/slurm_chroot.sh) job_container/tmpfs makes
  # every job fail ("couldn't chdir", the task prolog not found: the job's namespace is set up
  # from the host's root, not the chroot's); the setup runs, and is tested, on the host's
  # Slurm (docs/testing.md, "Cluster setups").
  if [[ -n ${HPC_SLURM_CHROOT:-} ]]; then
    skip "a private /tmp per job (job_container/tmpfs) cannot run inside the Slurm $HPC_SLURM_CHROOT root: tested on the host's Slurm only"
  fi
  # Outside /tmp, named by the port offset: apart from other runs' clusters.
  local dir=${HPC_LOCAL_CLUSTER_DIR:-/tmp/hpc_local_cluster}
  [[ $dir != /tmp && $dir != /tmp/* ]] ||
    export HPC_LOCAL_CLUSTER_DIR=/var/tmp/hpc_cluster_offset${HPC_LOCAL_CLUSTER_PORT_OFFSET:-0}
  cluster_beside_start _ptmp 400 HPC_LOCAL_PRIVATE_TMP=yes
}

teardown_file() {
  [[ -z ${HPC_SLURM_CHROOT:-} ]] || return 0
  cluster_beside _ptmp 400 HPC_LOCAL_PRIVATE_TMP=yes -- stop
}

setup() {
  integration_setup proj
  # No SLURM_TMPDIR (partition notmpdir): the job's own folders, in each node's private /tmp.
  NOTMP=$BATS_TEST_TMPDIR/private-tmp.conf
  printf 'source %q\nHPC_LOCAL_SCRATCH=/tmp\n' "$PROJECT/hpc_files/clusters/local-lab.conf" >"$NOTMP"
}

@test "private /tmp: each job and node has its own /tmp; the host's is not seen" {
  local mark=hpc_ptmp_probe_$$
  touch "/tmp/$mark"
  # shellcheck disable=SC2016 # expanded by the job
  run --separate-stderr sbatch --parsable -N 2 -t 5 -o "$SCRATCH/probe.out" --wrap \
    "echo here >/tmp/mine; srun -N 2 -n 2 bash -c 'echo \$SLURMD_NODENAME \$(cat /tmp/mine 2>/dev/null || echo absent) \$(ls /tmp/$mark 2>/dev/null || echo nohost)'"
  rm -f "/tmp/$mark"
  [ "$status" -eq 0 ]
  wait_job "$output"
  cat "$SCRATCH/probe.out"
  [ "$(sort "$SCRATCH/probe.out" | awk '{print $2, $3}' | tr '\n' ' ')" = "here nohost absent nohost " ]
}

@test "private /tmp: one job and an array" {
  core_single_and_array
}

@test "private /tmp: 2-node script with --data; each node's results come back" {
  core_two_node_script
}

@test "private /tmp, no SLURM_TMPDIR: 2-node script, the job's own folders in each node's /tmp; each node's results come back (issue 23, item 5)" {
  submit_args=(--cluster "$NOTMP")
  core_two_node_script
  # shellcheck disable=SC2016 # the log's words
  grep -q 'local scratch: $SLURM_TMPDIR=/tmp/hpc_job_' "$(job_log "$JOB_ID" two)"
}

@test "private /tmp: 2-node torchrun" {
  core_two_node_torchrun
}

@test "private /tmp: 2-node lightning" {
  core_two_node_lightning
}

@test "private /tmp: a warned job requeues itself and resumes; its results come back" {
  core_requeue
}

@test "private /tmp: hpc doctor says each job has its own /tmp" {
  run --separate-stderr hpc doctor
  [ "$status" -eq 0 ]
  [[ $output == *"Private /tmp:   yes ("*"): each job has its own /tmp on each node"* ]]
}
