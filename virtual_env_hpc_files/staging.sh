# shellcheck shell=bash
# Job side of node-local scratch, sourced by job_runtime.sh (the batch shell, first node):
#   hpc_prepare_tmpdir  $SLURM_TMPDIR on every node: Slurm's, or on clusters without one
#                       (HPC_PROVIDES_TMPDIR=auto|no) the job's own folder, made on every node
#                       and removed on every node at the end (success, failure, scancel,
#                       time limit); the results folder $HPC_RESULTS_DIR
#   hpc_stage_data      the --data archive extracted into $SLURM_TMPDIR once per node,
#                       all nodes at once (one srun step, one task per node)
#   hpc_results_sync    copy $HPC_RESULTS_DIR to $HPC_RESULTS_DEST (shared scratch); run at
#                       the end (exit hook), on SIGTERM (the exit hooks), every --sync-every
#   hpc_tmpdir_cleanup  remove the job's own folders on every node (last exit hook)
# Multi-node jobs without SLURM_TMPDIR hold their folders with a keeper task per node
# (node_tmpdir.sh keep, srun --overlap): after a scancel Slurm refuses new steps, but the
# keepers already run, get SIGTERM, and remove their node's folder.
# The batch shell has background helpers (keepers, the sync loop): never `wait` bare.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"
# shellcheck source=virtual_env_hpc_files/node_tmpdir.sh
source "${BASH_SOURCE[0]%/*}/node_tmpdir.sh"
HPC_NODE_SCRIPT=${BASH_SOURCE[0]%/*}/node_tmpdir.sh

# Exit code of a job whose program succeeded but whose results could not be copied back.
HPC_EXIT_RESULTS_LOST=74
# Seconds to wait for the keepers to start, and to remove their folders at the end.
HPC_KEEPER_TIMEOUT=${HPC_KEEPER_TIMEOUT:-120}
HPC_KEEPER_PID="" HPC_KEEPER_STEP="" HPC_KEEPER_FD="" HPC_KEEPER_STOP="" HPC_SYNC_PID="" HPC_OWN_TMPDIR=""
HPC_RESULTS_LOST="" # this attempt's results could be neither copied back nor kept
HPC_RESULTS_KEPT_NOW="" # the attempt_N folder of .hpc_results_kept this attempt made

# _hpc_seconds_since T0: seconds since EPOCHREALTIME T0, with two decimals.
_hpc_seconds_since() {
  local ms=$(((${EPOCHREALTIME/[.,]/} - ${1/[.,]/}) / 1000))
  printf '%d.%02d' $((ms / 1000)) $((ms % 1000 / 10))
}

# hpc_prepare_tmpdir: $SLURM_TMPDIR on every node, the results folder, their exit hooks.
# HPC_PROVIDES_TMPDIR (profile): auto (default): Slurm's SLURM_TMPDIR when the job has one,
# else the job's own; yes: Slurm's (the job makes its own, with a warning, when it is
# missing); no: always the job's own.
hpc_prepare_tmpdir() {
  local mode=${HPC_PROVIDES_TMPDIR:-auto} from=SLURM_TMPDIR
  [[ -n ${SLURM_TMPDIR:-} ]] || from=TMPDIR
  hpc_slurm_tmpdir_to SLURM_TMPDIR # or this job's TMPDIR, where Slurm sets only that (job_lib.sh)
  if [[ $mode != no && -n ${SLURM_TMPDIR:-} && -d ${SLURM_TMPDIR:-} ]]; then
    # The site's own set-up, which the user cannot change (and whose folders may belong to
    # a service user such as SlurmUser): said, not refused.
    local unsafe
    hpc_unsafe_chain_to unsafe "$SLURM_TMPDIR"
    [[ -z $unsafe ]] ||
      hpc_log "WARNING: local scratch: \$SLURM_TMPDIR=$SLURM_TMPDIR (\$$from, made by the cluster) may not be safe for the job's files: $unsafe. Tell your admins"
    if [[ -n ${HPC_LOCAL_RUN:-} ]]; then
      hpc_log "local scratch: \$SLURM_TMPDIR=$SLURM_TMPDIR (made by the --local run, removed at its end)"
    else
      hpc_log "local scratch: \$SLURM_TMPDIR=$SLURM_TMPDIR (made by Slurm on every node, as \$$from)"
    fi
  else
    [[ $mode != yes ]] ||
      hpc_log "WARNING: the cluster profile says Slurm sets SLURM_TMPDIR, but it is '${SLURM_TMPDIR:-}' here: the job makes its own (set HPC_PROVIDES_TMPDIR=auto in the profile)"
    _hpc_own_tmpdirs
  fi
  export SLURM_TMPDIR
  _hpc_results_setup
}

# _hpc_own_tmpdirs: the job's own folder on every node (see node_tmpdir.sh). The exit hook
# removes only what was made: HPC_OWN_TMPDIR is set once this node's folder is this job's.
_hpc_own_tmpdirs() {
  local nodes=${SLURM_JOB_NUM_NODES:-1} base=${HPC_LOCAL_SCRATCH:-/tmp} dir user
  hpc_job_user_to user
  hpc_expand_path_to base "$base" %n "$user" # %n stays: each node's own name (node_tmpdir.sh)
  [[ $base == /* ]] ||
    hpc_fail "HPC_LOCAL_SCRATCH '$HPC_LOCAL_SCRATCH' is not an absolute path: fix the cluster profile"
  export HPC_TMPDIR_PATTERN=${base%/}/hpc_job_${SLURM_JOB_ID:?}_%n
  # HPC_TMPDIR_MAP: each node's folder where it is not the usual name (node_tmpdir.sh),
  # for the steps that ask hpc_node_tmpdir_to: "NODE<tab>DIR" lines.
  export HPC_TMPDIR_MAP=""
  hpc_node_tmpdir_to dir || hpc_fail "could not name the job's local scratch folder"
  SLURM_TMPDIR=$dir
  # The hook stops the keepers, and removes this node's folder once it is known to be ours.
  HPC_LAST_EXIT_HOOKS+=(hpc_tmpdir_cleanup)
  if ((nodes > 1)); then
    _hpc_start_keepers "$nodes"
  else
    hpc_node_make_tmpdir "$dir" || hpc_fail "could not make the job's local scratch folder"
    HPC_OWN_TMPDIR=$HPC_NODE_TMPDIR SLURM_TMPDIR=$HPC_NODE_TMPDIR
    [[ $HPC_NODE_TMPDIR == "$dir" ]] || HPC_TMPDIR_MAP=${SLURMD_NODENAME:-}$'\t'$HPC_NODE_TMPDIR
  fi
  hpc_log "local scratch: \$SLURM_TMPDIR=$SLURM_TMPDIR (made by the job on $nodes node(s), removed at its end)"
}

# _hpc_start_keepers NODES: one keeper per node; returns once every node has its folder.
# The toolkit's own helpers in steps (the keepers, the --data extraction; the preemption
# watch, requeue.sh) run without the user's BASH_ENV: a BASH_ENV that prints a line made
# the first keeper's answer that line (README: The job's environment). The user's command
# keeps it (Lmod's module function reaches non-interactive shells through it).
# Their stop file (HPC_KEEPER_STOP, in the job's home: one per job and attempt; none for a
# job of an older version, which has no home) is cleared before they start, with those that
# earlier attempts of the job left.
_hpc_start_keepers() {
  local nodes=$1 i line node dir
  HPC_KEEPER_STOP=""
  if hpc_job_path_to HPC_KEEPER_STOP keepers_stop; then
    HPC_KEEPER_STOP+=${SLURM_JOB_ID:?}.
    # This attempt's, and those of earlier attempts whose batch shell was killed before its
    # exit hook removed them (another job's stay).
    rm -f -- "$HPC_KEEPER_STOP"*
    HPC_KEEPER_STOP+=${SLURM_RESTART_COUNT:-0}
  fi
  exec {HPC_KEEPER_FD}< <(exec srun --overlap --job-name=hpc-tmpdir --nodes="$nodes" \
    --ntasks="$nodes" --ntasks-per-node=1 --cpus-per-task=1 \
    env -u BASH_ENV bash "$HPC_NODE_SCRIPT" keep "${SLURMD_NODENAME:-}" "$$" "$HPC_KEEPER_STOP" </dev/null)
  HPC_KEEPER_PID=$!
  for ((i = 0; i < nodes; i++)); do
    line=""
    IFS= read -r -t "$HPC_KEEPER_TIMEOUT" -u "$HPC_KEEPER_FD" line || true
    [[ -z ${HPC_SIGNALLED:-} ]] || hpc_fail "the job was signalled ($HPC_SIGNALLED) while making its local scratch folders"
    [[ $line == "ready "* ]] ||
      hpc_fail "could not make the job's local scratch folder on every node (${i} of $nodes ready; srun's or the node's message is above; this needs srun --overlap, Slurm 20.11 or later)"
    # "ready NODE STEP DIR" (DIR last: it may hold spaces).
    read -r _ node HPC_KEEPER_STEP dir <<<"$line"
    local usual
    hpc_expand_path_to usual "$HPC_TMPDIR_PATTERN" "$node" ""
    [[ $dir == "$usual" || -z $dir ]] || HPC_TMPDIR_MAP+=${HPC_TMPDIR_MAP:+$'\n'}$node$'\t'$dir
    # This node's keeper made this node's folder: from now on the batch shell removes it.
    if [[ $node == "${SLURMD_NODENAME:-}" ]]; then
      HPC_OWN_TMPDIR=${dir:-$SLURM_TMPDIR} SLURM_TMPDIR=${dir:-$SLURM_TMPDIR}
    fi
  done
}

# _hpc_stop_keepers: the stop file, and SIGINT to the keeper step (SIGTERM would make
# slurmstepd log the step as cancelled); wait until its tasks removed their folders. The
# signal goes again every 3 s while they run (a keeper takes it twice harmlessly). CI on
# 26.05 saw a keeper that no signal reached (the stop file ends it within 2 s): from 20 s
# on, SIGTERM goes instead, to the step and to its srun here (which ends the tasks), and
# the log says which signal ended them. Returns 0 when they ended before SIGTERM, 2 when
# SIGTERM ended them (srun may have killed a keeper before it removed its folder), 1 when
# they did not end.
_hpc_stop_keepers() {
  local waited=0 limit=$((HPC_KEEPER_TIMEOUT * 10)) sig=INT out said=""
  [[ -n $HPC_KEEPER_PID ]] || return 0
  if [[ -n $HPC_KEEPER_STOP ]]; then
    { : >"$HPC_KEEPER_STOP"; } 2>/dev/null ||
      hpc_log "local scratch: could not write the keepers' stop file $HPC_KEEPER_STOP: they are told by SIGINT alone"
  fi
  while kill -0 "$HPC_KEEPER_PID" 2>/dev/null && ((waited++ < limit)); do
    if ((waited % 30 == 1)); then
      ((waited < 200)) || sig=TERM
      if [[ $HPC_KEEPER_STEP =~ ^[0-9]+$ ]]; then
        out=$(scancel --signal="$sig" "${SLURM_JOB_ID:?}.$HPC_KEEPER_STEP" 2>&1) ||
          [[ -n $said ]] || { said=1 && hpc_log "local scratch: scancel --signal=$sig of the keeper step $HPC_KEEPER_STEP failed: ${out:0:300}"; }
      fi
      [[ $sig != TERM ]] || kill -s TERM "$HPC_KEEPER_PID" 2>/dev/null
    fi
    sleep 0.1
  done
  exec {HPC_KEEPER_FD}<&-
  [[ -z $HPC_KEEPER_STOP ]] || rm -f -- "$HPC_KEEPER_STOP"
  if kill -0 "$HPC_KEEPER_PID" 2>/dev/null; then
    hpc_error "the per-node folder keepers did not end within $HPC_KEEPER_TIMEOUT s (step ${HPC_KEEPER_STEP:-?}, their stop file and SIGINT, then SIGTERM); Slurm stops them at the job's end"
    return 1
  fi
  HPC_KEEPER_PID=""
  [[ $sig != INT ]] || return 0
  hpc_log "local scratch: the per-node folder keepers ended on SIGTERM after $((waited / 10)) s (neither SIGINT nor their stop file ended them)"
  return 2
}

# hpc_tmpdir_cleanup: remove the job's own folders, here and on the other nodes (their
# keepers do it). Results are copied back before (an earlier exit hook). Returns non-zero
# when a folder could not be removed.
hpc_tmpdir_cleanup() {
  [[ -n $HPC_OWN_TMPDIR || -n $HPC_KEEPER_PID ]] || return 0
  local rc=0 made=$HPC_OWN_TMPDIR stopped=0
  cd / || true # the shell must not sit in the folder it removes
  [[ -z $made ]] || hpc_node_remove_tmpdir "$made" || rc=1
  _hpc_stop_keepers || stopped=$?
  ((stopped != 1)) || rc=1
  HPC_OWN_TMPDIR=""
  ((rc == 0)) && [[ -n $made ]] || return "$rc"
  # The keepers remove only the folders they made, and say so when they could not. Ended
  # by SIGTERM, one may have been killed first: its folder is not claimed as removed.
  if ((stopped == 2)); then
    hpc_log "local scratch: removed the job's folder on this node; on the other nodes only what their keepers removed before srun ended them (a folder left there is removed by the periodic node cleanup, plai_cleanups)"
  else
    hpc_log "local scratch: removed the job's folder on ${SLURM_JOB_NUM_NODES:-1} node(s)"
  fi
  return 0
}

# _hpc_results_setup: HPC_RESULTS_DIR (from HPC_RESULTS_FOLDER: relative to $SLURM_TMPDIR,
# absolute, or none), HPC_RESULTS_DEST, the final copy and the periodic one.
_hpc_results_setup() {
  local folder=${HPC_RESULTS_FOLDER:-results}
  if [[ $folder == none ]]; then
    unset HPC_RESULTS_DIR HPC_RESULTS_DEST
    return 0
  fi
  [[ $folder == /* ]] || folder=$SLURM_TMPDIR/$folder
  export HPC_RESULTS_DIR=$folder
  export HPC_RESULTS_DEST=$HPC_EXP_DIR/results${HPC_TASK_SUBDIR-}
  mkdir -p -- "$HPC_RESULTS_DIR" || hpc_fail "cannot create the results folder $HPC_RESULTS_DIR"
  _hpc_results_restore
  HPC_EXIT_HOOKS+=(hpc_results_final)
  local every=""
  if ((${HPC_SYNC_EVERY_S:-0} > 0)); then
    _hpc_sync_loop &
    HPC_SYNC_PID=$!
    every=" and every ${HPC_SYNC_EVERY_S} s"
  fi
  hpc_log "results: \$HPC_RESULTS_DIR=$HPC_RESULTS_DIR is copied to $HPC_RESULTS_DEST at the end$every"
}

# _hpc_results_restore: a requeued attempt (SLURM_RESTART_COUNT > 0) starts with what the
# earlier attempts' results are now ($HPC_RESULTS_DEST, copied back to $HPC_RESULTS_DIR,
# times kept so that unchanged files are not copied again): the program finds its folder as
# it left it, as on a laptop. It started empty, and a file the program appends to across
# attempts (train.log, Hydra's log, metrics.csv) replaced the earlier attempts' at the end:
# their lines were lost, the job COMPLETED. Only from the user's own folder; the toolkit's
# entries (.hpc_*) stay where they are. When the copy fails (no room on the node), the log
# says which earlier results a file of the same name will replace.
_hpc_results_restore() {
  ((${SLURM_RESTART_COUNT:-0} > 0)) || return 0
  local dest=$HPC_RESULTS_DEST names=() entries=() e out
  [[ -d $dest && ! -L $dest && -O $dest ]] || return 0
  hpc_dir_entries_to names "$dest"
  for e in "${names[@]}"; do
    [[ $e == .hpc_* ]] || entries+=("$dest/$e")
  done
  ((${#entries[@]})) || return 0
  if out=$(cp -a -- "${entries[@]}" "$HPC_RESULTS_DIR/" 2>&1); then
    hpc_log "results: attempt $((SLURM_RESTART_COUNT + 1)) starts with the earlier attempts' results ($dest, ${#entries[@]} entries) in \$HPC_RESULTS_DIR, as the program left them"
  else
    hpc_log "results: WARNING: could not bring the earlier attempts' results back into \$HPC_RESULTS_DIR (${out:0:300}): a file this attempt writes under the same name replaces theirs in $dest"
  fi
}

# _hpc_sync_loop: the periodic copy (a background subshell of the batch shell).
_hpc_sync_loop() {
  local nap=""
  trap '' USR1 INT
  trap '[[ -z $nap ]] || kill "$nap" 2>/dev/null; exit 0' TERM
  while :; do
    sleep "$HPC_SYNC_EVERY_S" &
    nap=$!
    wait "$nap" 2>/dev/null
    hpc_results_sync || true
  done
}

# hpc_results_sync: copy the results folder to shared scratch now; nothing is deleted
# there. Safe to call at any time, also from a signal handler: copies never overlap.
# What comes back, and how (README.md, "Results"):
# - only this user's files: an entry of another user (a file planted in a shared results
#   folder) stays, with its folder's content, and the log says so;
# - modes are the program's, less the job's umask: a copy removes bits, never adds them
#   (a 0600 result arrives 0600, a folder the program left open (777) arrives 755 under
#   umask 022); only the owner gets rwx on folders, so that the next copy can write there;
#   setuid, setgid and sticky bits are dropped; a later chmod on the node reaches the copy;
# - a link that leads into the job's node-local folders ($SLURM_TMPDIR, its results) is
#   copied as what it leads to (the node's folder is removed at the end); any other link
#   is copied as a link, and the log says where it leads; links are never followed to
#   decide what else to copy;
# - sparse files stay sparse (rsync --sparse, tar -S);
# - after a SIGTERM (HPC_RESULTS_DEADLINE_US, hpc_hooks_before_kill) the copy is cut off
#   in time to list, before Slurm's SIGKILL, what did not come back; rsync keeps a cut-off
#   file in .hpc_partial/ beside it, and the next copy (the final one, a requeued
#   attempt's) goes on from there. The list is also written to $HPC_RESULTS_DEST/.hpc_not_copied.
# Returns non-zero (and says why in the log) when something did not come back.
hpc_results_sync() {
  local src=${HPC_RESULTS_DIR:-} dest=${HPC_RESULTS_DEST:-} rc=0 t0=$EPOCHREALTIME work
  [[ -n $src && -n $dest ]] || return 0
  if [[ ! -d $src ]]; then
    hpc_log "results: $src is not there: nothing to copy"
    return 0
  fi
  # A folder with no file in it (a packed job's empty task_I folders) makes no empty copy
  # in scratch.
  hpc_dir_has_file "$src" || return 0
  work=$(mktemp -d "${TMPDIR:-/tmp}/hpc_results.XXXXXX" 2>/dev/null) ||
    work=$(mktemp -d "${SLURM_TMPDIR:-/tmp}/.hpc_results.XXXXXX") || {
    hpc_error "results: no room for the copy's lists (mktemp failed): nothing copied to $dest"
    return 1
  }
  _hpc_results_copy "$src" "$dest" "$work" || rc=$?
  rm -rf -- "$work"
  ((rc == 0)) || return 1
  hpc_log "results: copied to $dest in $(_hpc_seconds_since "$t0") s"
}

# _hpc_results_copy SRC DEST WORK: hpc_results_sync's copy, its lists in WORK.
_hpc_results_copy() {
  local src=$1 dest=$2 work=$3 rc=0 out="" left="" why lock=() tmo=() fd
  _hpc_results_lists "$src" "$work"
  mkdir -p -- "$dest" 2>/dev/null || {
    hpc_error "results: copying $src to $dest failed: cannot create $dest, nothing copied (is \$SCRATCH writable from this node?)"
    return 1
  }
  # Never into another user's folder (a results folder that is a link to theirs): they
  # would read what the program wrote. Issue 32. (Not "nobody" (65534): what an NFSv4
  # mount whose ids do not map shows for every file; no user can give a folder to it.)
  if [[ ! -O $dest && $(stat -L -c %u -- "$dest" 2>/dev/null) != 65534 ]]; then
    hpc_error "results: $dest belongs to $(stat -L -c %U -- "$dest" 2>/dev/null || echo 'another user'), not to you: nothing is copied there. Make it a folder of your own (remove the link), or submit with another --exp-name"
    return 1
  fi
  if [[ -n ${HPC_RESULTS_DEADLINE_US:-} ]]; then
    left=$((HPC_RESULTS_DEADLINE_US - ${EPOCHREALTIME/[.,]/}))
    if ((left <= 0)); then
      _hpc_results_missing "$src" "$dest" "$work" "no time was left before Slurm's kill to copy them"
      return 1
    fi
    printf -v left '%d.%06d' $((left / 1000000)) $((left % 1000000))
    tmo=(timeout -k 1 "$left")
  fi
  if command -v flock >/dev/null && exec {fd}>>"${SLURM_TMPDIR:-$work}/.hpc_results.lock"; then
    lock=(flock "$fd")
    [[ -z $left ]] || lock=(flock -w "${left%.*}" "$fd")
    "${lock[@]}" || true
  fi
  if command -v rsync >/dev/null; then
    local modes
    _hpc_results_chmod_to modes
    local base=(rsync -lt --sparse --perms "$modes" --partial-dir=.hpc_partial --from0)
    [[ -z ${HPC_RESULTS_BWLIMIT:-} ]] || base+=("--bwlimit=$HPC_RESULTS_BWLIMIT")
    out=$("${tmo[@]}" "${base[@]}" --files-from="$work/copy" -- "$src/" "$dest/" 2>&1) || rc=$?
    if ((rc == 0)) && [[ -s $work/deref ]]; then
      out=$("${tmo[@]}" "${base[@]}" -rL --files-from="$work/deref" -- "$src/" "$dest/" 2>&1) || rc=$?
    fi
  else
    # (no rsync: tar, without resuming a cut-off file)
    out=$({ "${tmo[@]}" tar -C "$src" --null -T "$work/copy" --no-recursion -cSf - |
      tar -C "$dest" -xf - --no-same-owner --no-same-permissions; } 2>&1) || rc=$?
    if ((rc == 0)) && [[ -s $work/deref ]]; then
      out=$({ "${tmo[@]}" tar -C "$src" --null -T "$work/deref" -chSf - |
        tar -C "$dest" -xf - --no-same-owner --no-same-permissions; } 2>&1) || rc=$?
    fi
  fi
  [[ -z $fd ]] || exec {fd}>&-
  # (tar leaves a folder the program made read-only so: the next copy could not write there)
  command -v rsync >/dev/null ||
    find "$dest" -type d -user "$(id -u)" ! -perm -u=rwx -exec chmod u+rwx {} + 2>/dev/null
  if ((rc == 0)); then
    rm -f -- "$dest/.hpc_not_copied"
    return 0
  fi
  why="the copy failed (exit $rc): ${out:0:1500}"
  ((rc != 124 && rc != 137)) || why="the copy ran out of the time left before Slurm's kill (KillWait)"
  _hpc_results_missing "$src" "$dest" "$work" "$why"
  return 1
}

# _hpc_results_chmod_to VAR: rsync's --chmod that removes the job's umask from the modes
# it copies (umask 027: --chmod=g-w,o-rwx,a-st,Du+rwx). The tar copy does the same with
# --no-same-permissions (tar applies the umask).
_hpc_results_chmod_to() {
  local -n _mod=$1
  local mask i d bits who=(u g o) out=""
  mask=$(umask)
  mask=${mask: -3}
  for i in 0 1 2; do
    d=${mask:i:1} bits=""
    ((d & 4)) && bits+=r
    ((d & 2)) && bits+=w
    ((d & 1)) && bits+=x
    [[ -z $bits ]] || out+=${who[i]}-$bits,
  done
  _mod="--chmod=${out}a-st,Du+rwx"
}

# _hpc_results_lists SRC WORK: WORK/copy: this user's entries of SRC (folders, files, and
# links copied as links), NUL-separated, relative; WORK/deref: the links into the job's
# node-local folders, copied as their content. Logs what stays behind and why.
_hpc_results_lists() {
  local src=$1 work=$2 uid entry target to tmp_real="" src_real notes=0
  uid=$(id -u)
  : >"$work/deref"
  [[ -z ${SLURM_TMPDIR:-} ]] || tmp_real=$(cd -P -- "$SLURM_TMPDIR" 2>/dev/null && pwd -P)
  src_real=$(cd -P -- "$src" 2>/dev/null && pwd -P)
  # Another user's entries (and whatever is inside them) are pruned, never copied.
  while IFS= read -r -d '' entry; do
    ((notes++ < 20)) && hpc_log "results: not copied: $entry (it belongs to $(stat -c %U -- "$src/$entry" 2>/dev/null || echo 'another user'), not to you)"
  done < <(find "$src" -mindepth 1 ! -uid "$uid" -prune -printf '%P\0' 2>/dev/null)
  ((notes <= 20)) || hpc_log "results: ... and $((notes - 20)) more entries of other users, not copied"
  find "$src" -mindepth 1 ! -uid "$uid" -prune -o ! -type l -printf '%P\0' >"$work/copy" 2>/dev/null
  while IFS= read -r -d '' entry; do
    target=$(readlink -- "$src/$entry")
    to=$(realpath -m -- "$src/$entry" 2>/dev/null) || to=""
    if [[ $target != /* ]] && _hpc_path_under "$to" "$src_real"; then
      printf '%s\0' "$entry" >>"$work/copy" # relative, within the results: still works there
    elif _hpc_path_under "$to" "$tmp_real" "$src_real" && _hpc_link_loops "$to"; then
      printf '%s\0' "$entry" >>"$work/copy"
      hpc_log "results: $entry is a link to $target, a folder that holds the link itself or a link back above it (a loop): copied as a link, not followed"
    elif _hpc_path_under "$to" "$tmp_real" "$src_real"; then
      printf '%s\0' "$entry" >>"$work/deref" # the node's folder goes: its content comes back
    else
      printf '%s\0' "$entry" >>"$work/copy"
      hpc_log "results: $entry is a link to $target, outside the job's node-local folders: copied as a link"
    fi
  done < <(find "$src" -mindepth 1 ! -uid "$uid" -prune -o -type l -printf '%P\0' 2>/dev/null)
}

# _hpc_link_loops TARGET: TARGET (a link's resolved target) is a folder whose content,
# links followed, leads back to a folder it is in: a link to $HPC_RESULTS_DIR (or above it)
# inside it, or links to each other. Copied as content, such a link made the copy recurse
# until it filled the scratch (two links: 2 GB in 40 s) or failed 40 levels deep. find -L
# notices a loop by the folders it is in (their device and inode) and says so.
_hpc_link_loops() {
  [[ -d $1 ]] || return 1
  local said
  said=$(LC_ALL=C find -L "$1" -maxdepth 64 -type d -printf '' 2>&1 >/dev/null)
  [[ $said == *"loop"* || $said == *"Too many levels"* ]]
}

# _hpc_path_under PATH DIR...: PATH is DIR or below one of the DIRs.
_hpc_path_under() {
  local p=$1 d
  shift
  for d; do
    [[ -n $d && ($p == "$d" || $p == "$d"/*) ]] && return 0
  done
  return 1
}

# _hpc_results_missing SRC DEST WORK WHY: log (and write to DEST/.hpc_not_copied) this
# user's files of SRC that are not at DEST with their size, and why.
_hpc_results_missing() {
  local src=$1 dest=$2 work=$3 why=$4 entry n=0 list=()
  if [[ -n ${HPC_RESULTS_EARLY_COPY:-} ]]; then
    hpc_log "results: the copy started at SIGTERM stopped ($why); the last copy goes on"
    return 0
  fi
  find "$src" -mindepth 1 ! -uid "$(id -u)" -prune -o -type f -printf '%P\t%s\0' 2>/dev/null |
    sort -z >"$work/src.sizes"
  find "$dest" -mindepth 1 -name .hpc_partial -prune -o -type f -printf '%P\t%s\0' 2>/dev/null |
    sort -z >"$work/dest.sizes"
  while IFS= read -r -d '' entry; do
    list+=("${entry%$'\t'*}")
  done < <(comm -z -23 "$work/src.sizes" "$work/dest.sizes")
  while IFS= read -r -d '' entry; do
    [[ -e $dest/$entry && ! -L $dest/$entry ]] || list+=("$entry")
  done <"$work/deref"
  hpc_error "results: NOT all copied back to $dest: ${#list[@]} file(s) did not come back: $why. They are lost with the node's folder unless a later copy gets them"
  for entry in "${list[@]}"; do
    ((n++ < 30)) || break
    hpc_log "results: not copied: $entry" >&2
  done
  ((${#list[@]} <= 30)) || hpc_log "results: ... and $((${#list[@]} - 30)) more (the whole list: $dest/.hpc_not_copied)" >&2
  ((${#list[@]} == 0)) || { printf '%s\n' "${list[@]}" >"$dest/.hpc_not_copied"; } 2>/dev/null || true
}

# hpc_results_final RC: exit hook: stop the periodic copy, wait for the copy a SIGTERM
# started (hpc_hooks_before_kill), copy one last time, then bring back what earlier
# attempts could not (_hpc_results_bring_back). Nothing is lost at a requeue: what did not
# come back is kept on $SCRATCH (_hpc_results_keep) for the next attempt, or the user, to
# find; the log says where. A job that is not requeued fails (exit
# $HPC_EXIT_RESULTS_LOST) after a successful program while results of any of its attempts
# are missing from $HPC_RESULTS_DEST. HPC_RESULTS_LOST=1 when this attempt's results could
# be neither copied nor kept (requeue.sh then ends the job instead of requeueing it).
hpc_results_final() {
  local rc=${1:-0} ok=1 requeue="" kept missing
  if [[ -n $HPC_SYNC_PID ]]; then
    kill "$HPC_SYNC_PID" 2>/dev/null
    wait "$HPC_SYNC_PID" 2>/dev/null
    HPC_SYNC_PID=""
  fi
  if [[ -n ${HPC_RESULTS_EARLY_PID:-} ]]; then
    hpc_wait_child "$HPC_RESULTS_EARLY_PID" >/dev/null 2>&1 || true
    HPC_RESULTS_EARLY_PID=""
  fi
  [[ ${HPC_ATTEMPT_OUTCOME:-} != *-requeued ]] || requeue=1
  hpc_results_sync || ok=0
  _hpc_results_kept_dir_to kept
  if ((!ok)) && ! _hpc_results_keep "$kept" "$requeue"; then
    HPC_RESULTS_LOST=1
  fi
  _hpc_results_bring_back "$kept"
  [[ -z $requeue ]] || return $((!ok))
  _hpc_results_kept_list_to missing "$kept"
  if [[ -n $missing ]]; then
    hpc_error "results: results of attempt(s) $missing did not come back to $HPC_RESULTS_DEST: they are in $kept (attempt_N folders). Copy them yourself once there is room (rsync -a --update $kept/attempt_N/ $HPC_RESULTS_DEST/, oldest first), or make room and rerun the job (--rerun): it brings them back"
  elif ((ok)); then
    return 0
  fi
  if ((rc == 0)); then
    HPC_EXIT_CODE=$HPC_EXIT_RESULTS_LOST
    hpc_error "the program succeeded, but its results did not all come back to $HPC_RESULTS_DEST: the job fails with exit code $HPC_EXIT_RESULTS_LOST"
  fi
  return 1
}

# _hpc_results_kept_dir_to VAR: where results that could not come back wait, on $SCRATCH
# beside the results folder (a full results folder is often a quota or a mount of its own):
# $HPC_EXP_DIR/.hpc_results_kept[/task_I], one attempt_N folder per attempt.
_hpc_results_kept_dir_to() {
  printf -v "$1" '%s' "$HPC_EXP_DIR/.hpc_results_kept${HPC_TASK_SUBDIR-}"
}

# _hpc_results_kept_list_to VAR KEPT: the attempts (N, or N-JOB) whose results KEPT holds,
# oldest first; "" when none.
_hpc_results_kept_list_to() {
  local -n _kl=$1
  local names
  _kl=""
  [[ -d $2 ]] || return 0
  names=$(find "$2" -mindepth 1 -maxdepth 1 -type d -name 'attempt_*' -printf '%f\n' 2>/dev/null | sort -V)
  names=${names//attempt_/}
  _kl=${names//$'\n'/ }
}

# _hpc_results_keep KEPT REQUEUE: this attempt's results (that did not all come back) copied
# to KEPT/attempt_N (N: this attempt; attempt_N-JOB when an earlier job of the experiment
# left one of that name), modes kept, in a folder only the user can enter. Says where.
_hpc_results_keep() {
  local kept=$1 requeue=$2 n=$((${SLURM_RESTART_COUNT:-0} + 1)) dir work rc=0
  hpc_dir_has_file "$HPC_RESULTS_DIR" || return 0
  local made=""
  dir=$kept/attempt_$n
  [[ ! -e $dir ]] || dir=$kept/attempt_$n-${SLURM_JOB_ID:-x}
  [[ -e $dir ]] || made=yes
  work=$(mktemp -d "${TMPDIR:-/tmp}/hpc_results.XXXXXX" 2>/dev/null) || work=""
  if [[ -z $work ]] || ! (umask 077 && mkdir -p -- "$kept") || ! mkdir -p -- "$dir" ||
    ! HPC_RESULTS_EARLY_COPY="" _hpc_results_copy "$HPC_RESULTS_DIR" "$dir" "$work" >/dev/null 2>&1; then
    rc=1
  fi
  [[ -z $work ]] || rm -rf -- "$work"
  if ((rc)); then
    # (a part copy is no kept result: a later bring-back would take it for one)
    [[ -z $made ]] || rm -rf -- "$dir"
    hpc_error "results: attempt $n's results could not be kept in $dir either: they are lost with the node's folder"
    return 1
  fi
  HPC_RESULTS_KEPT_NOW=${dir##*/}
  if [[ -n $requeue ]]; then
    hpc_log "results: attempt $n's results are kept in $dir: the next attempt copies them to $HPC_RESULTS_DEST" >&2
  else
    hpc_log "results: attempt $n's results are kept in $dir" >&2
  fi
}

# _hpc_results_bring_back KEPT: copy what earlier attempts kept in KEPT to
# $HPC_RESULTS_DEST, oldest first, never over a newer file there (a later attempt's); a
# kept folder that came back whole is removed. Not while Slurm's kill is near (the kept
# results are safe where they are).
_hpc_results_bring_back() {
  local kept=$1 dest=$HPC_RESULTS_DEST list n dir out rc
  _hpc_results_kept_list_to list "$kept"
  [[ -n $list ]] || return 0
  if [[ -n ${HPC_RESULTS_DEADLINE_US:-} ]]; then
    hpc_log "results: the results of attempt(s) $list stay in $kept (no time before Slurm's kill to copy them)"
    return 0
  fi
  for n in $list; do
    [[ attempt_$n != "${HPC_RESULTS_KEPT_NOW:-}" ]] || continue # (kept just now: it stays)
    dir=$kept/attempt_$n rc=0
    if command -v rsync >/dev/null; then
      local modes
      _hpc_results_chmod_to modes
      out=$({ mkdir -p -- "$dest" && rsync -rlt --update --sparse --perms "$modes" \
        --exclude=/.hpc_not_copied --exclude=.hpc_partial -- "$dir/" "$dest/"; } 2>&1) || rc=$?
    else
      out=$({ mkdir -p -- "$dest" && tar -C "$dir" --exclude=./.hpc_not_copied -cSf - . |
        tar -C "$dest" -xf - --keep-newer-files --no-same-owner --no-same-permissions; } 2>&1) || rc=$?
    fi
    if ((rc == 0)); then
      rm -rf -- "$dir"
      hpc_log "results: attempt $n's results kept in $dir are back in $dest"
    else
      hpc_error "results: attempt $n's results kept in $dir could not be copied to $dest (exit $rc: ${out:0:500}): they stay there"
    fi
  done
  rmdir -- "$kept" "$HPC_EXP_DIR/.hpc_results_kept" 2>/dev/null || true
}

# hpc_stage_data: extract the --data archive into $SLURM_TMPDIR, once per node, on every
# node at once. The job fails here (before the program starts) when a node lacks space.
# No --kill-on-bad-exit on the step: every node ends on its own, so each node's message
# reaches the log (a step killed at the first failure lost them under load, even the
# failing node's own).
hpc_stage_data() {
  [[ -n ${HPC_DATA_ARCHIVE:-} ]] || return 0
  [[ -z ${HPC_SIGNALLED:-} ]] || return 0 # the job is ending: the program will not start
  [[ -f $HPC_DATA_ARCHIVE && -r $HPC_DATA_ARCHIVE ]] ||
    hpc_fail "the --data archive $HPC_DATA_ARCHIVE is missing (was $scratch_dir/.hpc_staging cleaned up while the job waited?): submit again"
  local nodes=${SLURM_JOB_NUM_NODES:-1} t0=$EPOCHREALTIME rc=0 size
  # Read back from .hpc_staging at submission: never evaluated unless it is a number.
  { is_size "${HPC_DATA_BYTES:-0}" && is_size "${HPC_DATA_ENTRIES:-0}"; } ||
    hpc_fail "data: the archive's size or entry count ('${HPC_DATA_BYTES:-}', '${HPC_DATA_ENTRIES:-}') is not a number (was .hpc_staging edited?): submit again"
  human_bytes_to size "${HPC_DATA_BYTES:-0}"
  # Which data this job was submitted with: the archive is named by its content's hash.
  local sha=${HPC_DATA_SHA:-}
  [[ $sha =~ ^[0-9a-f]{64}$ ]] || sha="unknown"
  hpc_log "data: extracting ${HPC_DATA_ARCHIVE##*/} (manifest sha256 $sha, $((10#${HPC_DATA_ENTRIES:-0})) entries, $size) on $nodes node(s)"
  if ((nodes > 1)); then
    srun --overlap --job-name=hpc-stage --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 \
      --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" \
      env -u BASH_ENV bash "$HPC_NODE_SCRIPT" extract "$HPC_DATA_ARCHIVE" "${HPC_DATA_BYTES:-0}" </dev/null &
  else
    hpc_node_extract "$SLURM_TMPDIR" "$HPC_DATA_ARCHIVE" "${HPC_DATA_BYTES:-0}" </dev/null &
  fi
  hpc_wait_child "$!" || rc=$?
  ((rc == 0)) ||
    hpc_fail "data: staging into \$SLURM_TMPDIR failed on $nodes node(s) (exit $rc; the node's message is above)"
  hpc_log "data: ${HPC_DATA_ARCHIVE##*/} ($size) extracted into \$SLURM_TMPDIR on $nodes node(s) in $(_hpc_seconds_since "$t0") s"
}

# Seconds (in microseconds) that the results copy after a SIGTERM leaves of Slurm's
# KillWait, to list what did not come back and remove the job's folders.
HPC_KILL_RESERVE_US=1500000

# hpc_hooks_before_kill: after a SIGTERM that ends the job (scancel, time limit), Slurm
# kills every process KillWait seconds later. The results copy starts at once, in the
# background, budgeted to end HPC_KILL_RESERVE_US before the kill; the program gets the
# first half of KillWait to exit; then the exit hooks (the last copy of what the program
# wrote meanwhile, within the same budget; folder removal) run at once, while there is
# still time, instead of after a program that may never end. Called by the TERM handler.
hpc_hooks_before_kill() {
  local kill_wait t0=${HPC_TERM_AT_US:-${EPOCHREALTIME/[.,]/}}
  kill_wait=$(scontrol show config 2>/dev/null | awk '$1 == "KillWait" { print $3 + 0 }')
  [[ $kill_wait =~ ^[0-9]+$ ]] && ((kill_wait > 0)) || kill_wait=30
  HPC_RESULTS_DEADLINE_US=$((t0 + kill_wait * 1000000 - HPC_KILL_RESERVE_US))
  if [[ -n ${HPC_RESULTS_DIR:-} && -n ${HPC_RESULTS_DEST:-} ]]; then
    hpc_log "results: copying to $HPC_RESULTS_DEST now, within the $kill_wait s Slurm gives before its kill"
    HPC_RESULTS_EARLY_COPY=1 hpc_results_sync </dev/null &
    HPC_RESULTS_EARLY_PID=$!
  fi
  while [[ -n ${HPC_CHILD_PID:-} ]] && kill -0 "$HPC_CHILD_PID" 2>/dev/null &&
    ((${EPOCHREALTIME/[.,]/} - t0 < kill_wait * 500000)); do
    sleep 0.1
  done
  hpc_run_exit_hooks_now 143
}
