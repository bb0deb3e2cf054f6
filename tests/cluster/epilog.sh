#!/usr/bin/env bash
# Slurm Epilog of the local test cluster (see local_cluster.sh, which copies this file
# into CLUSTER_DIR/etc/). Runs as root on every allocated node when a job ends and removes
# the job's local scratch folder made by prolog.sh. It always exits 0: a failing Epilog
# would drain the node.
set -uo pipefail

base="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ -n "${SLURMD_NODENAME:-}" && -n "${SLURM_JOB_ID:-}" ]]; then
    rm -rf -- "${base}/localscratch/${SLURMD_NODENAME}/job_${SLURM_JOB_ID}" || true
fi
exit 0
