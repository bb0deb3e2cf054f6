#!/usr/bin/env bats
# The job side of containers (singularity_hpc_files/container.sh) without Slurm: the exec
# command line each task builds, the variables handed over, the image checks, the
# node-local copy, and task_wrapper.sh running a rank inside the stand-in.
# shellcheck disable=SC2016,SC2030,SC2031 # job code in single quotes; bats runs each test in a subshell

load ../helpers/common
load ../helpers/container

setup() {
  hermetic_env
  T=$BATS_TEST_TMPDIR
  LIB=$REPO_ROOT/singularity_hpc_files/container.sh
  make_sif_image "$T/img.sif"
  mkdir -p "$T/proj" "$T/scratch/proj/exp/checkpoints" "$T/local/job_7" "$T/stubbin"
  # A recording apptainer: its arguments, then the APPTAINERENV_ variables it was given.
  cat >"$T/stubbin/apptainer" <<'EOF'
#!/bin/bash
[[ $1 == exec && $2 == --help ]] && { echo "  --no-mount strings"; exit 0; }
printf '%s\n' "$@" >"$APPTAINER_STUB_LOG"
env | grep '^APPTAINERENV_' | sort >"$APPTAINER_STUB_LOG.env"
EOF
  chmod +x "$T/stubbin/apptainer"
  export APPTAINER_STUB_LOG=$T/apptainer.log
  export source_dir=$T/proj scratch_dir=$T/scratch/proj exp_name=exp project_name=proj
  export HPC_CHECKPOINT_DIR=$T/scratch/proj/exp/checkpoints HPC_GPUS_PER_NODE=0
  export HPC_CONTAINER=$T/img.sif SLURM_TMPDIR=$T/local/job_7 HPC_PROVIDES_TMPDIR=yes
  export SLURMD_NODENAME=node9 SLURM_JOB_ID=7
}

# job BASH_CODE: run BASH_CODE with the job-side library loaded, from the project folder.
job() {
  (cd "$T/proj" && bash -c 'source "$1"; eval "$2"' _ "$LIB" "$1")
}

@test "the exec line: clean environment, the job's folders bound once each, /tmp from SLURM_TMPDIR" {
  export PATH=$T/stubbin:$PATH HPC_CONTAINER_NO_MOUNT=yes
  run job 'hpc_container_argv_to a; printf "%s\n" "${a[@]}"'
  [ "$status" -eq 0 ]
  local expected=(apptainer exec --cleanenv --no-mount tmp --bind "$T/local/job_7:/tmp"
    --bind "$T/proj" --bind "$T/scratch/proj" --bind "$T/local/job_7" --pwd "$T/proj" "$T/img.sif")
  [ "$output" = "$(printf '%s\n' "${expected[@]}")" ]
}

@test "--nv with GPUs; no /tmp mapping without --no-mount support or without SLURM_TMPDIR" {
  export PATH=$T/stubbin:$PATH HPC_GPUS_PER_NODE=2 HPC_CONTAINER_NO_MOUNT=no
  run job 'hpc_container_argv_to a; echo "${a[*]}"'
  [ "$output" = "apptainer exec --nv --cleanenv --bind $T/proj --bind $T/scratch/proj --bind $T/local/job_7 --pwd $T/proj $T/img.sif" ]
  export HPC_CONTAINER_NO_MOUNT=yes
  unset SLURM_TMPDIR
  run job 'hpc_container_argv_to a; echo "${a[*]}"'
  [ "$output" = "apptainer exec --nv --cleanenv --bind $T/proj --bind $T/scratch/proj --pwd $T/proj $T/img.sif" ]
}

@test "a checkpoint folder outside scratch is bound too; one inside the project is not bound twice" {
  export PATH=$T/stubbin:$PATH HPC_CHECKPOINT_DIR=$T/ckpt scratch_dir=$T/proj/scratch
  mkdir -p "$T/ckpt" "$T/proj/scratch"
  run job 'hpc_container_binds_to b; printf "%s\n" "${b[@]}"'
  [ "$output" = "$(printf '%s\n' "$T/proj" "$T/local/job_7" "$T/ckpt")" ]
}

@test "apptainer first when both runtimes exist; it gets APPTAINERENV_, singularity SINGULARITYENV_" {
  export PATH=$T/stubbin:$FAKE_SINGULARITY_DIR:$PATH
  run job 'hpc_container_runtime'
  [ "$output" = apptainer ]
  run job 'HPC_CONTAINER_RUNTIME=singularity hpc_container_runtime'
  [ "$output" = singularity ]
  export PATH=$FAKE_SINGULARITY_DIR:/usr/bin:/bin
  run job 'hpc_container_runtime'
  [ "$output" = singularity ]
  run job 'hpc_container_export_env; env | grep -c "^SINGULARITYENV_SLURM_JOB_ID=7$"'
  [ "$output" = 1 ]
}

@test "only the documented variables are handed over, through the environment, never the argv" {
  export PATH=$T/stubbin:$PATH WANDB_API_KEY=sekrit-key MASTER_ADDR=10.0.0.1 RANK=3 CUDA_VISIBLE_DEVICES=0,1
  export LD_LIBRARY_PATH=/host/lib PYTHONPATH=/host/py MY_OWN=x VIRTUAL_ENV=/host/venv
  run job 'hpc_container_exec python train.py'
  [ "$status" -eq 0 ]
  run ! grep -q sekrit "$APPTAINER_STUB_LOG"
  [ "$(tail -n 2 "$APPTAINER_STUB_LOG")" = "$(printf 'python\ntrain.py')" ]
  local envs
  envs=$(cat "$APPTAINER_STUB_LOG.env")
  [[ $envs == *"APPTAINERENV_WANDB_API_KEY=sekrit-key"* ]]
  [[ $envs == *"APPTAINERENV_MASTER_ADDR=10.0.0.1"* && $envs == *"APPTAINERENV_RANK=3"* ]]
  [[ $envs == *"APPTAINERENV_CUDA_VISIBLE_DEVICES=0,1"* && $envs == *"APPTAINERENV_source_dir=$T/proj"* ]]
  [[ $envs == *"APPTAINERENV_SLURM_TMPDIR=$T/local/job_7"* ]]
  [[ $envs != *LD_LIBRARY_PATH* && $envs != *PYTHONPATH* && $envs != *MY_OWN* && $envs != *VIRTUAL_ENV* ]]
  [[ $envs != *"APPTAINERENV_PATH="* && $envs != *"APPTAINERENV_HOME="* ]]
}

@test "without an image the command runs as it is, on the host" {
  unset HPC_CONTAINER
  run job '(hpc_container_exec bash -c "echo plain \$0" x); hpc_container_prefix_to p; echo "${#p[@]}"'
  [ "$output" = "$(printf 'plain x\n0')" ]
}

@test "image kinds: SIF, Singularity 2, squashfs, sandbox; anything else is not an image" {
  printf '#!/usr/bin/env run-singularity\nhsqs' >"$T/old.simg"
  printf 'hsqs' >"$T/p.sqsh"
  make_sandbox_image "$T/sb"
  mkdir -p "$T/rootfs/usr" "$T/empty"
  echo text >"$T/t.txt"
  run job "for f in '$T/img.sif' '$T/old.simg' '$T/p.sqsh' '$T/sb' '$T/rootfs' '$T/empty' '$T/t.txt' '$T/none'; do hpc_container_image_kind \"\$f\" || echo no; done"
  [ "$output" = "$(printf '%s\n' sif simg squashfs sandbox sandbox no no no)" ]
}

@test "the node-local folder: in this node's SLURM_TMPDIR, else local scratch with %n and %u" {
  run job 'hpc_container_node_dir'
  [ "$output" = "$T/local/job_7/hpc_container" ]
  # The job's own per-node folders (staging.sh): this node's, not the inherited value.
  export HPC_TMPDIR_PATTERN=$T/ls/%n/hpc_job_7
  run job 'hpc_container_node_dir'
  [ "$output" = "$T/ls/node9/hpc_job_7/hpc_container" ]
  unset SLURM_TMPDIR HPC_TMPDIR_PATTERN
  export HPC_LOCAL_SCRATCH="$T/ls/%n/%u" USER=ann
  run job 'hpc_container_node_dir; HPC_CONTAINER_TO_LOCAL=yes hpc_container_image'
  [ "${lines[0]}" = "$T/ls/node9/ann/hpc-container-7" ]
  [ "${lines[1]}" = "$T/ls/node9/ann/hpc-container-7/img.sif" ]
}

@test "--container-to-local: prepare copies the image to SLURM_TMPDIR, which goes with the job" {
  use_fake_singularity
  export HPC_CONTAINER_TO_LOCAL=yes HPC_NUM_NODES=1
  run job 'HPC_EXIT_HOOKS=(); hpc_container_prepare; echo "hooks: ${HPC_EXIT_HOOKS[*]}"; cmp "$HPC_CONTAINER" "$(hpc_container_image)" && echo same'
  [ "$status" -eq 0 ]
  [[ $output == *"image copied to $T/local/job_7/hpc_container/img.sif"* ]]
  [ "${lines[-2]}" = "hooks: " ]
  [ "${lines[-1]}" = same ]
  # A sandbox folder is copied whole, and the copy runs.
  make_sandbox_image "$T/sb"
  export HPC_CONTAINER=$T/sb
  run job 'hpc_container_prepare >/dev/null && (hpc_container_exec bash -c "echo \$SINGULARITY_CONTAINER")'
  [ "$status" -eq 0 ]
  [ "$output" = "$T/local/job_7/hpc_container/sb" ]
  diff -r "$T/sb" "$T/local/job_7/hpc_container/sb"
}

@test "--container-to-local without any SLURM_TMPDIR: local scratch, removed by an exit hook" {
  use_fake_singularity
  unset SLURM_TMPDIR
  export HPC_CONTAINER_TO_LOCAL=yes HPC_NUM_NODES=1 HPC_LOCAL_SCRATCH=$T/ls/%n
  run job 'HPC_EXIT_HOOKS=(); hpc_container_prepare; echo "hooks: ${HPC_EXIT_HOOKS[*]}"; cmp "$HPC_CONTAINER" "$(hpc_container_image)" && echo same; hpc_container_cleanup; ls "$(dirname "$(hpc_container_node_dir)")"'
  [ "$status" -eq 0 ]
  [[ $output == *"image copied to $T/ls/node9/hpc-container-7/img.sif"* ]]
  [[ $output == *"hooks: hpc_container_cleanup"* ]]
  [ "${lines[-1]}" = same ]
  [ ! -e "$T/ls/node9/hpc-container-7" ]
}

@test "prepare stops the job at once with no runtime, a missing image or a file that is not one" {
  no_sbatch_on_path
  run job 'hpc_container_prepare; echo went-on'
  [ "$status" -eq 1 ]
  [[ $output == *"ERROR: --singularity-container: neither apptainer nor singularity is on PATH on node node9"*"HPC_MODULES"* ]]
  [[ $output != *went-on* ]]
  use_fake_singularity
  rm "$T/img.sif"
  run job 'hpc_container_prepare; echo went-on'
  [ "$status" -eq 1 ]
  [[ $output == *"container image $T/img.sif not found on node node9"* ]]
  echo text >"$T/img.sif"
  run job 'hpc_container_prepare; echo went-on'
  [ "$status" -eq 1 ]
  [[ $output == *"is not a Singularity/Apptainer image"* ]]
  make_sif_image "$T/img.sif"
  run job 'HPC_CONTAINER_RUNTIME=apptainer hpc_container_prepare; echo went-on'
  [ "$status" -eq 1 ]
  [[ $output == *"HPC_CONTAINER_RUNTIME=apptainer: no such command on node node9"* ]]
}

@test "task_wrapper runs a rank inside the container, with its rank variables" {
  use_fake_singularity
  export SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_NODEID=1 HPC_TASKS_PER_NODE=1
  export HPC_RANK_STATUS_DIR=$T/scratch/proj/ranks HPC_CONTAINER_NO_MOUNT=yes
  mkdir -p "$HPC_RANK_STATUS_DIR"
  echo hidden >"$T/outside.txt"
  cd "$T/proj"
  run bash "$REPO_ROOT/virtual_env_hpc_files/task_wrapper.sh" ranks \
    "echo \"\$RANK/\$WORLD_SIZE \$SINGULARITY_CONTAINER \$(command -v python)\"; cat '$T/outside.txt' || exit 5"
  [ "$status" -eq 5 ]
  [ "${lines[0]}" = "1/2 $T/img.sif $(image_venv)/bin/python" ]
  [[ $output == *"outside.txt: No such file or directory"* ]]
  [ "$(cut -d' ' -f2- "$HPC_RANK_STATUS_DIR/rank_1")" = "node9 1 5" ]
}
