#!/usr/bin/env bash
# Summary: the GPU stage: start a one-node local Slurm cluster whose gres are this
# machine's NVIDIA GPUs, run tests/gpu/gpu.bats on it (TAP on stdout), write a report, stop
# the cluster. Called by `bash tests/run_tests.sh gpu`; works offline.
#
# Usage: bash tests/gpu/run_stage.sh
# Slurm: the machine's own when sbatch and slurmd are installed, else the .deb files that
# tests/gpu/prepare_offline.sh put in tests/.gpu_stage/debs (unpacked into the cluster
# folder). Python: HPC_GPU_VENV (a venv folder, or none for the python3 on PATH), else
# HPC_TEST_VENV when its torch sees CUDA, else the venv that python3 belongs to.
# Environment: HPC_GPU_REPORT_DIR (default tests/.tmp/gpu_report) receives gpu_report.md,
# gpu_tap.txt, gpu_figures.txt and cluster_logs.tar.gz; HPC_GPU_CLUSTER_DIR (default
# /tmp/hpc_gpu_cluster) and HPC_GPU_CLUSTER_PORT_OFFSET (default 250) place the cluster;
# HPC_GPU_BATS_FILTER (a regular expression) runs only the checks whose names match.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$root"

die() {
  printf 'run_stage.sh: %s\n' "$*" >&2
  exit 2
}

# cuda_ok PYTHON: its torch is there and sees a CUDA device.
cuda_ok() {
  "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null
}

# pick_venv: the Python environment the jobs use (a venv folder or none).
pick_venv() {
  if [[ -n ${HPC_GPU_VENV:-} ]]; then
    printf '%s' "$HPC_GPU_VENV"
  elif [[ -n ${HPC_TEST_VENV:-} ]] && cuda_ok "$HPC_TEST_VENV/bin/python3"; then
    printf '%s' "$HPC_TEST_VENV"
  else
    local prefix
    prefix=$(python3 -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "none")' 2>/dev/null) || prefix=none
    printf '%s' "$prefix"
  fi
}

# versions PYTHON: torch, CUDA and lightning versions, one line.
versions() {
  "$1" -c '
import torch
try:
    import lightning
    lv = lightning.__version__
except ImportError:
    lv = "missing"
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), lightning {lv}")' 2>&1 | tail -1
}

main() {
  local report=${HPC_GPU_REPORT_DIR:-$root/tests/.tmp/gpu_report}
  mkdir -p -- "$report"
  report=$(cd -- "$report" && pwd -P)
  rm -f -- "$report"/gpu_report.md "$report"/gpu_tap.txt "$report"/gpu_figures.txt "$report"/cluster_logs.tar.gz

  export HPC_LOCAL_CLUSTER_DIR=${HPC_GPU_CLUSTER_DIR:-/tmp/hpc_gpu_cluster}
  export HPC_LOCAL_CLUSTER_PORT_OFFSET=${HPC_GPU_CLUSTER_PORT_OFFSET:-250}
  export HPC_LOCAL_GPUS=real
  if [[ -n ${HPC_LOCAL_SLURM_PREFIX:-} ]]; then
    :
  elif command -v sbatch >/dev/null && command -v slurmd >/dev/null; then
    unset HPC_LOCAL_SLURM_PREFIX
  elif [[ -d $root/tests/.gpu_stage/debs ]]; then
    export HPC_LOCAL_SLURM_PREFIX=$root/tests/.gpu_stage/debs
  else
    die "no Slurm here and no tests/.gpu_stage/debs: run bash tests/gpu/prepare_offline.sh where apt works and carry tests/.gpu_stage"
  fi

  local venv py
  venv=$(pick_venv)
  if [[ $venv == none ]]; then py=python3; else py=$venv/bin/python3; fi
  export HPC_GPU_VENV=$venv HPC_GPU_REPORT_DIR=$report
  cuda_ok "$py" || echo "run_stage.sh: warning: $py has no torch that sees CUDA; the checks will fail (set HPC_GPU_VENV)" >&2

  # The cluster folder is exported above: the EXIT trap keeps its logs (also when it did
  # not start) and stops this cluster and no other.
  REPORT=$report
  trap 'tar -czf "$REPORT/cluster_logs.tar.gz" -C "$HPC_LOCAL_CLUSTER_DIR" log etc munge/munged.log 2>/dev/null || true
    bash "$root/tests/cluster/local_cluster.sh" stop >/dev/null 2>&1 || true' EXIT
  local env_lines
  env_lines=$(bash tests/cluster/local_cluster.sh start --nodes 1) || die "the GPU cluster did not start (see its messages above)"
  eval "$env_lines"
  command -v bats >/dev/null || die "bats not found (tests/gpu/prepare_offline.sh carries it)"

  {
    echo "# GPU stage report"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname), $(uname -sr)"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | sed 's/^/- GPU /'
    echo "- python: $py; $(versions "$py")"
    echo "- Slurm: $(slurmd -V 2>&1 | head -1)${HPC_LOCAL_SLURM_PREFIX:+ (from the .deb files in ${HPC_LOCAL_SLURM_PREFIX#"$root"/})}"
    echo "- gres: $(scontrol show node node1 | grep -o 'Gres=[^ ]*')"
  } >"$report/gpu_report.md"

  local rc=0
  bats ${HPC_GPU_BATS_FILTER:+-f "$HPC_GPU_BATS_FILTER"} tests/gpu | tee "$report/gpu_tap.txt" || rc=$?

  {
    echo
    echo "| check | result |"
    echo "| --- | --- |"
    sed -n 's/^ok [0-9]* gpu: \(.*\)/| \1 | passed |/p; s/^not ok [0-9]* gpu: \(.*\)/| \1 | FAILED |/p' "$report/gpu_tap.txt"
    echo
    [[ ! -f $report/gpu_figures.txt ]] || sed 's/^/- /' "$report/gpu_figures.txt"
  } >>"$report/gpu_report.md"
  echo "report: $report/gpu_report.md" >&2
  return "$rc"
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
