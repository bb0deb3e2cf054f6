# shellcheck shell=bash
# Results of the ranks on a multi-node job's other nodes, sourced by task_wrapper.sh (every
# srun task of the script, torchrun and lightning launchers). The batch shell's
# $HPC_RESULTS_DIR is the first node's folder (staging.sh), which other nodes may not see
# (a node-local disk of their own at the same path, a private /tmp): on node K > 0
# ($SLURM_NODEID) each task gets this node's own folder under this node's $SLURM_TMPDIR,
# and when it ends copies what is there to $HPC_RESULTS_DEST/node_K (the first node's
# results land in $HPC_RESULTS_DEST itself, copied by the batch shell). Tasks on one node
# take turns (the same lock as staging.sh's copy); the last one to end copies everything.
#   hpc_node_results_setup   on node K > 0: HPC_RESULTS_DIR = this node's folder, made
#   hpc_node_results_copy    on node K > 0: copy it to $HPC_RESULTS_DEST/node_K

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

HPC_NODE_RESULTS_DEST=""

# hpc_node_results_setup: see the header. Nothing on the first node or without results.
hpc_node_results_setup() {
  HPC_NODE_RESULTS_DEST=""
  [[ -n ${HPC_RESULTS_DIR:-} && -n ${HPC_RESULTS_DEST:-} && -n ${SLURM_TMPDIR:-} ]] || return 0
  [[ ${SLURM_NODEID:-0} =~ ^[1-9][0-9]*$ ]] || return 0
  # --results-dir is relative to $SLURM_TMPDIR (hpc_files/lib/staging.sh refuses others).
  export HPC_RESULTS_DIR=$SLURM_TMPDIR/${HPC_RESULTS_FOLDER:-results}
  HPC_NODE_RESULTS_DEST=$HPC_RESULTS_DEST/node_$SLURM_NODEID
  mkdir -p -- "$HPC_RESULTS_DIR" || {
    hpc_error "cannot create this node's results folder $HPC_RESULTS_DIR"
    return 1
  }
}

# hpc_node_results_copy: copy this node's results folder (when it holds a file) to
# HPC_NODE_RESULTS_DEST (rsync -a, else cp -a; nothing deleted there). Returns non-zero,
# with the reason in the log, when the copy failed.
hpc_node_results_copy() {
  local src=${HPC_RESULTS_DIR:-} dest=$HPC_NODE_RESULTS_DEST out rc=0
  [[ -n $dest && -d $src ]] || return 0
  hpc_dir_has_file "$src" || return 0
  local copy=(cp -a -- "$src/." "$dest/") lock=()
  command -v rsync >/dev/null && copy=(rsync -a -- "$src/" "$dest/")
  command -v flock >/dev/null && lock=(flock "$SLURM_TMPDIR/.hpc_results.lock")
  out=$(mkdir -p -- "$dest" 2>&1 && _hpc_node_results_ours "$dest" && "${lock[@]}" "${copy[@]}" 2>&1) || rc=$?
  if ((rc != 0)); then
    hpc_error "results of node ${SLURMD_NODENAME:-$SLURM_NODEID}: copying $src to $dest failed (${copy[0]} exit $rc): ${out:0:2000}"
    _hpc_node_results_keep "$src" "${lock[@]}"
    return 1
  fi
  hpc_log "results of node ${SLURMD_NODENAME:-?} (rank ${SLURM_PROCID:-?}): copied to $dest"
}

# _hpc_node_results_ours DEST: DEST is this user's folder (not another user's, reached
# through a link): else it says so and fails (issue 32).
_hpc_node_results_ours() {
  [[ -O $1 || $(stat -L -c %u -- "$1" 2>/dev/null) == 65534 ]] && return 0 # (65534: staging.sh)
  echo "$1 belongs to $(stat -L -c %U -- "$1" 2>/dev/null || echo 'another user'), not to you: nothing is copied there"
  return 1
}

# _hpc_node_results_keep SRC [LOCK...]: what did not come back is kept on $SCRATCH, in
# $HPC_EXP_DIR/.hpc_results_kept[/task_I]/attempt_N/node_K (modes kept, the folder private):
# the batch shell of a later attempt (or of a --rerun) brings it back to results/node_K
# (staging.sh: _hpc_results_bring_back). Issue 32: nothing is lost at a requeue.
_hpc_node_results_keep() {
  local src=$1 kept copy out
  shift
  [[ -n ${HPC_EXP_DIR:-} && ${SLURM_NODEID:-0} =~ ^[1-9][0-9]*$ ]] || return 0
  kept=$HPC_EXP_DIR/.hpc_results_kept${HPC_TASK_SUBDIR-}/attempt_$((${SLURM_RESTART_COUNT:-0} + 1))/node_$SLURM_NODEID
  copy=(cp -a -- "$src/." "$kept/")
  command -v rsync >/dev/null && copy=(rsync -a -- "$src/" "$kept/")
  local made=""
  [[ -e $kept ]] || made=yes
  if out=$( (umask 077 && mkdir -p -- "$HPC_EXP_DIR/.hpc_results_kept") 2>&1 && mkdir -p -- "$kept" 2>&1 &&
    "$@" "${copy[@]}" 2>&1); then
    hpc_error "results of node ${SLURMD_NODENAME:-$SLURM_NODEID} are kept in $kept: a later attempt of the job, or a --rerun, copies them to $HPC_NODE_RESULTS_DEST"
  else
    # (a part copy is no kept result: a later bring-back would take it for one)
    [[ -z $made ]] || rm -rf -- "$kept"
    hpc_error "results of node ${SLURMD_NODENAME:-$SLURM_NODEID} could not be kept in $kept either (${out:0:500}): they are lost with the node's folder"
  fi
}