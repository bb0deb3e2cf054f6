# shellcheck shell=bash
# --singularity-container IMAGE and --container-to-local, on the login node: the image
# exists and is an image, its folders can be bound, the venv is not mixed in; settles
# J_CONTAINER and J_CONTAINER_TO_LOCAL. The job side is singularity_hpc_files/container.sh.

# _container_job_lib: the job-side file, which also knows what an image looks like.
_container_job_lib() {
  local lib=$HPC_TOOLKIT_DIR/../singularity_hpc_files/container.sh
  [[ -f $lib ]] ||
    die "singularity_hpc_files/container.sh is missing next to hpc_files/: install the whole toolkit again (bash hpc_files/install_into_project.sh PROJECT)"
  # shellcheck source=singularity_hpc_files/container.sh
  source "$lib"
}

# _container_check_image PATH: die unless PATH is an image the runtime can run.
_container_check_image() {
  local image=$1
  [[ -e $image ]] ||
    die "--singularity-container: image '$image' not found. Build it (apptainer build IMAGE.sif singularity_hpc_files/example.def) or give the path of an existing .sif file; see docs/containers.md"
  # Anything but a folder or a regular file (a FIFO, a device) would hang or mislead the
  # checks below, which read the file.
  if [[ ! -d $image && ! -f $image ]]; then
    die "--singularity-container: '$image' is neither a .sif file nor a folder (a pipe, socket or device?): give a regular .sif image file or a sandbox folder"
  fi
  if [[ -d $image ]]; then
    hpc_container_image_kind "$image" >/dev/null ||
      die "--singularity-container: '$image' is a folder but not a sandbox image (no .singularity.d or usr inside): give a .sif file or a folder made by 'apptainer build --sandbox'"
    return 0
  fi
  [[ -r $image ]] || die "--singularity-container: image '$image' is not readable"
  hpc_container_image_kind "$image" >/dev/null && return 0
  if head -n 50 -- "$image" | grep -qiE '^[[:space:]]*bootstrap:'; then
    die "--singularity-container: '$image' is a definition file, not an image: build the image first (apptainer build train.sif '$image'), then pass train.sif"
  fi
  die "--singularity-container: '$image' is not a Singularity/Apptainer image (a .sif file starts with a SIF header; a sandbox is a folder). Build one: apptainer build train.sif singularity_hpc_files/example.def (docs/containers.md)"
}

# _container_check_bindable NAME PATH: Singularity's --bind list cannot hold ',' or ':'.
_container_check_bindable() {
  [[ $2 != *[,:]* ]] ||
    die "--singularity-container: the $1 $2 holds ',' or ':', which Singularity's --bind cannot take: use a folder without them"
}

# hpc_settle_container: after hpc_settle_paths (J_SOURCE_DIR, J_SCRATCH_DIR, J_VENV).
hpc_settle_container() {
  J_CONTAINER="" J_CONTAINER_TO_LOCAL=no
  if [[ -z $OPT_CONTAINER ]]; then
    ((OPT_CONTAINER_TO_LOCAL == 0)) ||
      die "--container-to-local copies the container image to each node's local disk: it needs --singularity-container IMAGE"
    return 0
  fi
  local image=$OPT_CONTAINER
  has_newline "$image" && die "--singularity-container: the image path holds a newline"
  if [[ $image == *://* ]]; then
    die "--singularity-container takes an image file, not '$image': pull it once on the login node (apptainer pull train.sif $image) and pass train.sif"
  fi
  [[ $image == /* ]] || image=$PWD/$image
  _container_job_lib
  _container_check_image "$image"
  _container_check_bindable "project folder" "$J_SOURCE_DIR"
  _container_check_bindable "scratch folder" "$J_SCRATCH_DIR"
  [[ -z $OPT_VENV || $OPT_VENV == none ]] ||
    die "--venv and --singularity-container cannot be used together: in a container the commands run with the image's python; install your packages in the image (docs/containers.md)"
  ((OPT_SETUP_VENV == 0)) ||
    die "--setup-venv and --singularity-container cannot be used together: the image holds the Python packages; rebuild the image instead"
  if ! command -v apptainer >/dev/null && ! command -v singularity >/dev/null; then
    warn "neither apptainer nor singularity is on PATH here: the job will stop at its start if the compute nodes have none either (on many clusters it is a module: add it to HPC_MODULES in your cluster profile)"
  fi
  J_CONTAINER=$image
  ((OPT_CONTAINER_TO_LOCAL == 0)) || J_CONTAINER_TO_LOCAL=yes
  J_VENV=none
}
