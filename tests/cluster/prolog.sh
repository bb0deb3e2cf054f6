#!/usr/bin/env bash
# Slurm Prolog of the local test cluster (see local_cluster.sh, which copies this file
# into CLUSTER_DIR/etc/ and names it in slurm.conf). Runs as root on every allocated node
# (PrologFlags=Alloc). On partition "tmpdir" it creates the job's local scratch folder
# CLUSTER_DIR/localscratch/$SLURMD_NODENAME/job_$SLURM_JOB_ID, owned by the job's user,
# like Compute Canada's SLURM_TMPDIR. Jobs on partition "notmpdir" get nothing.
set -euo pipefail

base="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ "${SLURM_JOB_PARTITION:-}" != "tmpdir" && "${SLURM_JOB_PARTITION:-}" != "tmponly" ]]; then
    exit 0
fi

: "${SLURMD_NODENAME:?}" "${SLURM_JOB_ID:?}"
# The job's folder on this node: CLUSTER_DIR/localscratch/NODE/job_ID, or with per-node
# disks (cluster.settings node_disks=pernode:PATH; this slurmd's own disk is at PATH)
# PATH/job_ID.
disks="$(sed -n 's/^node_disks=//p' "${base}/cluster.settings" 2>/dev/null || true)"
if [[ "${disks}" == pernode:* ]]; then
    dir="${disks#pernode:}/job_${SLURM_JOB_ID:-}"
else
    dir="${base}/localscratch/${SLURMD_NODENAME:-}/job_${SLURM_JOB_ID:-}"
fi
mkdir -p -- "${dir}"
chown -- "${SLURM_JOB_UID:?}:${SLURM_JOB_GID:-$(id -g -- "${SLURM_JOB_UID}")}" "${dir}"
chmod 0700 -- "${dir}"
