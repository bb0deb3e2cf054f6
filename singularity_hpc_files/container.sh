# shellcheck shell=bash
# Job side of --singularity-container: runs a task's command inside the Singularity or
# Apptainer image $HPC_CONTAINER (exported by the batch script). Sourced by job_runtime.sh
# and task_wrapper.sh; also run as a command in srun steps:
#   bash container.sh COMMAND [ARGS...]   COMMAND in the container (as is when no image)
#   bash container.sh --stage | --cleanup  copy the image to / remove it from this node's disk
# The command sees the project, $scratch_dir (checkpoints, logs), $SLURM_TMPDIR (staged
# data, also mounted at /tmp) at their host paths, a clean environment plus the variables
# below, and the image's own programs (its python, not the host venv). docs/containers.md.

HPC_CONTAINER_SH=${BASH_SOURCE[0]}

# The job side's library (hpc_log, hpc_fail, this node's folders).
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/../virtual_env_hpc_files/job_lib.sh"

# Variables handed to the command inside (--cleanenv drops the rest): every variable
# with one of these prefixes, and these names.
HPC_CONTAINER_ENV_PREFIXES=(SLURM_ SLURMD_ HPC_ WANDB_ NCCL_ TORCH_ DASK_ OMP_ MKL_)
HPC_CONTAINER_ENV_NAMES=(source_dir project_name scratch_dir exp_name MASTER_ADDR MASTER_PORT
  RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK CUDA_VISIBLE_DEVICES
  ROCR_VISIBLE_DEVICES GPU_DEVICE_ORDINAL PYTHONUNBUFFERED PYTHONHASHSEED TZ)

# hpc_container_image_kind PATH: prints sif, simg, squashfs or sandbox; 1 when PATH is not
# an image. SIF files carry "SIF_MAGIC" at byte 32, after the launch line
# "#!/usr/bin/env run-singularity"; Singularity 2 images start with that line; plain
# squashfs images with "hsqs"; a sandbox is a folder holding .singularity.d (or a root
# file system: usr/). Also used by the submitter (hpc_files/lib/container.sh).
hpc_container_image_kind() {
  local path=$1 head
  if [[ -d $path ]]; then
    [[ -d $path/.singularity.d || -d $path/usr ]] || return 1
    printf 'sandbox\n'
    return 0
  fi
  [[ -f $path && -r $path ]] || return 1
  if [[ $(head -c 41 -- "$path" | tail -c 9) == SIF_MAGIC ]]; then
    printf 'sif\n'
    return 0
  fi
  head=$(head -c 30 -- "$path" | tr -d '\0')
  case $head in
    '#!/usr/bin/env run-singularity') printf 'simg\n' ;;
    hsqs*) printf 'squashfs\n' ;;
    *) return 1 ;;
  esac
}

# hpc_container_runtime: apptainer or singularity, whichever this node has (apptainer
# first: where both exist, singularity is apptainer's compatibility name).
hpc_container_runtime() {
  if [[ -n ${HPC_CONTAINER_RUNTIME:-} ]]; then
    printf '%s\n' "$HPC_CONTAINER_RUNTIME"
    return 0
  fi
  local name
  for name in apptainer singularity; do
    if command -v "$name" >/dev/null; then
      printf '%s\n' "$name"
      return 0
    fi
  done
  return 1
}

# hpc_container_node_tmpdir: this node's $SLURM_TMPDIR: Slurm's, or the job's own folder on
# clusters without one (staging.sh; HPC_TMPDIR_PATTERN, %n = this node). "" when none.
hpc_container_node_tmpdir() {
  local dir
  hpc_node_tmpdir_to dir || true
  printf '%s\n' "$dir"
}

# hpc_container_node_dir: this node's folder for the image copy (--container-to-local):
# in $SLURM_TMPDIR, removed with it at the end of the job; without one, under the
# profile's local scratch (HPC_LOCAL_SCRATCH, %n = node, %u = user), named after the job.
hpc_container_node_dir() {
  local tmpdir
  tmpdir=$(hpc_container_node_tmpdir)
  if [[ -n $tmpdir ]]; then
    printf '%s/hpc_container\n' "$tmpdir"
    return 0
  fi
  local base
  hpc_node_path_to base "${HPC_LOCAL_SCRATCH:-/tmp}" || true
  printf '%s/hpc-container-%s\n' "$base" "${SLURM_JOB_ID:-0}"
}

# hpc_container_image: the image this task runs (its node-local copy with --container-to-local).
hpc_container_image() {
  if [[ ${HPC_CONTAINER_TO_LOCAL:-no} == yes ]]; then
    printf '%s/%s\n' "$(hpc_container_node_dir)" "${HPC_CONTAINER##*/}"
  else
    printf '%s\n' "$HPC_CONTAINER"
  fi
}

# hpc_container_binds_to ARRAY: the host folders the command needs, at the same paths:
# the project, the scratch folder (checkpoints, logs, data), SLURM_TMPDIR and the
# checkpoint folder; one inside another is bound once.
hpc_container_binds_to() {
  local -n _binds=$1
  local path kept covered
  _binds=()
  for path in "${source_dir:-}" "${scratch_dir:-}" "${SLURM_TMPDIR:-}" "${HPC_CHECKPOINT_DIR:-}"; do
    path=${path%/}
    [[ -n $path && -d $path ]] || continue
    [[ $path != *[,:]* ]] ||
      hpc_fail "cannot bind $path into the container: Singularity's --bind cannot take a path with ',' or ':'; rename the folder"
    covered=0
    for kept in "${_binds[@]}"; do
      [[ $path == "$kept" || $path == "$kept"/* ]] && covered=1
    done
    ((covered)) || _binds+=("$path")
  done
}

# hpc_container_argv_to ARRAY: "RUNTIME exec [--nv] --cleanenv ... IMAGE" for this task.
hpc_container_argv_to() {
  local -n _argv=$1
  local runtime bind
  local -a binds
  runtime=$(hpc_container_runtime) ||
    hpc_fail "no container runtime on node ${SLURMD_NODENAME:-?}: neither apptainer nor singularity is on PATH (on many clusters: module load apptainer; add it to HPC_MODULES in your cluster profile)"
  _argv=("$runtime" exec)
  ((${HPC_GPUS_PER_NODE:-0} == 0)) || _argv+=(--nv)
  _argv+=(--cleanenv)
  # The job's local folder as /tmp (bound first: later binds may lie below /tmp).
  if [[ ${HPC_CONTAINER_NO_MOUNT:-no} == yes && -n ${SLURM_TMPDIR:-} && -d ${SLURM_TMPDIR:-} &&
    $SLURM_TMPDIR != *[,:]* ]]; then
    _argv+=(--no-mount tmp --bind "$SLURM_TMPDIR:/tmp")
  fi
  hpc_container_binds_to binds
  for bind in "${binds[@]}"; do
    _argv+=(--bind "$bind")
  done
  _argv+=(--pwd "$PWD" "$(hpc_container_image)")
}

# hpc_container_export_env: APPTAINERENV_X (or SINGULARITYENV_X) for every variable to hand
# over: the runtime sets X inside. Values stay in the environment, never on a command line.
hpc_container_export_env() {
  local runtime prefix name want p
  runtime=$(hpc_container_runtime) || return 0
  prefix=SINGULARITYENV_
  [[ ${runtime##*/} != apptainer* ]] || prefix=APPTAINERENV_
  for name in $(compgen -e); do
    want=0
    for p in "${HPC_CONTAINER_ENV_PREFIXES[@]}"; do
      [[ $name == "$p"* ]] && want=1 && break
    done
    if ((want == 0)); then
      for p in "${HPC_CONTAINER_ENV_NAMES[@]}"; do
        [[ $name == "$p" ]] && want=1 && break
      done
    fi
    ((want)) && export "$prefix$name=${!name}"
  done
  return 0
}

# hpc_container_exec COMMAND [ARGS...]: replace this process with COMMAND run inside the
# container, or with COMMAND itself when there is no image. It execs: call it in a
# subshell or in the background.
hpc_container_exec() {
  local -a argv
  local dir
  # srun steps inherit the first node's value; the binds (and a dask worker, launchers.sh)
  # need this node's folder.
  if [[ -n ${HPC_TMPDIR_PATTERN:-} ]] && hpc_node_tmpdir_to dir && [[ -n $dir ]]; then
    export SLURM_TMPDIR=$dir
  fi
  [[ -n ${HPC_CONTAINER:-} ]] || exec "$@"
  hpc_container_argv_to argv
  command -v "${argv[0]}" >/dev/null ||
    hpc_fail "container runtime ${argv[0]} not found on node ${SLURMD_NODENAME:-?} (every node needs it: add its module to HPC_MODULES in your cluster profile)"
  [[ -e ${argv[-1]} ]] ||
    hpc_fail "container image ${argv[-1]} is missing on node ${SLURMD_NODENAME:-?}"
  hpc_container_export_env
  exec "${argv[@]}" "$@"
}

# hpc_container_prefix_to ARRAY: what to put before a command in an srun step so that it
# runs in the container ("bash container.sh"), or nothing when there is no image.
hpc_container_prefix_to() {
  local -n _prefix=$1
  _prefix=()
  [[ -z ${HPC_CONTAINER:-} ]] || _prefix=(bash "$HPC_CONTAINER_SH")
}

# hpc_container_stage_here: copy the image to this node's folder (a new file appears whole).
hpc_container_stage_here() {
  local dir dest started=$SECONDS
  dir=$(hpc_container_node_dir)
  dest=$dir/${HPC_CONTAINER##*/}
  mkdir -p -- "$dir" || hpc_fail "cannot create $dir for the image copy on ${SLURMD_NODENAME:-?}"
  rm -rf -- "$dest.part.$$"
  if ! cp -a -- "$HPC_CONTAINER" "$dest.part.$$"; then
    rm -rf -- "$dest.part.$$"
    hpc_fail "copying $HPC_CONTAINER to $dir on ${SLURMD_NODENAME:-?} failed (is the local disk full?)"
  fi
  rm -rf -- "$dest"
  mv -T -- "$dest.part.$$" "$dest" || hpc_fail "cannot move the image copy into $dest"
  hpc_log "container: image copied to $dest ($(du -sh -- "$dest" | cut -f1), $((SECONDS - started)) s)"
}

hpc_container_cleanup_here() {
  rm -rf -- "$(hpc_container_node_dir)"
}

# hpc_container_on_nodes --stage|--cleanup: once on every node of the job (no
# --kill-on-bad-exit: each node ends on its own, so every node's message reaches the log).
hpc_container_on_nodes() {
  if ((${HPC_NUM_NODES:-1} > 1)); then
    srun --nodes="$HPC_NUM_NODES" --ntasks-per-node=1 \
      bash "$HPC_CONTAINER_SH" "$1" </dev/null
  elif [[ $1 == --stage ]]; then
    hpc_container_stage_here
  else
    hpc_container_cleanup_here
  fi
}

# Exit hook: remove the copies when they are not in $SLURM_TMPDIR (which goes anyway).
hpc_container_cleanup() {
  hpc_container_on_nodes --cleanup || hpc_log "container: could not remove the image copies in $(hpc_container_node_dir)"
}

# hpc_container_prepare: the batch script's step before the command (instead of the venv):
# find the runtime and the image on this node, copy the image to every node's local disk
# when asked (--container-to-local). Failures end the job here, before anything runs.
hpc_container_prepare() {
  local runtime kind version
  [[ -n ${HPC_CONTAINER:-} ]] || return 0
  runtime=$(hpc_container_runtime) ||
    hpc_fail "--singularity-container: neither apptainer nor singularity is on PATH on node ${SLURMD_NODENAME:-?}. On many clusters it is a module: add it to HPC_MODULES in your cluster profile (e.g. HPC_MODULES=\"apptainer\"), or ask your admins"
  command -v "$runtime" >/dev/null ||
    hpc_fail "HPC_CONTAINER_RUNTIME=$runtime: no such command on node ${SLURMD_NODENAME:-?} (use apptainer or singularity, or unset it)"
  export HPC_CONTAINER_RUNTIME=$runtime
  [[ -e $HPC_CONTAINER ]] ||
    hpc_fail "container image $HPC_CONTAINER not found on node ${SLURMD_NODENAME:-?} (moved or deleted since submission? is it on a filesystem the nodes see?)"
  kind=$(hpc_container_image_kind "$HPC_CONTAINER") ||
    hpc_fail "$HPC_CONTAINER is not a Singularity/Apptainer image (no SIF header, not a sandbox folder): build one with '$runtime build', see docs/containers.md"
  # --no-mount (Singularity 3.7+, Apptainer) lets the job's local folder be /tmp inside.
  if "$runtime" exec --help 2>/dev/null | grep -q -- '--no-mount'; then
    export HPC_CONTAINER_NO_MOUNT=yes
  else
    export HPC_CONTAINER_NO_MOUNT=no
  fi
  version=$("$runtime" --version 2>/dev/null | head -n 1) || version=$runtime
  hpc_log "container: $HPC_CONTAINER ($kind) with ${version:-$runtime}; commands run inside it, with the image's python"
  if [[ ${HPC_CONTAINER_TO_LOCAL:-no} == yes ]]; then
    [[ -n $(hpc_container_node_tmpdir) ]] || HPC_EXIT_HOOKS+=(hpc_container_cleanup)
    hpc_container_on_nodes --stage ||
      hpc_fail "the image could not be copied to the local disk of every node (see the lines above)"
  fi
  return 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  case ${1:-} in
    --stage) hpc_container_stage_here ;;
    --cleanup) hpc_container_cleanup_here ;;
    '') hpc_fail "usage: container.sh COMMAND [ARGS...] | --stage | --cleanup" ;;
    *) hpc_container_exec "$@" ;;
  esac
fi
