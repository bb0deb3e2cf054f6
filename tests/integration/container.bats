#!/usr/bin/env bats
# --singularity-container on the real local cluster, with the bubblewrap stand-in for
# Singularity (tests/helpers/fake_singularity; no real Singularity or Apptainer can be
# installed here): the command runs in the image on every task of every launcher, sees the
# project, scratch, $SLURM_TMPDIR and its checkpoint folder at their host paths, nothing
# else of the host, and a clean environment plus the toolkit's variables.
# shellcheck disable=SC2016 # the commands in single quotes are the job's

load ../helpers/cluster
load ../helpers/container

setup() {
  integration_setup proj
  rm -rf "$PROJECT/.venv" # the image provides Python, not a venv
  use_fake_singularity
  export FAKE_SINGULARITY_LOG=$BATS_TEST_TMPDIR/singularity.log
  make_sif_image "$PROJECT/images/train.sif"
  # Beside the project, not bound: must stay invisible inside.
  echo top-secret >"$BATS_TEST_TMPDIR/secret.txt"
  # What a task sees inside, written through the checkpoint folder's bind.
  cat >"$PROJECT/inside.sh" <<'EOF'
r=${SLURM_PROCID:-0}
touch "/tmp/through_tmp_$r"
{
  echo "container=${SINGULARITY_CONTAINER:-none}"
  echo "prefix=$(python -c 'import sys; print(sys.prefix)')"
  echo "node=$SLURMD_NODENAME rank=${RANK:-none}"
  echo "pwd=$PWD"
  echo "host_only=${TEST_HOST_ONLY:-unset} wandb=${WANDB_API_KEY:-unset} my_flag=${MY_FLAG:-unset}"
  echo "secret=$(cat "$source_dir/../secret.txt" 2>/dev/null || echo unreadable)"
  echo "tmpdir=$SLURM_TMPDIR tmp_is_tmpdir=$([ -e "$SLURM_TMPDIR/through_tmp_$r" ] && echo yes || echo no)"
  echo "data=$(cat "$SLURM_TMPDIR/data/train.txt" 2>/dev/null || echo none)"
  # --container-to-local stages the image into $SLURM_TMPDIR on the host, before this runs.
  echo "staged=$(cmp -s "$SLURM_TMPDIR/hpc_container/train.sif" "$source_dir/images/train.sif" && echo same || echo none)"
} >"$HPC_CHECKPOINT_DIR/inside_$r.txt"
# $HPC_RESULTS_DIR is the first node's folder (copied back at the end).
[ "$r" != 0 ] || echo "from rank $r" >"$HPC_RESULTS_DIR/result_$r.txt"
EOF
  # Data to stage with --data: $SCRATCH/proj/data/train.txt.
  mkdir -p "$SCRATCH/proj/data"
  echo lines-of-data >"$SCRATCH/proj/data/train.txt"
}

# inside EXP RANK KEY: a value the task reported ("key=value" words of inside_RANK.txt).
inside() {
  tr ' ' '\n' <"$SCRATCH/proj/$1/checkpoints/inside_$2.txt" | sed -n "s/^$3=//p"
}

@test "none: the command runs in the image, reads its staged data, writes checkpoints and results, sees nothing else" {
  printf '%s\n' 'bash inside.sh' >"$PROJECT/experiment_configurations.txt"
  export TEST_HOST_ONLY=leaked WANDB_API_KEY=sekrit-0123 SINGULARITYENV_MY_FLAG=on
  submit --exp-name c1 --singularity-container images/train.sif --data data/train.txt --cluster local --time 5
  wait_job "$JOB_ID" 60
  cat "$(job_log "$JOB_ID" c1)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(inside c1 0 container)" = "$PROJECT/images/train.sif" ]
  [ "$(inside c1 0 prefix)" = "$(image_venv)" ]
  [ "$(inside c1 0 pwd)" = "$PROJECT" ]
  [ "$(inside c1 0 host_only)" = unset ]
  [ "$(inside c1 0 wandb)" = sekrit-0123 ]
  [ "$(inside c1 0 my_flag)" = on ]
  [ "$(inside c1 0 secret)" = unreadable ]
  [ "$(inside c1 0 tmpdir)" = "$(node_tmpdir "$(inside c1 0 node)" "$JOB_ID")" ]
  [ "$(inside c1 0 tmp_is_tmpdir)" = yes ]
  [ "$(inside c1 0 staged)" = none ]
  [ "$(inside c1 0 data)" = lines-of-data ]
  [ "$(cat "$SCRATCH/proj/c1/results/result_0.txt")" = "from rank 0" ]
  grep -q "container: $PROJECT/images/train.sif (sif) with singularity version" "$(job_log "$JOB_ID" c1)"
  # The secret never was on a command line; the host's venv was never used.
  run ! grep -q sekrit "$FAKE_SINGULARITY_LOG"
  grep -q -- "--cleanenv" "$FAKE_SINGULARITY_LOG"
  run ! grep -q "venv:" "$(job_log "$JOB_ID" c1)"
}

@test "a failing command's exit code comes through the container" {
  printf '%s\n' 'echo about to fail; exit 3' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name bad -s images/train.sif --time 5
  wait_job "$JOB_ID" 60
  [ "$(job_state "$JOB_ID")" = FAILED ]
  [ "$(job_exit "$JOB_ID")" = "3:0" ]
  grep -q "about to fail" "$(job_log "$JOB_ID" bad)"
}

@test "script on 2 nodes, image copied to each node's disk: ranks all_reduce inside the copies" {
  printf '%s\n' 'bash inside.sh && python examples/ddp_allreduce.py --tag ar' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name c2 -s images/train.sif --container-to-local --data data/train.txt \
    --which-distributed script --num-nodes 2 --cluster local --time 5
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" c2)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local r node tmpdir
  for r in 0 1; do
    node=$(inside c2 "$r" node)
    tmpdir=$(inside c2 "$r" tmpdir)
    [ "$tmpdir" = "$(node_tmpdir "$node" "$JOB_ID")" ]
    [ "$(inside c2 "$r" container)" = "$tmpdir/hpc_container/train.sif" ]
    [ "$(inside c2 "$r" rank)" = "$r" ]
    [ "$(inside c2 "$r" secret)" = unreadable ]
    [ "$(inside c2 "$r" tmp_is_tmpdir)" = yes ]
    [ "$(inside c2 "$r" staged)" = same ]
    [ "$(inside c2 "$r" data)" = lines-of-data ]
    grep -q '"sum": 3.0' "$SCRATCH/proj/c2/checkpoints/ar/rank_$r.json"
  done
  [ "$(inside c2 0 node)" != "$(inside c2 1 node)" ]
  [ "$(grep -c "container: image copied to" "$(job_log "$JOB_ID" c2)")" -eq 2 ]
}

@test "lightning on 2 nodes trains inside the container (ranks from Slurm through --cleanenv)" {
  printf 'python examples/lightning_ddp.py --max-steps 5\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name ddp -s images/train.sif --which-distributed lightning --num-nodes 2 --cpus 1 --time 10
  wait_job "$JOB_ID" 240
  cat "$(job_log "$JOB_ID" ddp)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local ck=$SCRATCH/proj/ddp/checkpoints r
  for r in 0 1; do
    grep -q '"global_step": 5' "$ck/lightning_rank_$r.json"
    grep -q '"world_size": 2' "$ck/lightning_rank_$r.json"
  done
  [ "$(grep -c "train.sif bash -o pipefail -c python\\\\ examples/lightning_ddp.py" "$FAKE_SINGULARITY_LOG")" -eq 2 ]
}

@test "torchrun on 2 nodes: torchrun itself runs inside the container on each node" {
  printf 'python examples/ddp_allreduce.py --tag tr\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name tr -s images/train.sif --which-distributed torchrun --num-nodes 2 --procs-per-node 2 --time 10
  wait_job "$JOB_ID" 240
  cat "$(job_log "$JOB_ID" tr)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local r
  for r in 0 1 2 3; do
    grep -q '"sum": 10.0' "$SCRATCH/proj/tr/checkpoints/tr/rank_$r.json"
  done
  [ "$(grep -c "train.sif bash -o pipefail -c torchrun\\\\ --nnodes=2" "$FAKE_SINGULARITY_LOG")" -eq 2 ]
}

@test "dask on 2 nodes: scheduler, workers and the command all run inside the container" {
  printf 'python examples/dask_compute.py\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name dk -s images/train.sif --which-distributed dask --num-nodes 2 --cpus 2 --time 10
  wait_job "$JOB_ID" 240
  cat "$(job_log "$JOB_ID" dk)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q '"workers": 2' "$SCRATCH/proj/dk/checkpoints/dask_result.json"
  grep -q "train.sif dask scheduler" "$FAKE_SINGULARITY_LOG"
  [ "$(grep -c "train.sif bash -c .*exec\\\\ dask\\\\ worker" "$FAKE_SINGULARITY_LOG")" -eq 2 ]
  grep -q "train.sif bash -o pipefail -c python\\\\ examples/dask_compute.py" "$FAKE_SINGULARITY_LOG"
  run ! pgrep -f "scheduler-$JOB_ID.json"
}

@test "GPUs: --nv is added and the task's CUDA_VISIBLE_DEVICES reaches the container" {
  printf '%s\n' 'echo "cvd=$CUDA_VISIBLE_DEVICES" >"$HPC_CHECKPOINT_DIR/gpu.txt"' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name g -s images/train.sif --gpus 2 --cluster local --time 5
  wait_job "$JOB_ID" 60
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q -- "exec --nv --cleanenv" "$FAKE_SINGULARITY_LOG"
  [[ $(cat "$SCRATCH/proj/g/checkpoints/gpu.txt") =~ ^cvd=[0-3],[0-3]$ ]]
}

@test "a wall-time warning (SIGUSR1 to the batch shell, as Slurm sends it) reaches the program inside the container" {
  # A Python handler here; a bash trap inside the container: requeue_programs.bats.
  cat >"$PROJECT/usr1.py" <<'EOF'
import os, pathlib, signal, time
out = pathlib.Path(os.environ["HPC_CHECKPOINT_DIR"])
got = []
signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
(out / "ready").touch()
while not got:
    time.sleep(0.1)
(out / "usr1").write_text(os.environ.get("SINGULARITY_CONTAINER", "host"))
EOF
  printf 'python usr1.py\n' >"$PROJECT/experiment_configurations.txt"
  # The batch shell passes it on: to the steps' task wrappers (distributed launchers), or
  # to the program's processes here (none). A raw SIGUSR1 to the steps (scancel without
  # --batch) is not the toolkit's path: it reaches every process of the step, and the ones
  # with the default disposition (the stand-in's bwrap) die of it, as they would in a terminal.
  submit --exp-name sig -s images/train.sif --which-distributed script --time 5 --no-requeue
  local steps=$JOB_ID
  submit --exp-name sigb -s images/train.sif --time 5 --no-requeue
  local batch=$JOB_ID i
  # Programs now start with the default disposition of SIGUSR1 (as in a terminal): one
  # signalled before it installs its handler would die of it, so wait (a loaded machine).
  for ((i = 0; i < 1800; i++)); do
    [ -e "$SCRATCH/proj/sig/checkpoints/ready" ] && [ -e "$SCRATCH/proj/sigb/checkpoints/ready" ] && break
    sleep 0.1
  done
  [ -e "$SCRATCH/proj/sig/checkpoints/ready" ]
  [ -e "$SCRATCH/proj/sigb/checkpoints/ready" ]
  scancel --batch --signal=USR1 "$steps"
  scancel --batch --signal=USR1 "$batch"
  wait_job "$steps" 60
  wait_job "$batch" 60
  [ "$(cat "$SCRATCH/proj/sig/checkpoints/usr1")" = "$PROJECT/images/train.sif" ]
  [ "$(cat "$SCRATCH/proj/sigb/checkpoints/usr1")" = "$PROJECT/images/train.sif" ]
  [ "$(job_state "$steps")" = COMPLETED ]
  [ "$(job_state "$batch")" = COMPLETED ]
}

@test "lab cluster (no SLURM_TMPDIR from Slurm), 2 nodes: image copies on each node's local scratch, removed" {
  printf '%s\n' 'echo "$SINGULARITY_CONTAINER" >"$HPC_CHECKPOINT_DIR/img_$SLURM_PROCID"' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name lab -s images/train.sif --container-to-local --cluster local-lab \
    --which-distributed script --num-nodes 2 --time 5
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" lab)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local r img imgs=()
  for r in 0 1; do
    img=$(cat "$SCRATCH/proj/lab/checkpoints/img_$r")
    [[ $img == "$HPC_LOCAL_CLUSTER_DIR"/localscratch_lab/node[1-4]/*/train.sif ]]
    [ ! -e "$img" ]
    imgs+=("$img")
  done
  [ "${imgs[0]}" != "${imgs[1]}" ]
}

@test "no runtime on the nodes: the job stops at its start, saying so; the command never runs" {
  export PATH=${PATH//$FAKE_SINGULARITY_DIR:/}
  printf '%s\n' 'touch "$HPC_CHECKPOINT_DIR/ran"' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name nort -s images/train.sif --time 5
  [[ $stderr == *"neither apptainer nor singularity is on PATH here"* ]]
  wait_job "$JOB_ID" 60
  [ "$(job_state "$JOB_ID")" = FAILED ]
  grep -q "ERROR: --singularity-container: neither apptainer nor singularity is on PATH on node" "$(job_log "$JOB_ID" nort)"
  [ ! -e "$SCRATCH/proj/nort/checkpoints/ran" ]
}

@test "an image deleted after submission: the job stops at its start, naming it" {
  printf '%s\n' 'touch "$HPC_CHECKPOINT_DIR/ran"' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name gone -s images/train.sif --time 5 --sbatch-option=--hold
  rm "$PROJECT/images/train.sif"
  scontrol release "$JOB_ID"
  wait_job "$JOB_ID" 60
  [ "$(job_state "$JOB_ID")" = FAILED ]
  grep -q "ERROR: container image $PROJECT/images/train.sif not found on node" "$(job_log "$JOB_ID" gone)"
  [ ! -e "$SCRATCH/proj/gone/checkpoints/ran" ]
}
