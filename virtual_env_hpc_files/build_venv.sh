#!/bin/bash
# Batch script of the venv-building job (job_submitter.sh --setup-venv):
#   sbatch [options] build_venv.sh VENV REQUIREMENTS [MODULES]
# Creates VENV (if missing) and installs REQUIREMENTS into it. The experiments are
# submitted with --dependency=afterok on this job, so they start only if it succeeds.
set -euo pipefail

venv=${1:?usage: build_venv.sh VENV REQUIREMENTS [MODULES]}
requirements=${2:?usage: build_venv.sh VENV REQUIREMENTS [MODULES]}
modules=${3:-}

echo "[hpc] building venv $venv from $requirements on ${SLURMD_NODENAME:-$(hostname)}"
if [[ -n $modules ]]; then
  command -v module >/dev/null || { echo "[hpc] ERROR: modules '$modules' asked for, but this node has no 'module' command" >&2; exit 1; }
  # shellcheck disable=SC2086 # a space-separated list of modules
  module load $modules
fi
if [[ ! -f $venv/bin/activate ]]; then
  python3 -m venv -- "$venv"
fi
"$venv/bin/python" -m pip install -r "$requirements"
echo "[hpc] venv ready: $venv"
