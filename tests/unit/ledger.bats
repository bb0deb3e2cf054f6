#!/usr/bin/env bats
# The submissions ledger (hpc_files/lib/ledger.sh) with a recording sbatch: the fields
# hpc status, logs and cancel read, for a job, a split array and a venv job.

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'echo 0' 'echo 1' 'echo 2' 'echo 3' 'echo 4'
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  LEDGER=$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv
}

@test "one line per Slurm job: submission id, kind, task offset and log pattern" {
  submitter -e one >/dev/null
  [ "$(wc -l <"$LEDGER")" -eq 1 ]
  # One field a line: read -a would merge empty fields (tabs are IFS whitespace).
  local -a f
  mapfile -t f < <(tr '\t' '\n' <"$LEDGER")
  [ "${#f[@]}" -eq 12 ] || { printf '%s\n' "${f[@]}"; false; }
  [ "${f[1]}" = 4242 ]
  [ "${f[2]}" = one ]
  [ "${f[3]}" = 5 ]
  [[ ${f[5]} == one-[0-9]*-[0-9]*-[0-9]* ]]
  [ "${f[4]}" = "$SCRATCH/proj/hpc_outputs/jobs/${f[5]}/job.sbatch" ]
  [ "${f[6]}" = job ]
  [ "${f[7]}" = 0 ]
  [ "${f[8]}" = "$SCRATCH/proj/hpc_outputs/one-%A_%a.out" ]
  [ -z "${f[9]}" ] && [ "${f[11]}" = "${USER:-}" ]
}

@test "a split array and its venv job: one submission id, offsets 0, 2, 4" {
  printf '# none\n' >"$PROJECT/requirements.txt"
  HPC_MAX_ARRAY_SIZE=2 submitter -e split --setup-venv >/dev/null
  cut -f2,4,6,7,8,9 "$LEDGER"
  [ "$(cut -f7,8 "$LEDGER" | tr '\t\n' ' ')" = "venv 0 job 0 job 2 job 4 " ]
  [ "$(cut -f6 "$LEDGER" | sort -u | wc -l)" -eq 1 ]
  [ "$(cut -f4 "$LEDGER" | tr '\n' ' ')" = "1 2 2 1 " ]
  [ "$(sed -n 1p "$LEDGER" | cut -f9)" = "$SCRATCH/proj/hpc_outputs/split-venv-%j.out" ]
}

@test "a plain job's log pattern uses %j; two submissions never share an id" {
  printf 'echo one\n' >"$PROJECT/experiment_configurations.txt"
  submitter -e solo >/dev/null
  sleep 1
  submitter -e solo >/dev/null
  [ "$(cut -f9 "$LEDGER" | sort -u)" = "$SCRATCH/proj/hpc_outputs/solo-%j.out" ]
  [ "$(cut -f6 "$LEDGER" | sort -u | wc -l)" -eq 2 ]
}

@test "the cluster's name comes from slurm.conf's first ClusterName line, any case, a comment after it; a bad one or none gives none" {
  # shellcheck source=hpc_files/lib/ledger.sh
  source "$REPO_ROOT/hpc_files/lib/hpc_lib.sh" && source "$REPO_ROOT/hpc_files/lib/ledger.sh"
  local c conf=$BATS_TEST_TMPDIR/slurm.conf
  printf '# ClusterName=commented\nSlurmUser=root\n  clustername = lab.c-1  # ours\nClusterName=second\n' >"$conf"
  SLURM_CONF=$conf hpc_ledger_cluster_to c
  [ "$c" = lab.c-1 ]
  printf 'ClusterName=two words\nClusterName=later\n' >"$conf"
  SLURM_CONF=$conf hpc_ledger_cluster_to c
  [ -z "$c" ]
  printf 'SlurmUser=root' >"$conf" # no ClusterName, no final newline
  SLURM_CONF=$conf hpc_ledger_cluster_to c
  [ -z "$c" ]
  SLURM_CONF=$BATS_TEST_TMPDIR/missing.conf hpc_ledger_cluster_to c
  [ -z "$c" ]
}
