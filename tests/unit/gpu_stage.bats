#!/usr/bin/env bats
# The GPU stage where there is no GPU (CI), and the GPU settings of the local cluster that
# are refused before anything starts. The stage itself runs in tests/gpu/ on a GPU machine.

load ../helpers/common

setup() {
  hermetic_env
  mkdir -p "$BATS_TEST_TMPDIR/bin"
}

# path_without_nvidia_smi: the machine's tools, less any nvidia-smi.
path_without_nvidia_smi() {
  local tool
  for tool in /usr/local/bin/* /usr/bin/* /bin/*; do
    [[ ${tool##*/} != nvidia-smi && ! -e $BATS_TEST_TMPDIR/bin/${tool##*/} ]] || continue
    ln -s "$tool" "$BATS_TEST_TMPDIR/bin/${tool##*/}"
  done
  export PATH=$BATS_TEST_TMPDIR/bin
}

# expect_skipped: one line says why, the summary counts it as skipped, exit 0.
expect_skipped() {
  run --separate-stderr bash "$REPO_ROOT/tests/run_tests.sh" gpu
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c 'gpu: no NVIDIA GPU on this machine (nvidia-smi found none): skipped' <<<"$output")" -eq 1 ]
  [ "${lines[-1]}" = "0 passed, 0 failed, 1 skipped" ]
  # Nothing else ran: no cluster, no install (the part alone never installs).
  [ "$(grep -cv -e '^$' -e '^=== GPU stage' -e 'skipped' <<<"$output")" -eq 0 ]
}

@test "run_tests.sh gpu without nvidia-smi: one line, skipped, not passed" {
  path_without_nvidia_smi
  expect_skipped
}

@test "run_tests.sh gpu where nvidia-smi finds no GPU (it fails): one line, skipped" {
  printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' \
    >"$BATS_TEST_TMPDIR/nvidia-smi"
  chmod +x "$BATS_TEST_TMPDIR/nvidia-smi"
  path_without_nvidia_smi
  ln -s "$BATS_TEST_TMPDIR/nvidia-smi" "$BATS_TEST_TMPDIR/bin/nvidia-smi"
  expect_skipped
}

@test "local_cluster.sh: HPC_LOCAL_GPUS other than fake/real, or real on several nodes, is refused" {
  HPC_LOCAL_CLUSTER_DIR=$BATS_TEST_TMPDIR/c HPC_LOCAL_GPUS=some run --separate-stderr \
    bash "$REPO_ROOT/tests/cluster/local_cluster.sh" start
  [ "$status" -ne 0 ]
  [[ $stderr == *"HPC_LOCAL_GPUS must be fake or real (got 'some')"* ]]
  HPC_LOCAL_CLUSTER_DIR=$BATS_TEST_TMPDIR/c HPC_LOCAL_GPUS=real run --separate-stderr \
    bash "$REPO_ROOT/tests/cluster/local_cluster.sh" start --nodes 2
  [ "$status" -ne 0 ]
  [[ $stderr == *"HPC_LOCAL_GPUS=real runs one node"*"use --nodes 1"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/c" ]
}

@test "local_cluster.sh: HPC_LOCAL_SLURM_PREFIX without the .deb files says how to get them" {
  mkdir -p "$BATS_TEST_TMPDIR/empty"
  HPC_LOCAL_CLUSTER_DIR=$BATS_TEST_TMPDIR/c HPC_LOCAL_SLURM_PREFIX=$BATS_TEST_TMPDIR/empty \
    run --separate-stderr bash "$REPO_ROOT/tests/cluster/local_cluster.sh" start
  [ "$status" -ne 0 ]
  [[ $stderr == *"holds no slurmd_*.deb: run bash tests/gpu/prepare_offline.sh"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/c" ]
}
