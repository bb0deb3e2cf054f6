#!/usr/bin/env bats
# Clusters configured differently (tests/cluster/local_cluster.sh): the Slurm version read
# at submission, a partition whose MaxTime is lower than the asked --time, typed GPUs and
# --gpu-type, a cluster that sets only TMPDIR. Runs on every tested Slurm version.

load ../helpers/cluster

setup() {
  integration_setup proj
}

field() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# no_submission: nothing reached Slurm or the jobs folder.
no_submission() {
  local f
  for f in "$SCRATCH"/proj/hpc_outputs/jobs/*; do
    [ ! -e "$f" ] || { echo "left behind: $f"; return 1; }
  done
}

@test "the cluster's Slurm version is read at submission and written into the batch script and the job log" {
  local version
  version=$(sbatch --version | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -1)
  [ -n "$version" ]
  printf 'python argv_dump.py ver\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name ver --time 5
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -qxF "export HPC_SLURM_VERSION='$version'" "$SCRATCH"/proj/hpc_outputs/jobs/ver-*/job.sbatch
  grep -q "Slurm $version\$" "$(job_log "$JOB_ID" ver)"
  [ "$(field "$SCRATCH/proj/ver/checkpoints/ver.json" 'd["env"]["HPC_SLURM_VERSION"]')" = "$version" ]
}

@test "--time above the partition's MaxTime is refused at submission, naming the limit" {
  printf 'true\n' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --exp-name long -p short --time 00:10:00
  [ "$status" -eq 2 ]
  [[ $stderr == *"--time 00:10:00 is longer than partition short allows (MaxTime=00:05:00)"* ]]
  [[ $stderr == *"at most --time 00:05:00"* ]]
  [ -z "$output" ]
  no_submission
  [ -z "$(squeue -h -n long -o %i)" ]
}

@test "--time within the short partition's MaxTime runs there" {
  printf 'python argv_dump.py short\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name shortok -p short --time 00:04:00
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(field "$SCRATCH/proj/shortok/checkpoints/short.json" 'd["env"]["SLURM_JOB_PARTITION"]')" = short ]
}

@test "--gpu-type a100 runs on a node with typed a100 GPUs" {
  printf 'python argv_dump.py typed\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name typed --gpus 2 --gpu-type a100 --cpus 2 --time 5 --cluster local
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local f=$SCRATCH/proj/typed/checkpoints/typed.json node
  [ "$(field "$f" 'len(d["env"]["CUDA_VISIBLE_DEVICES"].split(","))')" = 2 ]
  node=$(field "$f" 'd["node"]')
  scontrol show node "$node" | grep -q 'Gres=gpu:a100:'
}

@test "--gpu-type the cluster does not have is refused at submission with the types it has" {
  printf 'true\n' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --exp-name v100 --gpus 1 --gpu-type v100 --time 5 --cluster local
  [ "$status" -eq 2 ]
  [[ $stderr == *"--gpu-type v100: partition tmpdir has GPU types a100: use one of them"* ]]
  no_submission
}

@test "on a cluster that sets only TMPDIR, the job's TMPDIR is its SLURM_TMPDIR, on every node" {
  # shellcheck disable=SC2016 # expanded by each task's shell
  printf 'python argv_dump.py tmponly_$SLURM_NODEID\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name tmponly -p tmponly --num-nodes 2 -d script --time 5 --cluster local
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q "SLURM_TMPDIR=.*job_$JOB_ID (made by Slurm on every node, as \\\$TMPDIR)" "$(job_log "$JOB_ID" tmponly)"
  local f dir n=0
  for f in "$SCRATCH"/proj/tmponly/checkpoints/tmponly_*.json; do
    dir=$(field "$f" 'd["env"]["SLURM_TMPDIR"]')
    [ "$dir" = "$(field "$f" 'd["env"]["TMPDIR"]')" ]
    [ "$dir" = "$(node_tmpdir "$(field "$f" 'd["node"]')" "$JOB_ID")" ]
    n=$((n + 1))
  done
  [ "$n" -eq 2 ]
}

# spy_path DIR LOG: Slurm's commands in DIR, each writing its command line to LOG, then
# running the real one: what a submission asks of Slurm.
spy_path() {
  local c real
  mkdir -p "$1"
  : >"$2"
  for c in sbatch scontrol squeue sinfo sacct; do
    real=$(type -P "$c") # (not the helpers' functions of the same name)
    printf '#!/bin/sh\necho "%s $*" >>"%s"\nexec "%s" "$@"\n' "$c" "$2" "$real" >"$1/$c"
    chmod 755 "$1/$c"
  done
}

teardown() {
  [[ -z ${KEPT_PARTITION:-} ]] || as_admin scontrol delete PartitionName="$KEPT_PARTITION" || true
}

@test "kept answers, on the real cluster as a normal user: the next submission runs sbatch and nothing else of Slurm's; a MaxTime an admin raised since is honoured at once" {
  KEPT_PARTITION=kept$$
  as_admin scontrol create PartitionName="$KEPT_PARTITION" Nodes=ALL MaxTime=5 State=UP
  local spy=$BATS_TEST_TMPDIR/spy log=$BATS_TEST_TMPDIR/slurm_calls
  spy_path "$spy" "$log"
  printf 'python argv_dump.py kept\n' >"$PROJECT/experiment_configurations.txt"
  PATH=$spy:$PATH submit --exp-name k1 -p "$KEPT_PARTITION" --time 4 --sbatch-option=--hold
  grep -q '^scontrol ' "$log"
  [ "$(stat -c %U "$HOME/.cache/hpc_files")" = "$HPC_TEST_USER" ]
  : >"$log"
  PATH=$spy:$PATH submit --exp-name k2 -p "$KEPT_PARTITION" --time 4 --sbatch-option=--hold
  cat "$log"
  [ "$(grep -vc '^sbatch --parsable ' "$log")" = 0 ]
  [ "$(grep -c '^sbatch --parsable ' "$log")" = 1 ]
  scancel -n k1
  scancel -n k2
  # The admin raises the limit; the kept 5 minutes would refuse 8: Slurm is asked again.
  as_admin scontrol update PartitionName="$KEPT_PARTITION" MaxTime=10
  : >"$log"
  PATH=$spy:$PATH submit --exp-name k3 -p "$KEPT_PARTITION" --time 8
  grep -q '^scontrol ' "$log"
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(field "$SCRATCH/proj/k3/checkpoints/kept.json" 'd["env"]["SLURM_JOB_PARTITION"]')" = "$KEPT_PARTITION" ]
  # Still too long by Slurm's answer of now: refused, naming the new limit.
  run --separate-stderr submitter --exp-name k4 -p "$KEPT_PARTITION" --time 12
  [ "$status" -eq 2 ]
  [[ $stderr == *"longer than partition $KEPT_PARTITION allows (MaxTime=00:10:00)"* ]]
}
