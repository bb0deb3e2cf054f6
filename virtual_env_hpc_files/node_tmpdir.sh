#!/bin/bash
# The per-node half of staging.sh: this node's job folder and data. Run as one srun task
# per node, or sourced by staging.sh for the same functions on the batch node:
#   node_tmpdir.sh keep BATCH_NODE BATCH_PID [STOP_FILE]
#                                              make this node's own $SLURM_TMPDIR, print
#                                              "ready NODE STEP_ID DIR", hold it until SIGTERM
#                                              (job end, scancel, time limit), SIGINT or
#                                              STOP_FILE (the batch shell is done), remove it
#   node_tmpdir.sh extract ARCHIVE BYTES       extract the --data archive into this node's
#                                              $SLURM_TMPDIR, after checking its free space
# Own folders are named <HPC_LOCAL_SCRATCH, %n and %u expanded>/hpc_job_<SLURM_JOB_ID>_<node>
# (or, when another user took that name first, the same with a random .XXXXXX after it),
# mode 700 (plai_cleanups/ relies on that name): distinct per node even where the nodes
# share the scratch path (two nodes extracting into one folder collide). Messages go to stderr (the job's log).

# The job side's library (hpc_log, hpc_error, hpc_node_tmpdir_to, is_size, human_bytes_to).
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

# hpc_node_make_tmpdir DIR: create the job's folder DIR (mode 700) in its parent, which
# must exist (the toolkit never makes the profile's HPC_LOCAL_SCRATCH) and be safe: no other
# user owns it or a folder above it, or can write there unless the folder is sticky
# (hpc_unsafe_chain_to); else nothing is made there, and the job uses a private folder
# (mktemp -d) in /tmp instead, saying what to fix. One mkdir, without -p: it
# fails when anything is there already, and never follows a link. What is there is taken
# only when it is a folder (not a link) owned by this user: the same job id on the same
# node, left by an earlier run of this job (a requeue cut short); it is emptied. Anything
# else (another user's folder made ahead of this job under its predictable name, a link)
# is left untouched, and the job makes DIR.XXXXXX instead (mktemp -d: a name nobody can
# guess, mode 700; plai_cleanups/ knows it by its hpc_job_<id>_<node> start).
# Sets HPC_NODE_TMPDIR to the folder made; returns 0 only then: only it may be removed.
hpc_node_make_tmpdir() {
  local dir=$1 parent=${1%/*} unsafe made
  HPC_NODE_TMPDIR=""
  if [[ ! -d $parent ]]; then
    hpc_error "the local scratch folder $parent does not exist (or is not a folder) on this node (HPC_LOCAL_SCRATCH='${HPC_LOCAL_SCRATCH:-}' in the cluster profile): the job makes no folders there. Create it, or set HPC_LOCAL_SCRATCH in the profile to a folder on the node's local disk that exists"
    return 1
  fi
  hpc_unsafe_chain_to unsafe "$parent"
  if [[ -n $unsafe ]]; then
    # Not a reason to stop (issue 32): nothing is made there; a private folder in /tmp
    # (root's, sticky: checked the same way) takes its place.
    local fallback=${HPC_PRIVATE_FALLBACK_BASE:-/tmp}
    hpc_unsafe_chain_to made "$fallback"
    if [[ -z $made ]] && made=$(mktemp -d -- "$fallback/${dir##*/}.XXXXXX" 2>/dev/null) && _hpc_node_took "$made"; then
      hpc_log >&2 "WARNING: the local scratch folder $parent is not safe for the job's files: $unsafe. Nothing is made there: the job uses the private folder $made instead"
      return 0
    fi
    hpc_error "the local scratch folder $parent is not safe for the job's files: $unsafe; nor could a private folder be made in $fallback instead. The job stops before making anything there"
    return 1
  fi
  if mkdir -m 700 -- "$dir" 2>/dev/null; then
    _hpc_node_took "$dir" && return 0
    hpc_error "$dir changed under the job right after it was made: the job stops"
    return 1
  fi
  if [[ -d $dir && ! -L $dir && -O $dir ]]; then
    hpc_log >&2 "$dir is left from an earlier run of this job: starting it afresh"
    if hpc_node_remove_tmpdir "$dir" && mkdir -m 700 -- "$dir" 2>/dev/null && _hpc_node_took "$dir"; then
      return 0
    fi
  fi
  local what="the disk refused it"
  if [[ -L $dir ]]; then
    what="it is a symbolic link"
  elif [[ -e $dir && ! -O $dir ]]; then
    what="it exists and belongs to $(stat -c %U -- "$dir" 2>/dev/null || echo 'another user')"
  elif [[ -e $dir ]]; then
    what="it exists and is not a folder"
  fi
  if [[ -e $dir || -L $dir ]] && made=$(mktemp -d -- "$dir.XXXXXX" 2>/dev/null) && _hpc_node_took "$made"; then
    hpc_log >&2 "local scratch: $dir is taken ($what; not this job's, left alone): the job uses $made instead"
    return 0
  fi
  hpc_error "cannot create $dir ($what; it is not this job's folder and is left alone), nor a folder beside it: the job stops. Ask the owner or the admins to remove it"
  return 1
}

# _hpc_node_took DIR: DIR, just made, is this user's folder (not a link): HPC_NODE_TMPDIR.
_hpc_node_took() {
  [[ -d $1 && ! -L $1 && -O $1 ]] || return 1
  HPC_NODE_TMPDIR=$1
}

# hpc_node_remove_tmpdir DIR: remove a job folder (only a hpc_job_<id>_<node> folder, or
# the hpc_job_<id>_<node>.XXXXXX made in its place), even when the program left read-only
# folders in it. A link is removed, never followed. Called only for a folder
# hpc_node_make_tmpdir made for this job.
hpc_node_remove_tmpdir() {
  local dir=$1
  [[ ${dir##*/} =~ ^hpc_job_[0-9]+(_[A-Za-z0-9][A-Za-z0-9._-]*)?$ ]] || {
    hpc_error "refusing to remove $dir: not a job folder (hpc_job_<id>_<node>)"
    return 1
  }
  [[ -e $dir || -L $dir ]] || return 0
  rm -rf -- "$dir" 2>/dev/null && return 0
  chmod -R u+rwx -- "$dir" 2>/dev/null
  rm -rf -- "$dir" && return 0
  hpc_error "could not remove $dir"
  return 1
}

# hpc_node_extract DIR ARCHIVE BYTES: extract ARCHIVE into DIR, keeping its relative paths,
# when the disk has BYTES free (the space the data takes once extracted).
hpc_node_extract() {
  local dir=$1 archive=$2 bytes=${3:-0} avail need have
  is_size "$bytes" || {
    hpc_error "the size of the --data ('${bytes:0:100}') is not a number (was the job script or .hpc_staging edited?): submit again"
    return 1
  }
  bytes=$((10#$bytes))
  [[ -n $dir && -d $dir ]] || {
    hpc_error "no \$SLURM_TMPDIR folder on this node (${dir:-unset}): cannot stage the data"
    return 1
  }
  avail=$(df -Pk -- "$dir" | awk 'NR == 2 { print $4 }')
  if is_size "$avail" && ((10#$avail * 1024 < bytes)); then
    human_bytes_to need "$bytes"
    human_bytes_to have "$((10#$avail * 1024))"
    hpc_error "not enough local disk for the --data: it needs $need, $dir has $have free. Stage less data, or ask for nodes with a larger local disk"
    return 1
  fi
  local opts=()
  case $archive in
    *.tar.zst)
      command -v zstd >/dev/null || {
        hpc_error "zstd is not installed on this node, and $archive needs it: submit with HPC_DATA_COMPRESS=pigz (or none) in the environment"
        return 1
      }
      opts=(--use-compress-program=zstd)
      ;;
    *.tar.gz)
      if command -v pigz >/dev/null; then opts=(--use-compress-program=pigz); else opts=(-z); fi
      ;;
  esac
  tar -x -f "$archive" "${opts[@]}" -C "$dir" || {
    hpc_error "extracting $archive into $dir failed (tar's message is above)"
    return 1
  }
}

# hpc_node_keep BATCH_NODE BATCH_PID [STOP_FILE]: the per-node keeper task (see the
# header). The batch shell tells it to end in two ways: SIGINT through Slurm (at once), and
# STOP_FILE in the job's home on the shared filesystem (owned by the job's user), looked
# at every 2 s: CI on 26.05 under load saw a keeper that no SIGINT or SIGTERM reached,
# killed by srun before it removed its folder.
hpc_node_keep() {
  local batch_node=$1 batch_pid=$2 stop_file=${3:-} dir node stop=0 nap=""
  hpc_node_name_to node
  hpc_node_tmpdir_to dir || {
    printf 'error %s\n' "$node"
    exit 1
  }
  # Slurm sends the wall-time warning (SIGUSR1) to every step: it is not for the keeper.
  trap '' USR1 USR2 HUP PIPE ALRM
  if ! hpc_node_make_tmpdir "$dir"; then
    printf 'error %s\n' "$node" # the batch shell stops at once instead of waiting
    exit 1
  fi
  dir=$HPC_NODE_TMPDIR # (another name when the usual one was taken)
  trap 'stop=1; [[ -z $nap ]] || kill "$nap" 2>/dev/null' TERM INT
  printf 'ready %s %s %s\n' "$node" "${SLURM_STEP_ID:-?}" "$dir"
  while ((stop == 0)); do
    sleep 2 &
    nap=$!
    wait "$nap" 2>/dev/null
    # Only the job's own: in a group-writable project another user could make it.
    [[ -z $stop_file || ! -O $stop_file ]] || stop=1
  done
  if [[ $node == "$batch_node" ]]; then
    # The batch shell copies the results out of this folder first, then removes it.
    while [[ -e $dir ]] && kill -0 "$batch_pid" 2>/dev/null; do
      sleep 0.1
    done
  fi
  hpc_node_remove_tmpdir "$dir" || exit 1
}

_hpc_node_main() {
  local dir
  case ${1:-} in
    keep) hpc_node_keep "${2:?batch node}" "${3:?batch pid}" "${4:-}" ;;
    extract)
      hpc_node_tmpdir_to dir || return 1
      hpc_node_extract "$dir" "${2:?archive}" "${3:-0}"
      ;;
    *)
      echo "usage: node_tmpdir.sh keep BATCH_NODE BATCH_PID [STOP_FILE] | extract ARCHIVE BYTES" >&2
      return 2
      ;;
  esac
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || _hpc_node_main "$@"
