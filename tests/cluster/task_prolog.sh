#!/usr/bin/env bash
# Slurm TaskProlog of the local test cluster (see local_cluster.sh, which copies this file
# into CLUSTER_DIR/etc/). Runs as the job's user before the batch script and before every
# task of every step. Its stdout is read by slurmstepd: "export NAME=VALUE" sets a
# variable in the task, "unset NAME" removes one. It exports SLURM_TMPDIR when the Prolog
# made a local scratch folder for this job on this node (partition "tmpdir") and unsets it
# otherwise, so a value inherited from the submitting shell never leaks into a job.
set -euo pipefail

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

if [[ -n "${SLURMD_NODENAME:-}" && -n "${SLURM_JOB_ID:-}" && -d "${dir}" ]]; then
    if [[ "${SLURM_JOB_PARTITION:-}" == "tmponly" ]]; then
        # A cluster that sets only TMPDIR to the job's folder (no SLURM_TMPDIR).
        printf 'export TMPDIR=%s\nunset SLURM_TMPDIR\n' "${dir}"
    else
        printf 'export SLURM_TMPDIR=%s\n' "${dir}"
    fi
else
    printf 'unset SLURM_TMPDIR\n'
fi
