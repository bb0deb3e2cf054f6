#!/usr/bin/env bash
# Summary: the per-node batch job of submit_cleanup.sh: remove this user's leftover
# per-job folders (hpc_job_<SLURM_JOB_ID>_<node>) from this node's local scratch.
#
# Usage: sbatch --nodelist=NODE cleanup_node.sh [--dry-run] [--venvs VENV_TEMPLATE] SCRATCH_TEMPLATE
#
# SCRATCH_TEMPLATE is the profile's HPC_LOCAL_SCRATCH (%n = this node, %u = this user).
# A folder goes only when all of these hold: its name is exactly hpc_job_<job id>_<this node>
# (or hpc_job_<job id>_<this node>.XXXXXX, made when another user had taken that name, or
# hpc_job_<job id>, from older versions); no job
# of this user with that id is in the queue (in any state, on any node); it is owned by
# this user's uid, and so is everything inside it; it lies on the same filesystem as the
# scratch folder. Links are removed as links, never followed. --dry-run removes nothing.
# --venvs VENV_TEMPLATE (the profile's HPC_VENV_LOCAL_DIR, %u = this user): also remove the
# node-local venv copies (--venv-to-local) there, venv-<key>-<sha>, that no job of this
# user in the queue has used on this node (NAME.jobs/<job id>), each judged under its
# NAME.lock, which every job holds while it unpacks or checks the copy: a job that starts
# meanwhile either registered itself before the queue was asked, or finds the copy gone and
# unpacks it again. The lock files stay (removing one would let two jobs lock apart).
# The report (what went, what stayed, bytes freed) goes to stdout in one locked write,
# so that the reports of all nodes land whole in the one log their jobs share.
# sbatch runs a copy of this file from the node's spool folder: the job side's library
# (virtual_env_hpc_files/job_lib.sh) is the one submit_cleanup.sh names in HPC_JOB_LIB
# (hpc_files/lib/hpc_lib.sh exports it), else the one beside this file (run in place).
set -euo pipefail

PROG=cleanup_node.sh

die() {
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit 1
}

JOB_LIB=${BASH_SOURCE[0]%/*}
[[ $JOB_LIB != "${BASH_SOURCE[0]}" ]] || JOB_LIB=.
JOB_LIB=${HPC_JOB_LIB:-$JOB_LIB/../virtual_env_hpc_files/job_lib.sh}
[[ -r $JOB_LIB ]] || die "the toolkit's job library $JOB_LIB cannot be read on this node: nothing removed (submit with plai_cleanups/submit_cleanup.sh, from a project folder the nodes see)"
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "$JOB_LIB"

# check_root PATH: an absolute path with no . or .. part and not / itself.
check_root() {
  local path=$1
  [[ $path == /* ]] || die "local scratch '$path' is not an absolute path: fix HPC_LOCAL_SCRATCH in the cluster profile"
  [[ /$path/ != */../* && /$path/ != */./* ]] || die "local scratch '$path' holds a . or .. part: fix HPC_LOCAL_SCRATCH in the cluster profile"
  [[ ${path//\//} != "" ]] || die "local scratch is '/': fix HPC_LOCAL_SCRATCH in the cluster profile"
}

# queued_ids_to ARRAY USER: every job id of USER still in the queue (%A is an array task's
# own SLURM_JOB_ID, and the array's id for its tasks not yet started). Dies when squeue
# fails or does not list this very job, so that a broken queue query removes nothing.
queued_ids_to() {
  local -n _ids=$1
  local out id
  out=$(squeue -h -u "$2" -o '%A') || die "squeue failed: nothing removed (is slurmctld reachable from this node?)"
  for id in $out; do
    [[ $id =~ ^[0-9]+$ ]] || die "squeue printed '$id' where a job id belongs: nothing removed"
    _ids["$id"]=1
  done
  if [[ -n ${SLURM_JOB_ID:-} && -z ${_ids[$SLURM_JOB_ID]:-} ]]; then
    die "squeue did not list this cleanup job ($SLURM_JOB_ID) itself: the queue cannot be trusted, nothing removed"
  fi
}

# note LINE: one line of the report.
note() { REPORT+=("$1"); }

# clean_entry PATH ID: remove (or, dry, list) one candidate, or say why it stays.
clean_entry() {
  local entry=$1 id=$2 info uid dev type bytes foreign err
  if [[ $id != 0 && -n ${QUEUED[$id]:-} ]]; then
    note "kept $entry: job $id is still in the queue"
    return
  fi
  info=$(stat -c '%u %d %F' -- "$entry") || { note "failed $entry: cannot read its owner"; FAILED=$((FAILED + 1)); return; }
  read -r uid dev type <<<"$info"
  # Another user's entry is not ours to judge, nor to name in our log.
  if ((uid != MY_UID)); then
    OTHERS=$((OTHERS + 1))
    return
  fi
  if [[ $dev != "$ROOT_DEV" ]]; then
    note "kept $entry: it is on another filesystem than $ROOT"
    return
  fi
  case $type in
    'symbolic link') bytes=0 ;;
    directory)
      # Even root removes only what this uid owns: a folder holding anything else stays whole.
      foreign=$(find "$entry" -xdev ! -uid "$MY_UID" -print -quit 2>/dev/null) || foreign="(unreadable)"
      if [[ -n $foreign ]]; then
        note "kept $entry: it holds files of other users or that cannot be read ($foreign)"
        return
      fi
      bytes=$(du -sxB1 -- "$entry" 2>/dev/null | cut -f1) || bytes=0
      [[ $bytes =~ ^[0-9]+$ ]] || bytes=0
      ;;
    *)
      note "kept $entry: not a folder ($type)"
      return
      ;;
  esac
  if ((DRY_RUN)); then
    note "would remove $entry ($bytes bytes)"
  elif err=$(rm -rf --one-file-system -- "$entry" 2>&1); then
    note "removed $entry ($bytes bytes)"
  else
    note "failed $entry: ${err%%$'\n'*}"
    FAILED=$((FAILED + 1))
    return
  fi
  REMOVED=$((REMOVED + 1)) FREED=$((FREED + bytes))
}

# venv_candidates_to ARRAY ROOT: the venv copies in ROOT (and unpacks cut short,
# NAME.tmp.PID) whose lock this job now holds; the fds stay open until the end.
venv_candidates_to() {
  local -n _vc=$1
  local root=$2 entry name lock fd
  local -A held=() busy=()
  shopt -s nullglob
  for entry in "$root"/venv-*; do
    name=${entry##*/}
    [[ $name =~ ^(venv-[0-9a-f]{16}-[0-9a-f]{16})(\.tmp\.[0-9]+)?$ && -d $entry && ! -L $entry ]] || continue
    name=${BASH_REMATCH[1]}
    lock=$root/$name.lock
    if [[ -z ${held[$name]:-} && -z ${busy[$name]:-} ]]; then
      if [[ ! -f $lock || -L $lock ]] || ! exec {fd}<"$lock"; then
        busy[$name]="no lock file $lock beside it"
      elif ! flock -n "$fd"; then
        exec {fd}<&-
        busy[$name]="a job is unpacking or checking it now"
      else
        held[$name]=$fd
      fi
    fi
    if [[ -n ${busy[$name]:-} ]]; then
      note "kept $entry: ${busy[$name]}"
      continue
    fi
    _vc+=("$entry")
  done
  shopt -u nullglob
}

# clean_venv ENTRY: remove a venv copy no queued job used on this node (after the queue
# was asked, under its lock), with its job list.
clean_venv() {
  local entry=$1 base id users=()
  # Another node's cleanup (nodes that share this disk) removed it while this one waited.
  [[ -e $entry || -L $entry ]] || return 0
  base=${entry%.tmp.*}
  if [[ $entry == "$base" ]]; then
    shopt -s nullglob
    users=("$base.jobs"/*)
    shopt -u nullglob
    for id in "${users[@]}"; do
      id=${id##*/}
      if [[ $id =~ ^[1-9][0-9]{0,9}$ && -n ${QUEUED[$id]:-} ]]; then
        note "kept $entry: job $id, which uses it, is still in the queue"
        return
      fi
    done
  fi
  local before=$REMOVED
  clean_entry "$entry" 0
  if ((REMOVED > before && DRY_RUN == 0)) && [[ $entry == "$base" && -d $base.jobs && ! -L $base.jobs ]]; then
    rm -rf --one-file-system -- "$base.jobs" 2>/dev/null || note "failed $base.jobs: could not remove the job list"
  fi
}

# count N WORD: "1 folder", "2 folders".
count() {
  if (($1 == 1)); then printf '1 %s' "$2"; else printf '%d %ss' "$1" "$2"; fi
}

# print_report: header, lines and summary in one write, under a lock on the shared log.
print_report() {
  local text summary
  if ((DRY_RUN)); then
    summary="$NODE: dry run: would remove $(count "$REMOVED" "leftover folder"), $FREED bytes; nothing removed"
  else
    summary="$NODE: removed $(count "$REMOVED" "leftover folder"), $FREED bytes freed"
  fi
  ((OTHERS == 0)) || summary+="; other users' entries left alone: $OTHERS"
  ((FAILED == 0)) || summary+="; FAILED to remove $(count "$FAILED" folder) (see above)"
  printf -v text '== %(%Y-%m-%dT%H:%M:%S%z)T %s (job %s, user %s): %s\n' -1 "$NODE" \
    "${SLURM_JOB_ID:-none}" "$MY_USER" "$ROOT"
  ((${#REPORT[@]} == 0)) || text+=$(printf '  %s\n' "${REPORT[@]}")$'\n'
  text+=$summary$'\n'
  if command -v flock >/dev/null; then
    flock -x -w 30 1 2>/dev/null || true
  fi
  printf '%s' "$text"
}

main() {
  local template entry name tail venvs="" venv_root=""
  DRY_RUN=0
  if [[ ${1:-} == --dry-run ]]; then
    DRY_RUN=1
    shift
  fi
  if [[ ${1:-} == --venvs && $# -ge 2 ]]; then
    venvs=$2
    shift 2
  fi
  (($# == 1)) || die "usage: cleanup_node.sh [--dry-run] [--venvs VENV_TEMPLATE] SCRATCH_TEMPLATE (it is submitted by submit_cleanup.sh)"
  template=$1
  NODE=${SLURMD_NODENAME:-}
  [[ -n $NODE ]] || die "SLURMD_NODENAME is not set: this runs as a Slurm job, submitted by submit_cleanup.sh"
  MY_UID=$(id -u)
  MY_USER=$(id -un)
  hpc_expand_path_to ROOT "$template" "$NODE" "$MY_USER"
  check_root "$ROOT"
  REPORT=() REMOVED=0 FREED=0 OTHERS=0 FAILED=0
  local venv_candidates=()
  if [[ -n $venvs ]]; then
    hpc_expand_path_to venv_root "$venvs" "$NODE" "$MY_USER"
    check_root "$venv_root"
    # Only this user's own folder (as the job makes it): another user's is not ours to judge.
    if [[ -d $venv_root && ! -L $venv_root && -O $venv_root ]]; then
      venv_candidates_to venv_candidates "$venv_root"
    elif [[ -e $venv_root || -L $venv_root ]]; then
      # Made ahead by someone else (issue 32): never touched; your jobs use a private folder
      # of their own instead (virtual_env_hpc_files/venv_local.sh). Said, not skipped silently.
      note "node-local venvs: $venv_root is not your folder ($( [[ -L $venv_root ]] && echo 'a symbolic link' || echo "it belongs to $(stat -c %U -- "$venv_root" 2>/dev/null || echo 'another user')")): left alone; your jobs put their venv copies in a private folder instead. Ask the admins to remove it"
    fi
  fi
  if [[ ! -d $ROOT ]]; then
    note "no local scratch folder $ROOT on this node: nothing to do there"
    [[ -z $venv_root ]] || ROOT_DEV=$(stat -c '%d' -- "$venv_root" 2>/dev/null || echo none)
    if ((${#venv_candidates[@]})); then
      declare -gA QUEUED=()
      queued_ids_to QUEUED "$MY_USER"
      for entry in "${venv_candidates[@]}"; do clean_venv "$entry"; done
    fi
    print_report
    ((FAILED == 0))
    return
  fi
  # The scratch folder itself may be a link (the cluster's own set-up); nothing below it is.
  ROOT=$(cd -P -- "$ROOT" && pwd -P)
  ROOT_DEV=$(stat -c '%d' -- "$ROOT")

  # List first, then ask the queue: a job that starts after the listing made its folder
  # after it and is not a candidate; a job listed as a candidate is still in the queue.
  local candidates=()
  shopt -s nullglob
  for entry in "$ROOT"/hpc_job_*; do
    name=${entry##*/}
    # Only the toolkit's own spelling: no leading zero, at most 10 digits (Slurm ids are
    # below 2^32), so that the name is the job id as squeue prints it.
    # hpc_job_<id>_<node> (the toolkit's folders since they are per node), or hpc_job_<id>
    # (older versions); a folder named for another node sharing this disk is that node's.
    [[ $name =~ ^hpc_job_[1-9][0-9]{0,9}(_.+)?$ ]] || continue
    # hpc_job_<id>_<node>.XXXXXX: the job's folder made under an unguessable name when
    # another user had taken the usual one (node_tmpdir.sh); that user's stays (not ours).
    tail=${BASH_REMATCH[1]}
    [[ $tail =~ ^(.*)\.[A-Za-z0-9]{6}$ && ${BASH_REMATCH[1]} == "_$NODE" ]] && tail=_$NODE
    [[ -z $tail || $tail == "_$NODE" ]] && candidates+=("$entry")
  done
  shopt -u nullglob
  declare -gA QUEUED=()
  queued_ids_to QUEUED "$MY_USER"
  for entry in "${candidates[@]}"; do
    name=${entry##*/}
    name=${name#hpc_job_}
    clean_entry "$entry" "${name%%_*}"
  done
  if ((${#venv_candidates[@]})); then
    ROOT_DEV=$(stat -c '%d' -- "$venv_root")
    for entry in "${venv_candidates[@]}"; do clean_venv "$entry"; done
  fi
  print_report
  ((FAILED == 0))
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
