#!/bin/bash
# Batch script of the venv-building job (job_submitter.sh --setup-venv):
#   sbatch [options] build_venv.sh VENV REQUIREMENTS [MODULES]
# Creates VENV (if missing) and installs REQUIREMENTS into it. The experiments are
# submitted with --dependency=afterok on this job, so they start only if it succeeds.
# sbatch runs a copy of this file from the node's spool folder: the job side's library is
# the one the submitting side names in HPC_JOB_LIB (hpc_files/lib/hpc_lib.sh exports it),
# else the one beside this file (run in place).
set -euo pipefail

venv=${1:?usage: build_venv.sh VENV REQUIREMENTS [MODULES]}
requirements=${2:?usage: build_venv.sh VENV REQUIREMENTS [MODULES]}
job_lib=${BASH_SOURCE[0]%/*}
[[ $job_lib != "${BASH_SOURCE[0]}" ]] || job_lib=.
job_lib=${HPC_JOB_LIB:-$job_lib/job_lib.sh}
[[ -r $job_lib ]] || {
  echo "build_venv.sh: the toolkit's job library $job_lib cannot be read on this node: submit with job_submitter.sh --setup-venv" >&2
  exit 1
}
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "$job_lib"
HPC_MODULES=${3:-}

hpc_log "building venv $venv from $requirements"
hpc_load_modules
if [[ ! -f $venv/bin/activate ]]; then
  python3 -m venv -- "$venv"
fi
"$venv/bin/python" -m pip install -r "$requirements"
hpc_log "venv ready: $venv"
