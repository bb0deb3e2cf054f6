#!/usr/bin/env bats
# --singularity-container and --container-to-local at submission (recording sbatch): what
# reaches the batch script, and the clear refusals that submit nothing.
# shellcheck disable=SC2016 # single-quoted $ are the job's and the test's text

load ../helpers/common
load ../helpers/container

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python train.py --lr 0.1'
  : >"$PROJECT/train.py" # a script that exists: no warning about it
  make_sif_image "$PROJECT/images/train.sif"
}

# script_var NAME: the value the batch script exports for NAME.
script_var() {
  bash -c 'eval "$(grep "^export $1=" "$2")"; printf "%s" "${!1}"' _ "$1" "$SBATCH_STUB_LOG.script.1"
}

# refused ARGS...: submission fails with a message on stderr and leaves nothing behind.
refused() {
  run --separate-stderr submitter "$@"
  [ "$status" -ne 0 ]
  [ -z "$output" ]
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
}

@test "a relative image path reaches the job as an absolute HPC_CONTAINER; no venv" {
  run --separate-stderr submitter -e c --singularity-container images/train.sif
  [ "$status" -eq 0 ]
  [ "$(script_var HPC_CONTAINER)" = "$PROJECT/images/train.sif" ]
  [ "$(script_var HPC_CONTAINER_TO_LOCAL)" = no ]
  [ "$(script_var HPC_VENV)" = none ]
  grep -qx 'hpc_container_prepare  # the runtime and $HPC_CONTAINER; the commands run inside it' "$SBATCH_STUB_LOG.script.1"
  run ! grep -q hpc_activate_venv "$SBATCH_STUB_LOG.script.1"
}

@test "--container-to-local and the short option -s; the script is valid bash" {
  run --separate-stderr submitter -e c -s "$PROJECT/images/train.sif" --container-to-local --gpus 1
  [ "$status" -eq 0 ]
  [ "$(script_var HPC_CONTAINER_TO_LOCAL)" = yes ]
  bash -n "$SBATCH_STUB_LOG.script.1"
  shellcheck -s bash "$SBATCH_STUB_LOG.script.1"
}

@test "without a container the script is unchanged: the venv step, no HPC_CONTAINER" {
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  run --separate-stderr submitter -e c
  [ "$status" -eq 0 ]
  grep -q '^hpc_activate_venv' "$SBATCH_STUB_LOG.script.1"
  run ! grep -q 'HPC_CONTAINER' "$SBATCH_STUB_LOG.script.1"
}

@test "a sandbox folder is an image; a plain folder is not" {
  make_sandbox_image "$PROJECT/images/sandbox"
  run --separate-stderr submitter -e c -s images/sandbox
  [ "$status" -eq 0 ]
  [ "$(script_var HPC_CONTAINER)" = "$PROJECT/images/sandbox" ]
  mkdir -p "$PROJECT/notimage"
  : >"$SBATCH_STUB_LOG"
  rm -rf "${SCRATCH:?}"/*
  refused -e c -s notimage
  [[ $stderr == *"is a folder but not a sandbox image"* ]]
}

@test "Singularity 2 images and plain squashfs images are accepted by their first bytes" {
  printf '#!/usr/bin/env run-singularity\nhsqs' >"$PROJECT/old.simg"
  printf 'hsqs\0\0\0' >"$PROJECT/plain.sqsh"
  run --separate-stderr submitter -e c -s old.simg
  [ "$status" -eq 0 ]
  run --separate-stderr submitter -e d -s plain.sqsh
  [ "$status" -eq 0 ]
}

@test "a missing image is refused before submission, saying how to build one" {
  refused -e c -s images/missing.sif
  [[ $stderr == *"image '$PROJECT/images/missing.sif' not found"*"apptainer build"* ]]
}

@test "a file that is not an image is refused; a definition file gets the build command" {
  printf 'not an image\n' >"$PROJECT/fake.sif"
  refused -e c -s fake.sif
  [[ $stderr == *"is not a Singularity/Apptainer image"* ]]
  # The SIF magic must sit at byte 32, not anywhere.
  printf 'SIF_MAGIC and more bytes to pass 42 of them........\n' >"$PROJECT/early.sif"
  refused -e c -s early.sif
  [[ $stderr == *"is not a Singularity/Apptainer image"* ]]
  cp "$REPO_ROOT/singularity_hpc_files/example.def" "$PROJECT/train.def"
  refused -e c -s train.def
  [[ $stderr == *"is a definition file"*"apptainer build train.sif"* ]]
}

@test "a registry address is refused with the pull command to run first" {
  refused -e c -s docker://pytorch/pytorch:latest
  [[ $stderr == *"apptainer pull train.sif docker://pytorch/pytorch:latest"* ]]
}

@test "--container-to-local without an image, --venv or --setup-venv with one are refused" {
  refused -e c --container-to-local
  [[ $stderr == *"needs --singularity-container"* ]]
  refused -e c -s images/train.sif --venv "$PROJECT/.venv"
  [[ $stderr == *"--venv and --singularity-container cannot be used together"* ]]
  refused -e c -s images/train.sif --setup-venv
  [[ $stderr == *"--setup-venv and --singularity-container"* ]]
  refused -e c --container-to-local=yes -s images/train.sif
  [[ $stderr == *"takes no value"* ]]
}

@test "a project or scratch path with ',' or ':' cannot be bound: refused" {
  make_project 'a,b' 'python train.py'
  make_sif_image "$PROJECT/img.sif"
  refused -e c -s img.sif
  [[ $stderr == *"project folder"*"holds ',' or ':'"* ]]
  make_project proj2 'python train.py'
  make_sif_image "$PROJECT/img.sif"
  export SCRATCH=$BATS_TEST_TMPDIR/scr:atch
  mkdir -p "$SCRATCH"
  refused -e c -s img.sif
  [[ $stderr == *"scratch folder"*"holds ',' or ':'"* ]]
}

@test "no runtime on the login node: a warning, and the job is submitted all the same" {
  run --separate-stderr submitter -e c -s images/train.sif
  [ "$status" -eq 0 ]
  [[ $stderr == *"neither apptainer nor singularity is on PATH here"* ]]
  [ "$(sbatch_calls)" -eq 1 ]
  use_fake_singularity
  run --separate-stderr submitter -e d -s images/train.sif
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
}

@test "a hostile image path reaches the job intact" {
  local dir=$PROJECT/"it's \"a\" \$(dir) x"
  make_sif_image "$dir/t.sif"
  run --separate-stderr submitter -e c -s "$dir/t.sif"
  [ "$status" -eq 0 ]
  [ "$(script_var HPC_CONTAINER)" = "$dir/t.sif" ]
}

@test "--dry-run shows the container step and writes nothing" {
  run --separate-stderr submitter -e c -s images/train.sif --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"export HPC_CONTAINER='$PROJECT/images/train.sif'"* ]]
  [[ $output == *"hpc_container_prepare"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
}

@test "--help lists both options" {
  run submitter --help
  [[ $output == *"--singularity-container IMAGE"* && $output == *"--container-to-local"* ]]
}
