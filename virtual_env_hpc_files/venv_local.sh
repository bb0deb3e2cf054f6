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
# user's, mode 700: anything else there (another user's, a link) stops the job.
# Unpacking writes NAME.tmp.PID, rewrites the old venv path in bin/ and pyvenv.cfg to the
# copy's, then renames it to NAME: a copy is whole or absent.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"
HPC_VENV_LOCAL_SCRIPT=${BASH_SOURCE[0]}

# hpc_venv_local_path_to VAR: this job's node-local copy (the same on every node).
hpc_venv_local_path_to() {
  local -n _vlp=$1
  local root name=${HPC_VENV_LOCAL_ARCHIVE##*/}
  hpc_node_path_to root "${HPC_VENV_LOCAL_DIR:?}" || return 1
  name=${name%.tar*}
  [[ $name =~ ^venv-[0-9a-f]{16}-[0-9a-f]{16}$ ]] || {
    hpc_error "the venv archive's name '${HPC_VENV_LOCAL_ARCHIVE##*/}' is not the toolkit's (was the job script edited?): submit again"
    return 1
  }
  _vlp=${root%/}/$name
}

# _hpc_venv_local_root ROOT: ROOT exists as this user's own folder (made here, mode 700,
# when it is missing; its parent must exist).
_hpc_venv_local_root() {
  local root=$1
  [[ -d ${root%/*} || ${root%/*} == "" ]] || {
    hpc_error "the folder for node-local venvs ${root%/*} does not exist on this node (HPC_VENV_LOCAL_DIR='${HPC_VENV_LOCAL_DIR:-}' in the cluster profile): create it, or set HPC_VENV_LOCAL_DIR to a folder on the node's local disk"
    return 1
  }
  mkdir -m 700 -- "$root" 2>/dev/null || true
  [[ -d $root && ! -L $root && -O $root ]] && return 0
  local what="the disk refused it"
  if [[ -L $root ]]; then
    what="it is a symbolic link"
  elif [[ -e $root && ! -O $root ]]; then
    what="it belongs to $(stat -c %U -- "$root" 2>/dev/null || echo 'another user')"
  elif [[ -e $root ]]; then
    what="it is not a folder"
  fi
  hpc_error "cannot use $root for the node-local venv ($what): the job stops. Remove it, or set HPC_VENV_LOCAL_DIR in the cluster profile to a folder of yours"
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
  _hpc_venv_local_root "$root" || return 1
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
# node's message reaches the log); VAR is its path. Ends the job when a node fails.
hpc_venv_to_local_to() {
  local -n _vtl=$1
  local nodes=${SLURM_JOB_NUM_NODES:-1} t0=$EPOCHREALTIME rc=0
  hpc_venv_local_path_to _vtl || hpc_fail "venv: cannot name the node-local copy"
  hpc_log "venv: $HPC_VENV to each node's local disk (archive ${HPC_VENV_LOCAL_ARCHIVE##*/}, manifest sha256 ${HPC_VENV_LOCAL_SHA:-unknown}) on $nodes node(s)"
  if ((nodes > 1)); then
    srun --overlap --job-name=hpc-venv --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 \
      --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" \
      bash "$HPC_VENV_LOCAL_SCRIPT" setup "$HPC_VENV_LOCAL_ARCHIVE" </dev/null &
  else
    hpc_venv_local_setup "$HPC_VENV_LOCAL_ARCHIVE" </dev/null &
  fi
  hpc_wait_child "$!" || rc=$?
  ((rc == 0)) ||
    hpc_fail "venv: the node-local copy could not be made on $nodes node(s) (exit $rc; the node's message is above). Submit with --no-venv-to-local to run the venv where it is"
  hpc_log "venv: node-local copy ready on $nodes node(s) in $(_hpc_venv_local_ms "$t0") ms"
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || {
  if [[ ${1:-} == setup && -n ${2:-} ]]; then
    hpc_venv_local_setup "$2"
  else
    echo "usage: venv_local.sh setup ARCHIVE (run by the job, one task per node)" >&2
    exit 2
  fi
}
