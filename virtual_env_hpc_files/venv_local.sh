#!/bin/bash
# --venv-to-local, job side: the venv archive packed at submission (hpc_files/lib/venv_local.sh)
# unpacked onto each node's local disk, once per node and venv version, and reused by every
# later job and task on that node while it is there. Sourced by job_runtime.sh (the batch
# shell: hpc_venv_to_local_to), and run as one srun task per node:
#   venv_local.sh setup ARCHIVE    make this node's copy ready (or find it ready)
# The copy: <HPC_VENV_LOCAL_DIR, %u expanded>/<archive name less .tar*>/, the same path on
# every node. Beside it: NAME.lock (flock: one unpacker per node; the cleanup job takes it
# too) and NAME.jobs/JOB_ID, one empty file per job that used the copy on this node (the
# cleanup job keeps a copy while one of them is queued or running). The folder is this
# user's, mode 700, and no other user can swap it: hpc_unsafe_chain_to (job_lib.sh) for the
# folders above it, and it is no link, this user's, writable by no one else. Anything else
# (another user's folder made ahead under this user's name, a link, a parent others can
# write) is left alone, and the job's copy goes to a private folder of its own instead
# (HPC_VENV_LOCAL_ROOT: the same new, unguessable name on every node), removed at its end.
# Unpacking writes NAME.tmp.PID, rewrites the old venv path in bin/ and pyvenv.cfg to the
# copy's, then renames it to NAME: a copy is whole or absent.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"
HPC_VENV_LOCAL_SCRIPT=${BASH_SOURCE[0]}

# hpc_venv_local_path_to VAR: this job's node-local copy (the same on every node).
hpc_venv_local_path_to() {
  local -n _vlp=$1
  local root name=${HPC_VENV_LOCAL_ARCHIVE##*/}
  if [[ -n ${HPC_VENV_LOCAL_ROOT:-} ]]; then
    root=$HPC_VENV_LOCAL_ROOT # (the job's private fallback: hpc_venv_to_local_to)
  else
    hpc_node_path_to root "${HPC_VENV_LOCAL_DIR:?}" || return 1
  fi
  name=${name%.tar*}
  [[ $name =~ ^venv-[0-9a-f]{16}-[0-9a-f]{16}$ ]] || {
    hpc_error "the venv archive's name '${HPC_VENV_LOCAL_ARCHIVE##*/}' is not the toolkit's (was the job script edited?): submit again"
    return 1
  }
  _vlp=${root%/}/$name
}

# HPC_EXIT_VENV_UNTRUSTED: what the per-node setup exits with when the folder for the copies
# is not safe (the batch shell then uses a private folder instead).
HPC_EXIT_VENV_UNTRUSTED=3

# hpc_venv_local_unsafe_to VAR ROOT: "" when ROOT can hold the node-local venv copies (see
# the header): every folder above it is safe (hpc_unsafe_chain_to), and ROOT, when it is
# there, is this user's folder, no link, that no other user can write. Else why not.
hpc_venv_local_unsafe_to() {
  local -n _vu=$1
  local root=${2%/} parent mode
  parent=${root%/*}
  _vu=""
  hpc_unsafe_chain_to _vu "${parent:-/}"
  [[ -z $_vu ]] || return 0
  if [[ -L $root ]]; then
    _vu="$root is a symbolic link"
  elif [[ -e $root && ! -d $root ]]; then
    _vu="$root is not a folder"
  elif [[ -e $root && ! -O $root ]]; then
    _vu="$root belongs to $(stat -c %U -- "$root" 2>/dev/null || echo 'another user'), not to you"
  elif [[ -d $root ]]; then
    mode=$(stat -c %a -- "$root" 2>/dev/null) || mode=777
    ((8#$mode & 8#022)) && _vu="$root can be written by other users (mode $mode)"
  fi
  return 0
}

# _hpc_venv_local_root ROOT: ROOT exists as this user's own folder, safe (made here, mode
# 700, when it is missing; its parent must exist). Returns HPC_EXIT_VENV_UNTRUSTED, with a
# warning, when ROOT or a folder above it is not safe: nothing is made or used there.
_hpc_venv_local_root() {
  local root=$1 unsafe
  [[ -d ${root%/*} || ${root%/*} == "" ]] || {
    hpc_error "the folder for node-local venvs ${root%/*} does not exist on this node (HPC_VENV_LOCAL_DIR='${HPC_VENV_LOCAL_DIR:-}' in the cluster profile): create it, or set HPC_VENV_LOCAL_DIR to a folder on the node's local disk"
    return 1
  }
  hpc_venv_local_unsafe_to unsafe "$root"
  if [[ -z $unsafe ]]; then
    [[ -e $root || -L $root ]] || mkdir -m 700 -- "$root" 2>/dev/null || true
    hpc_venv_local_unsafe_to unsafe "$root" # (again: made by someone else meanwhile?)
    [[ -n $unsafe || ! -d $root ]] || return 0
  fi
  if [[ -n $unsafe ]]; then
    hpc_log >&2 "WARNING: venv: $root is not safe for the node-local venv: $unsafe (another user could swap the copy the job runs). It is left alone; the job uses a private folder of its own instead. Ask the admins, or set HPC_VENV_LOCAL_DIR in the cluster profile to a folder only you can write"
    return "$HPC_EXIT_VENV_UNTRUSTED"
  fi
  hpc_error "cannot create $root for the node-local venv (the disk refused it): the job stops. Set HPC_VENV_LOCAL_DIR in the cluster profile to a folder of yours on the node's local disk"
  return 1
}

# _hpc_venv_local_rewrite DIR NEW OLD...: every OLD path in DIR's bin/ scripts and
# pyvenv.cfg becomes NEW (shebangs, activate scripts). Text files only; links stay links.
_hpc_venv_local_rewrite() {
  local dir=$1 new=$2 old f text files=()
  shift 2
  mapfile -t files < <(grep -lIF "${@/#/-e}" -- "$dir"/bin/* "$dir/pyvenv.cfg" 2>/dev/null)
  for f in "${files[@]}"; do
    [[ -f $f && ! -L $f ]] || continue
    IFS= read -r -d '' text <"$f" || true
    for old in "$@"; do
      text=${text//"$old"/"$new"}
    done
    printf '%s' "$text" >"$f.hpc_tmp" && chmod --reference="$f" -- "$f.hpc_tmp" &&
      mv -f -- "$f.hpc_tmp" "$f" || return 1
  done
}

# hpc_venv_local_setup ARCHIVE: this node's copy of the venv, unpacked unless it is ready.
# Logs what it cost. Returns non-zero (with a message) when the copy cannot be made.
hpc_venv_local_setup() {
  local archive=$1 dest root name fd t0=$EPOCHREALTIME job=${SLURM_JOB_ID:-local$$}
  hpc_venv_local_path_to dest || return 1
  root=${dest%/*} name=${dest##*/}
  if [[ -n ${HPC_VENV_LOCAL_ROOT:-} ]]; then
    # The job's private fallback, named by the batch shell: made here, or by it (this node).
    mkdir -m 700 -- "$root" 2>/dev/null || [[ -d $root && ! -L $root && -O $root ]] || {
      hpc_error "cannot make the private folder $root for the node-local venv: the job stops"
      return 1
    }
  else
    _hpc_venv_local_root "$root" || return
  fi
  exec {fd}>>"$root/$name.lock" || { hpc_error "cannot open $root/$name.lock"; return 1; }
  flock "$fd" || { hpc_error "cannot lock $root/$name.lock"; return 1; }
  # This job uses the copy (before it is looked at: the cleanup job reads these under the lock).
  if ! { mkdir -p -- "$root/$name.jobs" && : >"$root/$name.jobs/$job"; }; then
    exec {fd}>&-
    hpc_error "cannot write $root/$name.jobs/$job"
    return 1
  fi
  if [[ -f $dest/.hpc_venv_ready ]]; then
    exec {fd}>&-
    hpc_log "venv: node-local copy $dest is ready (found in $(_hpc_venv_local_ms "$t0") ms)"
    return 0
  fi
  [[ -f $archive && -r $archive ]] || {
    exec {fd}>&-
    hpc_error "the venv archive $archive is missing (was \$SCRATCH/<project>/.hpc_staging cleaned up while the job waited?): submit again"
    return 1
  }
  local bytes=${HPC_VENV_LOCAL_BYTES:-0} avail need have state
  is_size "$bytes" || bytes=0
  # Packed by this very submission: the plan could not know the size; its state file says.
  if ((10#$bytes == 0)) && [[ -f ${archive%.tar*}.state ]]; then
    read -r _ _ state <"${archive%.tar*}.state" || true
    ! is_size "${state:-x}" || bytes=$state
  fi
  avail=$(df -Pk -- "$root" | awk 'NR == 2 { print $4 }')
  if is_size "$avail" && ((10#$avail * 1024 < 10#$bytes)); then
    exec {fd}>&-
    human_bytes_to need "$((10#$bytes))"
    human_bytes_to have "$((10#$avail * 1024))"
    hpc_error "not enough local disk for the venv: it needs $need, $root has $have free. Submit with --no-venv-to-local, or set HPC_VENV_LOCAL_DIR to a larger local disk"
    return 1
  fi
  local tmp=$root/$name.tmp.$$ opts=() olds=("${HPC_VENV:?}")
  [[ -z ${HPC_VENV_LOCAL_REAL:-} || $HPC_VENV_LOCAL_REAL == "$HPC_VENV" ]] || olds+=("$HPC_VENV_LOCAL_REAL")
  case $archive in
    *.tar.zst) opts=(--use-compress-program=zstd) ;;
    *.tar.gz) if command -v pigz >/dev/null; then opts=(--use-compress-program=pigz); else opts=(-z); fi ;;
  esac
  rm -rf -- "$tmp" "$dest"
  if ! { mkdir -m 700 -- "$tmp" && tar -x -f "$archive" "${opts[@]}" -C "$tmp" &&
    _hpc_venv_local_rewrite "$tmp" "$dest" "${olds[@]}" && : >"$tmp/.hpc_venv_ready" &&
    { mv -T -- "$tmp" "$dest" || [[ -f $dest/.hpc_venv_ready ]]; }; }; then
    rm -rf -- "$tmp"
    exec {fd}>&-
    hpc_error "unpacking the venv $archive into $dest failed (the message above says why)"
    return 1
  fi
  rm -rf -- "$tmp" # (left only when another job's copy won the rename)
  exec {fd}>&-
  local size
  human_bytes_to size "$((10#$bytes))"
  hpc_log "venv: unpacked ${archive##*/} ($size) into $dest in $(_hpc_venv_local_ms "$t0") ms"
}

_hpc_venv_local_ms() {
  printf '%d' $(((${EPOCHREALTIME/[.,]/} - ${1/[.,]/}) / 1000))
}

# hpc_venv_to_local_to VAR: the copy ready on every node of the job (one srun task per node
# for several nodes, like --data, and like it without --kill-on-bad-exit, so that every
# node's message reaches the log); VAR is its path. Ends the job when a node fails. Where
# HPC_VENV_LOCAL_DIR is not safe on a node, every node makes the copy again in a private
# folder of this job (_hpc_venv_local_fallback). The copy is checked once more, as it is
# about to be used (hpc_venv_local_unsafe_to).
hpc_venv_to_local_to() {
  local -n _vtl=$1
  local nodes=${SLURM_JOB_NUM_NODES:-1} t0=$EPOCHREALTIME rc=0 unsafe
  hpc_venv_local_path_to _vtl || hpc_fail "venv: cannot name the node-local copy"
  hpc_log "venv: $HPC_VENV to each node's local disk (archive ${HPC_VENV_LOCAL_ARCHIVE##*/}, manifest sha256 ${HPC_VENV_LOCAL_SHA:-unknown}) on $nodes node(s)"
  _hpc_venv_local_setup_all "$nodes" || rc=$?
  if ((rc == HPC_EXIT_VENV_UNTRUSTED)); then
    _hpc_venv_local_fallback "$nodes"
    hpc_venv_local_path_to _vtl || hpc_fail "venv: cannot name the node-local copy"
    rc=0
    _hpc_venv_local_setup_all "$nodes" || rc=$?
  fi
  ((rc == 0)) ||
    hpc_fail "venv: the node-local copy could not be made on $nodes node(s) (exit $rc; the node's message is above). Submit with --no-venv-to-local to run the venv where it is"
  hpc_venv_local_unsafe_to unsafe "${_vtl%/*}"
  [[ -n $unsafe || (-d $_vtl && ! -L $_vtl && -O $_vtl) ]] || unsafe="$_vtl is no longer your folder"
  [[ -z $unsafe ]] ||
    hpc_fail "venv: the node-local copy $_vtl changed under the job ($unsafe): the job stops without running it"
  hpc_log "venv: node-local copy ready on $nodes node(s) in $(_hpc_venv_local_ms "$t0") ms"
}

# _hpc_venv_local_setup_all NODES: hpc_venv_local_setup on every node; returns the exit code.
_hpc_venv_local_setup_all() {
  if (($1 > 1)); then
    srun --overlap --job-name=hpc-venv --nodes="$1" --ntasks="$1" --ntasks-per-node=1 \
      --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" \
      bash "$HPC_VENV_LOCAL_SCRIPT" setup "$HPC_VENV_LOCAL_ARCHIVE" </dev/null &
  else
    hpc_venv_local_setup "$HPC_VENV_LOCAL_ARCHIVE" </dev/null &
  fi
  hpc_wait_child "$!"
}

# _hpc_venv_local_fallback NODES: HPC_VENV_LOCAL_ROOT, the job's private folder for the copy
# (mode 700, a name nobody can guess, the same on every node): in $SLURM_TMPDIR when it is
# the same path on every node (Slurm's, or one node), else in /tmp. Removed at the job's
# end on this node; on other nodes /tmp's copy is left to the node's /tmp cleaning.
_hpc_venv_local_fallback() {
  local base=/tmp user rand
  hpc_job_user_to user
  if [[ -n ${SLURM_TMPDIR:-} && -d $SLURM_TMPDIR && ($1 -le 1 || -z ${HPC_TMPDIR_PATTERN:-}) ]]; then
    base=$SLURM_TMPDIR
  fi
  rand=$(od -An -tx8 -N8 /dev/urandom 2>/dev/null) || rand=$RANDOM$RANDOM$RANDOM
  rand=${rand//[[:space:]]/}
  export HPC_VENV_LOCAL_ROOT=$base/hpc_venv_${user}_${SLURM_JOB_ID:-0}.$rand
  hpc_log "venv: the node-local copy goes to $HPC_VENV_LOCAL_ROOT instead (private to this job, removed at its end)"
  HPC_EXIT_HOOKS+=(_hpc_venv_local_fallback_remove)
}

# _hpc_venv_local_fallback_remove: exit hook: this node's private copy goes.
_hpc_venv_local_fallback_remove() {
  [[ -n ${HPC_VENV_LOCAL_ROOT:-} && ${HPC_VENV_LOCAL_ROOT##*/} == hpc_venv_* ]] || return 0
  [[ -d $HPC_VENV_LOCAL_ROOT && ! -L $HPC_VENV_LOCAL_ROOT && -O $HPC_VENV_LOCAL_ROOT ]] || return 0
  rm -rf -- "$HPC_VENV_LOCAL_ROOT" 2>/dev/null || { chmod -R u+rwx -- "$HPC_VENV_LOCAL_ROOT" && rm -rf -- "$HPC_VENV_LOCAL_ROOT"; }
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || {
  if [[ ${1:-} == setup && -n ${2:-} ]]; then
    hpc_venv_local_setup "$2"
  else
    echo "usage: venv_local.sh setup ARCHIVE (run by the job, one task per node)" >&2
    exit 2
  fi
}
