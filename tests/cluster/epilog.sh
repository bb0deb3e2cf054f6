#!/usr/bin/env bash
# Slurm Epilog of the local test cluster (see local_cluster.sh, which copies this file
# into CLUSTER_DIR/etc/). Runs as root on every allocated node when a job ends and removes
# the job's local scratch folder made by prolog.sh. It always exits 0: a failing Epilog
# would drain the node.
set -uo pipefail

base="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"

# The job's folder on this node: CLUSTER_DIR/localscratch/NODE/job_ID, or with per-node
# disks (cluster.settings node_disks=pernode:PATH; this slurmd's own disk is at PATH)
# PATH/job_ID.
disks="$(sed -n 's/^node_disks=//p' "${base}/cluster.settings" 2>/dev/null || true)"
if [[ "${disks}" == pernode:* ]]; then
    dir="${disks#pernode:}/job_${SLURM_JOB_ID:-}"
else
    dir="${base}/localscratch/${SLURMD_NODENAME:-}/job_${SLURM_JOB_ID:-}"
fi
if [[ -n "${SLURMD_NODENAME:-}" && -n "${SLURM_JOB_ID:-}" ]]; then
    rm -rf -- "${dir}" || true
fi
exit 0
